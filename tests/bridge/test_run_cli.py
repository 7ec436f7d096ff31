"""``ucudnn run``: the environment it gives the command, and the command's exit status as its own."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tests._sanitizer import as_child_gets

from .conftest import FakeBuild, clean_env, run_cmd

# Runs the CLI with the preload path pointed at `preload` (the real shim may not be built in every checkout).
LAUNCH = (
    "import sys; from pathlib import Path; from ucudnn import _paths; _paths.PRELOAD = Path(sys.argv.pop(1)); "
    "from ucudnn.cli import main; sys.exit(main(sys.argv[1:]))"
)
SHOW_ENV = (
    "import json, os; print(json.dumps({k: v for k, v in os.environ.items() "
    "if k.startswith(('UCUDNN_', 'LD_PRELOAD', 'TORCH_'))}))"
)


def ucudnn_run(
    preload: Path, *args: str, env: dict[str, str] | None = None, cwd: Path | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", LAUNCH, str(preload), "run", *args],
        env=clean_env(env),
        capture_output=True,
        text=True,
        timeout=60,
        cwd=cwd,
    )


def test_environment_of_the_command(fake_build: FakeBuild, tmp_path: Path) -> None:
    # The fake shim is a real preloadable library, so the child really starts with it preloaded.
    proc = ucudnn_run(
        fake_build.shim,
        "--policy",
        "all",
        "--workspace",
        "8MiB",
        "--database",
        "rel/cache.sqlite",
        "--stats-file",
        "stats.json",
        "--",
        sys.executable,
        "-c",
        SHOW_ENV,
        env={"LD_PRELOAD": "libfirst.so:libsecond.so", "UCUDNN_TOTAL_WORKSPACE_SIZE": "1GiB"},
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr
    env = json.loads(proc.stdout)
    assert env.pop("UCUDNN_RUN_PID").isdigit()  # the program's own pid (exec keeps it)
    given = as_child_gets({"LD_PRELOAD": "libfirst.so:libsecond.so"})["LD_PRELOAD"]  # the sanitizer tier's runtime
    assert env == {
        "LD_PRELOAD": f"{fake_build.shim} {given.replace(':', ' ')}",
        "UCUDNN_BATCH_SIZE_POLICY": "all",
        "UCUDNN_DEFAULT_WORKSPACE_LIMIT": "8MiB",
        "UCUDNN_DATABASE": str(tmp_path / "rel" / "cache.sqlite"),
        "UCUDNN_STATS_FILE": str(tmp_path / "stats.json"),
        "UCUDNN_TOTAL_WORKSPACE_SIZE": "1GiB",  # untouched: no option given for it
    }


def test_torch_api_graph_leaves_pytorch_on_its_default_path(fake_build: FakeBuild) -> None:
    args = ("--", sys.executable, "-c", SHOW_ENV)
    inherited = {"TORCH_CUDNN_V8_API_DISABLED": "1"}
    graph = ucudnn_run(fake_build.shim, "--torch-api", "graph", *args, env=inherited)
    legacy = ucudnn_run(fake_build.shim, "--torch-api", "legacy", *args)
    assert graph.returncode == 0 and legacy.returncode == 0, graph.stderr + legacy.stderr
    assert "TORCH_CUDNN_V8_API_DISABLED" not in json.loads(graph.stdout)
    assert json.loads(legacy.stdout)["TORCH_CUDNN_V8_API_DISABLED"] == "1"
    # By default PyTorch stays on its default path (graph), and a user's own choice of the legacy one stands.
    default = ucudnn_run(fake_build.shim, *args)
    own = ucudnn_run(fake_build.shim, *args, env=inherited)
    assert "TORCH_CUDNN_V8_API_DISABLED" not in json.loads(default.stdout)
    assert json.loads(own.stdout)["TORCH_CUDNN_V8_API_DISABLED"] == "1"
    bad = ucudnn_run(fake_build.shim, "--torch-api", "v8", *args)
    assert bad.returncode == 2 and "--torch-api" in bad.stderr


def test_exit_status_is_the_commands(fake_build: FakeBuild) -> None:
    proc = ucudnn_run(fake_build.shim, "--", sys.executable, "-c", "import sys; sys.exit(7)")
    assert proc.returncode == 7
    proc = ucudnn_run(fake_build.shim, "--", sys.executable, "-c", "import os, signal; os.kill(os.getpid(), 9)")
    assert proc.returncode == -9  # exec: the signal reaches our parent as the command's own


def test_errors(fake_build: FakeBuild, tmp_path: Path) -> None:
    missing = ucudnn_run(tmp_path / "libucudnn.so", "--", "true")
    assert missing.returncode == 2
    assert "libucudnn.so is not built" in missing.stderr
    bad = ucudnn_run(fake_build.shim, "--workspace", "lots", "--", "true")
    assert bad.returncode == 2 and "--workspace=" in bad.stderr and "UCUDNN_DEFAULT_WORKSPACE_LIMIT" in bad.stderr
    bad = ucudnn_run(fake_build.shim, "--policy", "sometimes", "--", "true")
    assert bad.returncode == 2 and "UCUDNN_BATCH_SIZE_POLICY" in bad.stderr
    assert ucudnn_run(fake_build.shim).returncode == 2
    notfound = ucudnn_run(fake_build.shim, "--", str(tmp_path / "no-such-program"))
    assert notfound.returncode == 127 and "command not found" in notfound.stderr


def test_console_script_knows_run() -> None:
    proc = run_cmd([sys.executable, "-c", "from ucudnn.cli import main; main(['run', '--help'])"], clean_env())
    assert proc.returncode == 0 and "--workspace" in proc.stdout


def test_preset_sets_the_policy_and_options_override_it(fake_build: FakeBuild) -> None:
    show = ("--", sys.executable, "-c", SHOW_ENV)
    tight = ucudnn_run(fake_build.shim, "--preset", "tight", *show)
    assert tight.returncode == 0, tight.stderr
    env = json.loads(tight.stdout)
    assert env["UCUDNN_BATCH_SIZE_POLICY"] == "powerOfTwo" and env["UCUDNN_DEFAULT_WORKSPACE_LIMIT"] == str(8 << 20)
    mine = ucudnn_run(fake_build.shim, "--preset", "tight", "--workspace", "1MiB", "--policy", "all", *show)
    assert mine.returncode == 0, mine.stderr
    env = json.loads(mine.stdout)
    assert env["UCUDNN_BATCH_SIZE_POLICY"] == "all" and env["UCUDNN_DEFAULT_WORKSPACE_LIMIT"] == "1MiB"
    bad = ucudnn_run(fake_build.shim, "--preset", "roomy", *show)
    assert bad.returncode == 2 and "--preset" in bad.stderr and "memory-saver" in bad.stderr


def test_errors_name_the_option_typed(fake_build: FakeBuild) -> None:
    # A preset given as --policy (the batch-size policy) is pointed at --preset.
    bad = ucudnn_run(fake_build.shim, "--policy", "tight", "--", "true")
    assert bad.returncode == 2 and bad.stderr.startswith("ucudnn run: --policy='tight'")
    assert "--preset tight" in bad.stderr
    bad = ucudnn_run(fake_build.shim, "--total-workspace", "huge", "--", "true")
    assert bad.returncode == 2 and bad.stderr.startswith("ucudnn run: --total-workspace='huge'")


def test_a_new_database_directory_is_created_and_said(fake_build: FakeBuild, tmp_path: Path) -> None:
    target = tmp_path / "new" / "cache.sqlite"
    first = ucudnn_run(fake_build.shim, "--database", str(target), "--", "true")
    assert first.returncode == 0 and f"created directory {target.parent}" in first.stderr
    assert target.parent.is_dir() and not target.exists()
    again = ucudnn_run(fake_build.shim, "--database", str(target), "--", "true")
    assert again.returncode == 0 and "created" not in again.stderr


def test_a_mistyped_option_is_answered_by_the_subcommand_with_the_option_meant(fake_build: FakeBuild) -> None:
    # Was: the top-level usage (`ucudnn [-h] [--version] COMMAND ...`) and no suggestion.
    for typed in (("--worksapce", "64MiB"), ("--worksapce=64MiB",)):
        bad = ucudnn_run(fake_build.shim, *typed, "--", sys.executable, "-c", "print('ran')")
        assert bad.returncode == 2 and "ran" not in bad.stdout, bad.stderr
        assert bad.stderr.startswith("usage: ucudnn run "), bad.stderr
        assert bad.stderr.rstrip().endswith("ucudnn run: error: unrecognized arguments: "
                                            f"{typed[0]} (did you mean --workspace?)"), bad.stderr  # fmt: skip
    # The program's own options after `--` are its business.
    ok = ucudnn_run(fake_build.shim, "--", sys.executable, "-c", "print('ran')", "--worksapce")
    assert ok.returncode == 0 and "ran" in ok.stdout, ok.stderr


def test_every_subcommand_and_the_benchmark_suggest_the_option_meant() -> None:
    cases = {
        ("-m", "ucudnn.cli", "db", "stats", "--databse", "x.sqlite"): "ucudnn db stats: error: ",
        ("-m", "ucudnn.cli", "plan", "--tabel", "t.json", "--list"): "ucudnn plan: error: ",
        ("-m", "ucudnn.bench.cli", "--quick", "--worksapce", "1MiB"): "ucudnn-bench: error: ",
    }
    meant = {"--databse": "--database", "--tabel": "--table", "--worksapce": "--workspace"}
    for argv, prefix in cases.items():
        proc = run_cmd([sys.executable, *argv], clean_env())
        typo = next(a for a in argv if a in meant)
        assert proc.returncode == 2, proc.stderr
        (line,) = [ln for ln in proc.stderr.splitlines() if ln.startswith(prefix)]
        assert f"did you mean {meant[typo]}?" in line, proc.stderr


def test_a_blank_file_option_is_unset(fake_build: FakeBuild, tmp_path: Path) -> None:
    """Blank means unset, for options as for variables. Was: made absolute before the check, "  " named a file of
    spaces in the working directory, `--database=` the working directory itself, and `--stats-file=` exited 2 (Is
    a directory) without running the program."""
    for value in ("", "  "):
        proc = ucudnn_run(fake_build.shim, f"--database={value}", f"--stats-file={value}", "--", sys.executable, "-c",
                          SHOW_ENV, cwd=tmp_path)  # fmt: skip
        assert proc.returncode == 0, proc.stderr
        env = json.loads(proc.stdout)
        assert env["UCUDNN_DATABASE"] == value and env["UCUDNN_STATS_FILE"] == value  # blank: the defaults
        assert list(tmp_path.iterdir()) == []


def test_a_database_that_is_not_a_ucudnn_cache_is_refused_and_left_alone(fake_build: FakeBuild, tmp_path: Path) -> None:
    notes = tmp_path / "notes2.py"
    notes.write_text("print('my notes')\n")
    for how in (("--database", str(notes)), ()):
        proc = ucudnn_run(fake_build.shim, *how, "--", sys.executable, "-c", "print('ran')",
                          env={"UCUDNN_DATABASE": str(notes)} if not how else None)  # fmt: skip
        assert proc.returncode == 2 and "ran" not in proc.stdout, proc.stderr
        assert proc.stderr == f"ucudnn run: {notes} is not a ucudnn cache: it is not an SQLite database; it was left " \
                              "as it is (name another file)\n"  # fmt: skip
    assert notes.read_text() == "print('my notes')\n" and [p.name for p in tmp_path.iterdir()] == ["notes2.py"]
