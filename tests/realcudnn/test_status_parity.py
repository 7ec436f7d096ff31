"""The descriptor sequences of a real client against NVIDIA's libcudnn.so.9 on a CPU: with and without the preload
library the statuses (and engine counts) are the same, and the host backend answers every status as it does.

Without a GPU driver the real library's sub-libraries do not load (tensor Finalize answers 1008,
SUBLIBRARY_LOADING_FAILED), so the probe runs with stand-ins of ours for ``libcuda.so.1`` and
``libcublasLt.so.13`` (standin/*.c) that merely resolve and report no device. Descriptor calls then behave as on a
GPU machine: tensors, convolutions, pointwise descriptors (ReLU's NAN_PROPAGATION included), operations, operation
graphs, engines and heuristics with their counts. Engine configurations, plans and execution need a device and
are left out (the real-client tier, tests/frontend, covers them on the host backend).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from ucudnn import _paths

from .conftest import probe_env
from .test_descriptors import _real_libcudnn

pytestmark = pytest.mark.realcudnn

HERE = Path(__file__).resolve().parent
PROBE = HERE / "status_probe.py"
OPS = ("fprop", "dgrad", "wgrad")
HEUR_MODES = ("instant", "fallback", "a")


def probe(lib: Path, *, standins: Path | None = None, preload: bool = False, local: bool = False, tmp: Path,
          ) -> dict[str, Any]:  # fmt: skip
    env = probe_env(standins=standins, preload=preload)
    env["UCUDNN_DATABASE"] = str(tmp / "cache.sqlite")
    args = [sys.executable, str(PROBE), str(lib), *(["local"] if local else [])]
    proc = subprocess.run(args, capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr[-4000:]
    result: dict[str, Any] = json.loads(proc.stdout)
    return result


@pytest.fixture(scope="module")
def runs(standin_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, Any]]:
    real = _real_libcudnn()
    tmp = tmp_path_factory.mktemp("parity")
    return {
        "real": probe(real, standins=standin_dir, tmp=tmp),
        "real+preload": probe(real, standins=standin_dir, preload=True, tmp=tmp),
        "real+dlopen+preload": probe(real, standins=standin_dir, preload=True, local=True, tmp=tmp),
        "host": probe(_paths.HOST_CUDNN, tmp=tmp),
    }


def test_the_standins_make_descriptor_calls_work(runs: dict[str, dict[str, Any]]) -> None:
    """Tensors finalize (not 1008) and heuristics answer engines: the comparison below compares working calls."""
    statuses = runs["real"]["statuses"]
    assert statuses["tensors"][:6] == [0] * 6
    counts = runs["real"]["values"]["heuristics"]
    assert all(n > 0 for n in counts), counts


def test_preload_library_keeps_every_status_and_count(runs: dict[str, dict[str, Any]]) -> None:
    hooked = dict(runs["real+preload"])
    assert hooked.pop("graph_calls") > 500  # every call went through the hooks
    assert hooked.pop("dlsym_hooked") == 0  # reached by linking, not through dlsym
    assert "graph_calls" not in runs["real"]
    assert hooked == runs["real"]


def test_a_framework_that_dlopens_the_real_library_is_seen_and_keeps_every_status(
    runs: dict[str, dict[str, Any]],
) -> None:
    """cuDNN 9's front library dlsyms the same names in libcudnn_graph.so.9: the preload library's dlsym hooks the
    client's lookups on the front library's handle (the six backend calls ucudnn.graph_api.Backend binds) and never
    the front library's own, which would recurse. Same statuses and counts as the real library alone."""
    hooked = dict(runs["real+dlopen+preload"])
    assert hooked.pop("graph_calls") > 500
    assert hooked.pop("dlsym_hooked") == 7  # each name once (the six and Initialize): ctypes caches them
    assert hooked == runs["real"]


@pytest.mark.parametrize(
    "sequence", ["tensors", "convolution", "pointwise", "operations", "fused", "engines", "knob_choices", "heuristics"]
)
def test_host_backend_answers_the_real_statuses(runs: dict[str, dict[str, Any]], sequence: str) -> None:
    assert runs["host"]["statuses"][sequence] == runs["real"]["statuses"][sequence]


def test_fallback_lists_are_shorter_than_instant(runs: dict[str, dict[str, Any]]) -> None:
    """Per op: [global count, INSTANT, FALLBACK, A]. The real library's FALLBACK list is its own, shorter list, and
    so is the host backend's; INSTANT and A agree in length on both."""
    for lib in ("real", "host"):
        counts = runs[lib]["values"]["heuristics"]
        for i, op in enumerate(OPS):
            total, instant, fallback, mode_a = counts[4 * i : 4 * i + 4]
            assert 0 < fallback < instant == mode_a <= total, (lib, op, counts)
