"""``ucudnn run [options] -- CMD ...``: run an unmodified program with the preload library.

The command replaces this process (exec), so its exit status, signals and terminal are the program's own. Its
environment gets ``LD_PRELOAD`` with libucudnn.so in front of any existing entries and the ``UCUDNN_*`` variables
the options set (``--preset``: those of a named policy of ``ucudnn.policy``, under the other options). PyTorch
stays on its default cuDNN path, the graph API (``--torch-api graph`` also removes an inherited
``TORCH_CUDNN_V8_API_DISABLED``); ``--torch-api legacy`` sets ``TORCH_CUDNN_V8_API_DISABLED=1`` for its legacy
convolution path. Frameworks that dlopen cuDNN (JAX/XLA, TensorFlow, ONNX Runtime, PaddlePaddle) need nothing
more: the preload library's own dlsym reaches them (x86-64), which is one more reason it goes first in
``LD_PRELOAD``. Exit status 2: a bad option or no built shim; 127: the command was not found.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

from ucudnn import _paths, config
from ucudnn.cli._files import NotACache, blank, ensure_parent, refuse_foreign
from ucudnn.policy import PRESETS, preset

# Option destination -> the variable it sets, parsed and checked with that variable's declaration.
_OPTION_VARS: tuple[tuple[str, str], ...] = (
    ("policy", "UCUDNN_BATCH_SIZE_POLICY"),
    ("workspace", "UCUDNN_DEFAULT_WORKSPACE_LIMIT"),
    ("total_workspace", "UCUDNN_TOTAL_WORKSPACE_SIZE"),
    ("database", "UCUDNN_DATABASE"),
    ("stats_file", "UCUDNN_STATS_FILE"),
    ("log_level", "UCUDNN_LOG_LEVEL"),
)
_PATH_OPTIONS = {"database", "stats_file"}


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "run",
        help="run a program with the preload library (micro-batched cuDNN convolutions)",
        description="Run CMD with libucudnn.so preloaded. Put `--` before CMD.",
    )
    policies = config.BY_NAME["UCUDNN_BATCH_SIZE_POLICY"].choices
    p.add_argument(
        "--preset",
        choices=tuple(PRESETS),
        metavar="NAME",
        help=f"a named policy (ucudnn.policy.preset): {', '.join(PRESETS)}; the options below override it",
    )
    p.add_argument("--policy", metavar="P", help=f"batch-size policy: {', '.join(policies)}")
    p.add_argument(
        "--workspace",
        metavar="LIMIT",
        help="per-kernel workspace cap, e.g. 64MiB (default: auto, the workspace the framework gives)",
    )
    p.add_argument("--total-workspace", metavar="SIZE", help="network-wide workspace budget (Workspace Division)")
    p.add_argument("--database", metavar="PATH", help="SQLite cache of benchmarks and plans")
    p.add_argument("--stats-file", metavar="F", help="write the shim's counters there as JSON at exit")
    p.add_argument("--log-level", metavar="LEVEL", help="error, warning, info or debug")
    p.add_argument(
        "--torch-api",
        choices=("legacy", "graph"),
        default=None,
        help="PyTorch's cuDNN path: graph (the cuDNN graph API, PyTorch's own default; also removes an inherited "
        "TORCH_CUDNN_V8_API_DISABLED) or legacy (sets TORCH_CUDNN_V8_API_DISABLED=1: the legacy convolution API, "
        "where the framework's workspace queries are planned too). Default: the environment's choice, else graph",
    )
    p.add_argument("command", nargs=argparse.REMAINDER, metavar="-- CMD ...", help="the program and its arguments")
    p.set_defaults(func=run)


def build_environment(args: argparse.Namespace, base: Mapping[str, str], preload: Path) -> dict[str, str]:
    """The command's environment: ``base`` plus the preload and the options' variables.

    Raises config.ConfigError (naming the option, then the variable it sets) for a bad option value.
    """
    env = dict(base)
    if getattr(args, "preset", None) is not None:
        env.update(preset(args.preset).to_env())
    shim = str(preload)
    # LD_PRELOAD takes spaces or colons; keep the user's entries, after ours, without repeating ours.
    existing = [e for e in env.get("LD_PRELOAD", "").replace(":", " ").split() if e and e != shim]
    env["LD_PRELOAD"] = " ".join([shim, *existing])
    torch_api = getattr(args, "torch_api", None)
    if torch_api == "legacy":
        env["TORCH_CUDNN_V8_API_DISABLED"] = "1"
    elif torch_api == "graph":
        env.pop("TORCH_CUDNN_V8_API_DISABLED", None)
    for dest, name in _OPTION_VARS:
        value = getattr(args, dest, None)
        if value is None:
            continue
        text = str(value)
        if dest in _PATH_OPTIONS and not blank(text):
            # The program may change directory; the file it means is the one relative to here. (Blank is unset,
            # checked first: a blank made absolute would name the working directory or a file named by spaces.)
            text = str(Path(text).expanduser().resolve())
        try:
            config.parse(config.BY_NAME[name], text)
        except config.ConfigError as exc:
            raise config.ConfigError(_option_error(dest, name, text, str(exc))) from None
        env[name] = text
    # exec keeps the pid: the program itself (not its children) says at exit if the shim saw no cuDNN call.
    env["UCUDNN_RUN_PID"] = str(os.getpid())
    return env


def _drop_stale_stats(env: Mapping[str, str]) -> None:
    """The stats file of an earlier run would otherwise survive a program whose calls the shim never sees."""
    target = env.get("UCUDNN_STATS_FILE", "")
    if target.strip() and "%p" not in target:  # blank is unset; otherwise the path as the shim reads it
        Path(target).unlink(missing_ok=True)


def _option_error(dest: str, name: str, text: str, message: str) -> str:
    """The variable's message, about the option the user typed: ``--workspace='lots': expected ...``."""
    option = "--" + dest.replace("_", "-")
    message = message.replace(f"{name}=", f"{option}=", 1)
    if dest == "policy" and text in PRESETS:
        message += f" ({text!r} is a preset: --preset {text})"
    return f"{message} (the option sets {name})"


