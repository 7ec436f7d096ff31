"""``ucudnn stats FILE``: a stats file read out with the counters' meanings; bad files get a clear error and are
left as they were. (A real run's file: tests/preload/test_example_run.py.)"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ucudnn import counters
from ucudnn.cli import main


def _file(tmp_path: Path, **values: object) -> Path:
    data: dict[str, object] = dict.fromkeys(counters.COUNTERS, 0)
    data.update({"pid": 42, "real_library": "/opt/libcudnn.so.9", "real_version": 91900, "disabled": False,
                 "division": None, "plan_cache_entries": 0, "total_workspace_size": 0})  # fmt: skip
    data.update(values)
    path = tmp_path / "stats.json"
    path.write_text(json.dumps(data))
    return path


def test_the_counters_that_moved_each_with_its_meaning(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = _file(tmp_path, calls=12, divided_calls=5, predicted_ms=1.25, some_future_counter=3)
    assert main(["stats", str(path)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "process 42; real library /opt/libcudnn.so.9 (version 91900)"
    names = [line.split()[0] for line in out[1:]]
    assert names == ["calls", "divided_calls", "predicted_ms", "some_future_counter"]  # the list's order, then unknown
    assert out[1].split(None, 2) == ["calls", "12", "legacy convolution executions the preload library saw (the "
                                     "UC_EXEC calls of shim/hooks.def)"]  # fmt: skip
    assert out[-1].endswith("(not known to this version of ucudnn)")
    assert main(["stats", "--all", str(path)]) == 0
    assert len(capsys.readouterr().out.splitlines()) == 1 + len(counters.COUNTERS) + 1


def test_a_division_and_odd_state_fields(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    division = {"kernels": 3, "budget_bytes": 1024, "workspace_bytes": 512, "time_ms": 2.5}
    assert main(["stats", str(_file(tmp_path, calls=1, division=division, disabled=True))]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[1:3] == ["disabled: every call passed through (UCUDNN_DISABLE, or a bad setting)",
                        "workspace division: 3 kernel(s), 512 of 1024 bytes, 2.5 ms predicted"]  # fmt: skip
    assert main(["stats", str(_file(tmp_path, calls=1, division=[1, 2], real_library=None))]) == 0  # never a crash
    assert capsys.readouterr().out.startswith("process 42; real library (not resolved)")


@pytest.mark.parametrize(
    ("content", "says"),
    [(None, "no such file"), ("{not json", "not a ucudnn stats file"), ('{"rows": 3}', "no counter in it"),
     ("[1, 2]", "no counter in it"), ("[" * 100_000, "nested too deeply")],
    ids=["missing", "not-json", "other-json", "a-list", "too-deep"],
)  # fmt: skip
def test_a_file_that_is_not_a_stats_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], content: str | None, says: str
) -> None:
    path = tmp_path / "stats.json"
    if content is not None:
        path.write_text(content)
    assert main(["stats", str(path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("ucudnn stats: ") and says in err and err.count("\n") == 1, err
    assert (path.read_text() if content is not None else None) == content  # read only
