"""Real TensorFlow, a CUDA build, on a machine without a GPU: how its binaries bind the cuDNN functions, and what
runs when it is started with `ucudnn run`.

TensorFlow does not link cuDNN: libtensorflow_framework.so.2 exports a stub for each cuDNN function (275), which
loads the library with dlopen at its first call and forwards through dlsym, and TensorFlow calls the stubs through
its own PLT (libtensorflow_cc.so.2 calls some of them too). Those references are unversioned, and the dynamic
linker binds them to the first definition in the global scope: under `ucudnn run`, the preload library's hooks for
the names it hooks, TensorFlow's own stubs for every other name (docs/dlopen.md). The linker's log of every
binding (LD_BIND_NOW=1 LD_DEBUG=bindings) says which; without a GPU TensorFlow makes no cuDNN call, so what runs
is its CPU work, which must come out as alone.

TensorFlow's stubs and its loader run on a CPU too, once the loader finds a libcudnn.so.9 it can load: the host
backend. tf_stub_probe.py calls them in TensorFlow's process, through the global scope where TensorFlow's own calls
are bound, alone and under `ucudnn run`: under it each hooked call goes hook, stub, TensorFlow's loader, cuDNN, the
chain TensorFlow takes on a GPU, and is planned and micro-batched like any other.

The interpreter comes from UCUDNN_TEST_TENSORFLOW_PYTHON (`.ci/run` makes one: tensorflow==2.21.0 in
build/tf-client, with ucudnn installed beside it for the planner the preload library imports)."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tests.preload.conftest import preload_build
from ucudnn import _paths
from ucudnn import testing as T

from ._linker import Run, framework_python, run_probe

pytestmark = pytest.mark.realclient

TF_INSTALL = "python -m venv build/tf-client && build/tf-client/bin/pip install tensorflow==2.21.0"
STUBS = "libtensorflow_framework.so.2"


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> tuple[Run, Run]:
    check = "import tensorflow as tf; print(tf.test.is_built_with_cuda())"
    python = framework_python("UCUDNN_TEST_TENSORFLOW_PYTHON", check, TF_INSTALL)
    folder = tmp_path_factory.mktemp("tensorflow")

    def tf_library(path: Path) -> bool:  # tensorflow/libtensorflow_*.so.2
        return path.parent.name == "tensorflow"

    alone = run_probe(python, "tests.frameworks.tf_probe", folder / "alone", under=False, binder=tf_library)
    under = run_probe(python, "tests.frameworks.tf_probe", folder / "under", under=True, binder=tf_library)
    return alone, under


def test_tensorflow_binds_each_hooked_cudnn_function_it_calls_to_the_preload_library(runs: tuple[Run, Run]) -> None:
    alone, under = runs
    hooks = set(preload_build().hook_names())
    assert set(alone.bindings) == set(under.bindings)
    referenced = {name for _, name in alone.bindings}
    # TensorFlow 2.21 convolves through the graph API: these are the calls ucudnn must see.
    graph_api = {"cudnnBackendCreateDescriptor", "cudnnBackendDestroyDescriptor", "cudnnBackendSetAttribute",
                 "cudnnBackendGetAttribute", "cudnnBackendFinalize", "cudnnBackendExecute"}  # fmt: skip
    assert graph_api <= referenced & hooks
    assert {binder for binder, _ in alone.bindings} == {STUBS, "libtensorflow_cc.so.2"}
    assert len(referenced - hooks) > 20  # descriptors, normalization, RNNs: TensorFlow's stubs
    for key, (target, version) in alone.bindings.items():
        assert (Path(target).name, version) == (STUBS, ""), key
    for (binder, name), (target, version) in under.bindings.items():
        want = "libucudnn.so" if name in hooks else STUBS
        assert (Path(target).name, version) == (want, ""), f"{binder}'s {name} is bound to {target}"


def test_tensorflow_runs_as_alone_under_ucudnn(runs: tuple[Run, Run]) -> None:
    alone, under = runs
    assert alone.result["built_with_cuda"] and alone.result["gpus"] == 0
    assert not alone.result["preloaded"] and under.result["preloaded"]
    for key in ("tensorflow", "cudnn_version", "gpus", "digest", "libcudnn"):
        assert under.result[key] == alone.result[key], key
    assert alone.result["libcudnn"] == []  # the stubs load cuDNN at their first call, and none was made
    assert under.stats is not None
    assert under.stats["calls"] == 0 and under.stats["graph_calls"] == 0 and under.stats["real_version"] == 0


# ---- TensorFlow's stubs and loader, driven on the CPU (tf_stub_probe.py) ----
# The stubs load whatever libcudnn.so.9 TensorFlow's loader finds first: the host backend, through LD_LIBRARY_PATH.
# The probe calls through the global scope, where TensorFlow's own calls are bound; a framework's legacy choice
# within MEMORY bytes (Get*_v7's first row that fits), and a graph of the forward engine whose workspace grows
# with N. Model timing: the same choices every run.
MEMORY = 2500 << 10
GRAPH_LIMIT = 1 << 20
OUTPUTS = ("legacy_fwd", "legacy_bwd_data", "legacy_bwd_filter", "graph_fwd")


@dataclass(frozen=True)
class StubRun:
    result: dict[str, Any]
    stats: dict[str, Any] | None
    stderr: str
    arrays: dict[str, np.ndarray]


def run_stub_probe(python: str, folder: Path, ucudnn_args: tuple[str, ...] | None) -> StubRun:
    """tf_stub_probe.py alone (``ucudnn_args`` None) or under `ucudnn run ARGS`."""
    env = {
        "LD_LIBRARY_PATH": str(_paths.HOST_CUDNN.parent),
        "UCUDNN_HOST_TIMING": "model",
        "UCUDNN_HOST_DEVICE_MEMORY": str(MEMORY),  # under ucudnn's defaults, what the framework can allocate
        "UCUDNN_DATABASE": str(folder / "cache.sqlite"),
    }
    run = run_probe(python, "tests.frameworks.tf_stub_probe", folder, under=ucudnn_args is not None, env=env,
                    args=(str(folder), str(MEMORY)), ucudnn_args=ucudnn_args or ())  # fmt: skip
    arrays = {name: np.load(folder / f"{name}.npy") for name in (*OUTPUTS, "x", "w", "dy")}
    return StubRun(run.result, run.stats, run.stderr, arrays)


@pytest.fixture(scope="module")
def stub_runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, StubRun]:
    check = "import tensorflow as tf, ucudnn.optimizer, cffi; print(tf.test.is_built_with_cuda())"
    install = f"{TF_INSTALL} cffi scipy scipy-openblas32 && build/tf-client/bin/pip install --no-deps -e ."
    python = framework_python("UCUDNN_TEST_TENSORFLOW_PYTHON", check, install)
    if not _paths.HOST_CUDNN.exists():
        pytest.fail(f"the host backend is not built ({_paths.HOST_CUDNN}): run `pip install -e .`", pytrace=False)
    folder = tmp_path_factory.mktemp("tensorflow-stubs")
    return {
        "alone": run_stub_probe(python, folder / "alone", None),
        "defaults": run_stub_probe(python, folder / "defaults", ()),
        "limit": run_stub_probe(python, folder / "limit", ("--workspace", str(GRAPH_LIMIT))),
    }


def test_tensorflow_stubs_load_the_host_backend_and_compute_the_reference(stub_runs: dict[str, StubRun]) -> None:
    alone = stub_runs["alone"].result
    stubs = alone["stubs"]
    assert Path(stubs).name == STUBS
    assert set(alone["definitions"].values()) == {stubs}  # every name, hooked or not, is TensorFlow's stub
    host = [str(_paths.HOST_CUDNN.resolve())]
    assert alone["loaded_before"] == []  # no cuDNN until the first call...
    assert alone["first_call"] == {"status": 0, "loaded": host}  # ...then the one TensorFlow's loader found
    assert alone["libcudnn"] == host
    a = stub_runs["alone"].arrays
    params = T.ConvParams.make(2, pad=1)
    T.assert_close(a["legacy_fwd"], T.conv_forward(a["x"], a["w"], params), np.float32, "forward")
    T.assert_close(a["graph_fwd"], T.conv_forward(a["x"], a["w"], params), np.float32, "graph forward")
    T.assert_close(a["legacy_bwd_data"], T.conv_backward_data(a["w"], a["dy"], params, a["x"].shape), np.float32,
                   "backward data")  # fmt: skip
    T.assert_close(a["legacy_bwd_filter"], T.conv_backward_filter(a["x"], a["dy"], params, a["w"].shape),
                   np.float32, "backward filter")  # fmt: skip


def test_under_ucudnn_the_hooks_forward_to_tensorflows_stubs(stub_runs: dict[str, StubRun]) -> None:
    """Hook, stub, TensorFlow's loader, cuDNN: the stubs' own lookups, made while a hook calls them, pass through
    (redirecting them would recurse), and no lookup is taken for another copy of cuDNN."""
    alone = stub_runs["alone"].result
    for name in ("defaults", "limit"):
        run = stub_runs[name]
        stats = run.stats
        assert stats is not None
        hooked = {n: "libucudnn.so" for n in ("cudnnConvolutionForward", "cudnnBackendExecute")}
        assert {n: Path(p).name for n, p in run.result["definitions"].items()} == {"cudnnCreate": STUBS, **hooked}
        assert run.result["libcudnn"] == alone["libcudnn"], name  # one cuDNN, loaded by TensorFlow's loader
        # The process's first cuDNN call is a hooked one: the hook found TensorFlow's stub (RTLD_NEXT), which
        # loaded cuDNN as it does alone; nothing was missing.
        assert run.result["first_call"] == alone["first_call"] and stats["missing_real"] == 0, stats
        assert os.path.realpath(stats["real_library"]) == alone["stubs"], stats["real_library"]
        assert stats["real_version"] == alone["version"]
        assert stats["calls"] == 3 and stats["graph_executes"] == 1 and stats["passthrough"] == 0, stats
        assert stats["dlsym_other_cudnn"] == 0 and "another cuDNN" not in run.stderr, run.stderr[-2000:]


def test_under_defaults_a_framework_short_of_memory_gets_micro_batches_through_the_stubs(
    stub_runs: dict[str, StubRun],
) -> None:
    alone, under = stub_runs["alone"], stub_runs["defaults"]
    stats = under.stats
    assert stats is not None
    # Alone, forward within MEMORY is the index-precomputing GEMM; under ucudnn Get*_v7 lists the GEMM it could not
    # afford, micro-batched within MEMORY, first.
    assert alone.result["legacy"]["fwd"]["algo"] != under.result["legacy"]["fwd"]["algo"]
    assert all(v["workspace"] <= MEMORY for v in under.result["legacy"].values())
    assert stats["micro_batches"] > stats["calls"] and stats["divided_calls"] >= 1, stats
    assert stats["predicted_ms"] < stats["undivided_predicted_ms"], stats
    # The graph's engine is the caller's choice and nothing limits it: unchanged, bit for bit.
    assert stats["graph_conv_plans"] == 1 and stats["graph_split_plans"] == 0, stats
    assert under.result["graph_workspace"] == alone.result["graph_workspace"]
    assert np.array_equal(under.arrays["graph_fwd"], alone.arrays["graph_fwd"])
    for name in OUTPUTS:
        T.assert_close(under.arrays[name], alone.arrays[name], np.float32, name)


def test_under_a_limit_the_graph_through_the_stubs_is_micro_batched(stub_runs: dict[str, StubRun]) -> None:
    alone, limited = stub_runs["alone"], stub_runs["limit"]
    stats = limited.stats
    assert stats is not None
    assert alone.result["graph_workspace"] > GRAPH_LIMIT >= limited.result["graph_workspace"] > 0
    assert stats["graph_split_plans"] == 1 and stats["graph_micro_batches"] > 1, stats
    for name in OUTPUTS:
        T.assert_close(limited.arrays[name], alone.arrays[name], np.float32, name)