def _fail(message: str, status: int = 2) -> int:
    print(f"ucudnn run: {message}", file=sys.stderr)
    return status


def run(args: argparse.Namespace) -> int:
    command: list[str] = list(args.command)
    if command[:1] == ["--"]:
        command = command[1:]
    if not command:
        return _fail("no command given (usage: ucudnn run [options] -- CMD ...)")
    try:
        env = build_environment(args, os.environ, _paths.PRELOAD)
    except config.ConfigError as exc:
        return _fail(str(exc))
    # What the command inherits obeys the rule the preload library and the planner apply, checked before it starts.
    bad, unknown = config.check_environment(env)
    for message in bad:
        print(f"ucudnn run: {message}", file=sys.stderr)
    if bad:
        return 2
    for name in unknown:
        print(
            f"ucudnn run: warning: {name} is not a ucudnn variable (`python -m ucudnn.config` lists them)",
            file=sys.stderr,
        )
    try:
        _paths.require(_paths.PRELOAD)
    except _paths.NotBuiltError as exc:
        return _fail(str(exc).removeprefix("ucudnn: "))
    try:
        for dest, name in _OPTION_VARS:
            if dest in _PATH_OPTIONS and getattr(args, dest, None) is not None and not blank(env[name]):
                ensure_parent(Path(env[name]), "ucudnn run")  # the program writes there
        refuse_foreign(config.database_path(env))  # the program's planner would plan in memory only
        _drop_stale_stats(env)
    except NotACache as exc:
        return _fail(str(exc))
    except OSError as exc:
        return _fail(f"cannot prepare {exc.filename or 'a file'}: {exc.strerror or exc}")
    sys.stdout.flush()
    sys.stderr.flush()
    return _exec(command, env)


def _exec(command: Sequence[str], env: Mapping[str, str]) -> int:
    try:
        os.execvpe(command[0], list(command), dict(env))
    except FileNotFoundError:
        return _fail(f"{command[0]}: command not found", 127)
    except PermissionError as exc:
        return _fail(f"{command[0]}: {exc.strerror}", 126)
    except OSError as exc:
        return _fail(f"cannot run {command[0]}: {exc}", 126)
    raise AssertionError("unreachable: execvpe returned")  # pragma: no cover
