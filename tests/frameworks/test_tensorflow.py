"""Real TensorFlow, a CUDA build, on a machine without a GPU: how its binaries bind the cuDNN functions, and what
runs when it is started with `ucudnn run`.

TensorFlow does not link cuDNN: libtensorflow_framework.so.2 exports a stub for each cuDNN function (275), which
loads the library with dlopen at its first call and forwards through dlsym, and TensorFlow calls the stubs through
its own PLT (libtensorflow_cc.so.2 calls some of them too). Those references are unversioned, and the dynamic
linker binds them to the first definition in the global scope: under `ucudnn run`, the preload library's hooks for
the names it hooks, TensorFlow's own stubs for every other name (docs/dlopen.md). The linker's log of every
binding (LD_BIND_NOW=1 LD_DEBUG=bindings) says which; without a GPU TensorFlow makes no cuDNN call, so what runs
is its CPU work, which must come out as alone.

The interpreter comes from UCUDNN_TEST_TENSORFLOW_PYTHON (`.ci/run` makes one: tensorflow==2.21.0 in
build/tf-client)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.preload.conftest import preload_build

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
