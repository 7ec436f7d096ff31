"""Real PyTorch, a CUDA build, on a machine without a GPU: how its binary binds the cuDNN functions, and what runs
when it is started with `ucudnn run`.

PyTorch's libtorch_cuda.so links libcudnn.so.9 and references its functions with the symbol version
`libcudnn.so.9`. The preload library's exports are unversioned (tests/preload/test_exports.py), and the dynamic
linker must bind each hooked name PyTorch references to them, and every other cuDNN name to NVIDIA's library,
which torch loads privately from the nvidia-cudnn wheel. The dynamic linker says so itself: LD_DEBUG=bindings with
LD_BIND_NOW=1 lists every binding at load time. Without a GPU, PyTorch makes no cuDNN call of its own, so the
probe makes the graph-API descriptor calls through the functions PyTorch is bound to and through dlsym on torch's
library handle: statuses as alone, and the shim resolves the library torch loaded, no second copy.

The interpreter comes from UCUDNN_TEST_TORCH_PYTHON (`.ci/run` makes one: torch==2.14.1 in build/torch-client)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.preload.conftest import preload_build

from ._linker import Run, framework_python, run_probe

pytestmark = pytest.mark.realclient

TORCH_INSTALL = "python -m venv build/torch-client && build/torch-client/bin/pip install torch==2.14.1"


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> tuple[Run, Run]:
    python = framework_python("UCUDNN_TEST_TORCH_PYTHON", "import torch; print(torch.version.cuda)", TORCH_INSTALL)
    folder = tmp_path_factory.mktemp("pytorch")

    def torch_library(path: Path) -> bool:  # torch/lib/*.so
        return path.parent.parent.name == "torch"

    alone = run_probe(python, "tests.frameworks.torch_probe", folder / "alone", under=False, binder=torch_library)
    under = run_probe(python, "tests.frameworks.torch_probe", folder / "under", under=True, binder=torch_library)
    return alone, under


def test_pytorch_binds_each_hooked_cudnn_function_it_references_to_the_preload_library(runs: tuple[Run, Run]) -> None:
    alone, under = runs
    alone_bindings, under_bindings = alone.bindings, under.bindings
    (torch_cudnn,) = alone.result["libcudnn"]  # NVIDIA's library, from the nvidia-cudnn wheel beside torch
    hooks = set(preload_build().hook_names())
    assert set(alone_bindings) == set(under_bindings)
    referenced = {name for _, name in alone_bindings}
    # PyTorch's legacy and graph-API convolution paths: without them bound here, the test would show nothing.
    needed = {"cudnnConvolutionForward", "cudnnConvolutionBackwardData", "cudnnConvolutionBackwardFilter",
              "cudnnGetConvolutionForwardAlgorithm_v7", "cudnnBackendExecute", "cudnnBackendFinalize"}  # fmt: skip
    assert needed <= referenced & hooks
    assert len(referenced - hooks) > 20  # descriptors, normalization, RNNs: left to cuDNN
    for (_, name), (target, version) in alone_bindings.items():
        assert (target, version) == (torch_cudnn, "libcudnn.so.9"), name
    for (_, name), (target, version) in under_bindings.items():
        assert version == "libcudnn.so.9", name
        if name in hooks:
            assert Path(target).name == "libucudnn.so", f"{name} is bound to {target}"
        else:
            assert target == torch_cudnn, f"{name} is bound to {target}"


def test_pytorch_runs_as_alone_and_the_hooks_reach_the_cudnn_it_loaded(runs: tuple[Run, Run]) -> None:
    alone, under = runs[0].result, runs[1].result
    stats = runs[1].stats
    assert stats is not None
    assert alone["torch_cuda"] and not alone["cuda_available"] and not alone["preloaded"] and under["preloaded"]
    for key in ("torch", "cudnn_version", "train_digest", "libcudnn", "libcudnn_after"):
        assert under[key] == alone[key], key
    # One NVIDIA library in the process, before and after: the shim found torch's, and loaded no other.
    assert len(alone["libcudnn"]) == 1 and under["libcudnn_after"] == alone["libcudnn"]
    assert stats["real_library"] == alone["libcudnn"][0]
    assert stats["real_version"] == alone["cudnn_version"]
    # Alone, the global scope has no cuDNN (torch loads it privately): the probe called torch's library directly.
    direct = alone["direct"]
    assert direct["statuses"][0] == 0 and direct["statuses"][-1] != 0  # created; a wrong attribute type refused
    for path in ("scope", "handle"):  # the functions PyTorch is bound to; dlsym on torch's handle
        assert under[path] == direct, path
    calls_each = len(direct["statuses"]) + direct["created"]  # destroys included
    assert stats["graph_calls"] == 2 * calls_each
    assert stats["graph_unrecorded"] == 0 and stats["calls"] == 0 and stats["queries"] == 0
    assert stats["dlsym_hooked"] >= 4  # create, set, finalize, destroy, looked up on torch's handle


def test_pytorch_still_names_the_variable_that_selects_its_legacy_path(runs: tuple[Run, Run]) -> None:
    """`ucudnn run --torch-api legacy` sets TORCH_CUDNN_V8_API_DISABLED=1: a PyTorch whose binary no longer names
    it would stay on the graph path, and the option would do nothing."""
    binary = (Path(runs[0].result["torch_lib"]) / "libtorch_cuda.so").read_bytes()
    assert b"TORCH_CUDNN_V8_API_DISABLED\0" in binary
