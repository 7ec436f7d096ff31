"""Generate ``ucudnn/_abi.py``: the C facts the Python bindings take from the headers, never typed twice.

From ``shim/include/ucudnn/cudnn_abi.h`` and ``cudnn_graph_abi.h`` (the cuDNN legacy and graph ABI the host backend
implements and the preload library interposes): every enumerator and integer ``#define`` as a constant, and every
function's prototype as type codes (``ucudnn._cudnn_abi`` turns them into ctypes). From ``shim/hooks.def``: the
functions of each entry kind (``UC_EXEC``, ``UC_QUERY`` and ``UC_BACKEND`` are the preload library's hooks). From
``shim/core/uc_stats.def``: the counters of the stats JSON and their meanings.

setup.py runs this after the native libraries (the module lands beside ``_lib`` in the package); in a development
tree ``python shim/build/pyabi.py`` regenerates it in place. Build-only code: never shipped in the wheel. A type
this script does not know stops the build, naming it: a binding must not guess an argument's size.
"""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
HEADERS = (
    ROOT / "shim" / "include" / "ucudnn" / "cudnn_abi.h",
    ROOT / "shim" / "include" / "ucudnn" / "cudnn_graph_abi.h",
)
HOOKS_DEF = ROOT / "shim" / "hooks.def"
STATS_DEF = ROOT / "shim" / "core" / "uc_stats.def"
MODULE = "_abi.py"

_COMMENT = re.compile(r"/\*.*?\*/|//[^\n]*", re.DOTALL)
_ENUM = re.compile(r"(?:typedef\s+)?enum\s*\{(.*?)\}\s*(\w*)\s*;", re.DOTALL)
_ENUMERATOR = re.compile(r"(\w+)\s*=\s*(-?\d+)")
_DEFINE = re.compile(r"^#\s*define\s+(CUDNN_\w+)\s+(-?\d+)\s*$", re.MULTILINE)
_OPAQUE = re.compile(r"typedef\s+(?:struct\s+\w+|void)\s*\*\s*(\w+)\s*;")
_STRUCT = re.compile(r"typedef\s+struct\s*\{[^}]*\}\s*(\w+)\s*;")
_FUNCTION = re.compile(r"^([A-Za-z_][\w ]*?)\s*(\*?)\s*(cudnn\w+)\s*\(([^;]*?)\)\s*;", re.MULTILINE)
_HOOK = re.compile(r"^UC_(\w+)\(\s*[^,]+,\s*(\w+)\s*,", re.MULTILINE)
HOOK_KINDS = ("EXEC", "QUERY", "BACKEND", "REAL", "OPT", "LIBC")
_STAT = re.compile(r'^UC_STAT(_MS)?\(\s*(\w+)\s*,\s*"([^"]*)"\s*\)\s*$', re.MULTILINE)


def _clean(text: str) -> str:
    return _COMMENT.sub(" ", text)


class Header:
    """What one header declares: constants, the names of its enum, opaque and struct types, its prototypes."""

    def __init__(self, path: Path) -> None:
        text = _clean(path.read_text(encoding="utf-8"))
        self.name = path.name
        self.constants: dict[str, int] = {n: int(v) for n, v in _DEFINE.findall(text)}
        self.enums: dict[str, dict[str, int]] = {}
        for body, type_name in _ENUM.findall(text):
            members = {n: int(v) for n, v in _ENUMERATOR.findall(body)}
            self.constants.update(members)
            if type_name:
                self.enums[type_name] = members
        self.opaque_types = set(_OPAQUE.findall(text))
        self.struct_types = set(_STRUCT.findall(text))
        body = _ENUM.sub(";", _STRUCT.sub(";", text))
        self.functions = [(ret, star, name, params) for ret, star, name, params in _FUNCTION.findall(body)]


class Types:
    """The type code of a C type, as ``ucudnn._cudnn_abi.CTYPES`` reads it."""

    def __init__(self, headers: list[Header]) -> None:
        self.enums = {"int"} | {t for h in headers for t in h.enums}
        self.opaque = {t for h in headers for t in h.opaque_types}
        self.perf = {t for h in headers for t in h.struct_types if t.endswith("AlgoPerf_t")}

    def code(self, declaration: str, where: str) -> str:
        depth = declaration.count("*") + declaration.count("[")
        words = [w for w in re.findall(r"\w+", declaration) if w != "const"]
        base = words[0]
        if base in self.enums or base in ("size_t", "int64_t", "double") or base in self.perf:
            code = "int" if base in self.enums else ("perf" if base in self.perf else base)
        elif base in self.opaque or (base == "void" and depth):
            code, depth = "void*", depth - (base == "void")
        elif base == "char" and depth == 1:
            return "char*"
        elif base == "void" and not depth:
            return "void"
        else:
            raise SystemExit(f"ucudnn-build: {where}: no Python type for the C type {declaration.strip()!r}")
        return code + "*" * depth

    def prototype(self, ret: str, star: str, name: str, params: str, where: str) -> tuple[str, tuple[str, ...]]:
        args = [p for p in (p.strip() for p in params.split(",")) if p and p != "void"]
        return self.code(ret + star, f"{where}: {name}"), tuple(self.code(a, f"{where}: {name}") for a in args)


def hooks() -> dict[str, tuple[str, ...]]:
    """hooks.def's function names by entry kind, in the file's order."""
    found: dict[str, list[str]] = {kind: [] for kind in HOOK_KINDS}
    for kind, name in _HOOK.findall(_clean(HOOKS_DEF.read_text(encoding="utf-8"))):
        if kind not in found:
            raise SystemExit(f"ucudnn-build: {HOOKS_DEF.name}: unknown entry kind UC_{kind} for {name}")
        found[kind].append(name)
    return {kind: tuple(names) for kind, names in found.items()}


def stats() -> list[tuple[str, str]]:
    """uc_stats.def's counters in the file's order: (name in the stats JSON, meaning)."""
    text = _clean(STATS_DEF.read_text(encoding="utf-8"))
    entries = [(f"{name}_ms" if ms else name, doc) for ms, name, doc in _STAT.findall(text)]
    if len(entries) != len(re.findall(r"^UC_STAT", text, re.MULTILINE)):
        raise SystemExit(f'ucudnn-build: {STATS_DEF.name}: an entry is not UC_STAT[_MS](name, "meaning") on one line')
    return entries


def _dict_lines(name: str, annotation: str, items: list[tuple[str, str]]) -> list[str]:
    return [f"{name}: Final[{annotation}] = {{", *(f"    {k!r}: {v}," for k, v in items), "}"]


def render() -> str:
    """The text of ``ucudnn/_abi.py`` for the sources as they are now."""
    headers = [Header(path) for path in HEADERS]
    types = Types(headers)
    where = ", ".join(f"shim/include/ucudnn/{h.name}" for h in headers)
    lines = [
        f'"""Generated by shim/build/pyabi.py from {where}, shim/hooks.def and shim/core/uc_stats.def: do not edit.',
        "",
        "Read by the bindings (ucudnn._cudnn_abi, graph_api, plan_text) and ucudnn.counters; rebuilt by",
        "`pip install .` or `python shim/build/pyabi.py`.",
        '"""',
        "",
        "# ruff: noqa: E501",
        "from __future__ import annotations",
        "",
        "from typing import Final",
    ]
    for h in headers:
        lines += ["", f"# ---- {h.name}: constants"]
        lines += [f"{name}: Final = {value}" for name, value in h.constants.items()]
    prototypes: list[tuple[str, str]] = []
    for h in headers:
        for ret, star, name, params in h.functions:
            result, args = types.prototype(ret, star, name, params, h.name)
            prototypes.append((name, repr((result, args))))
    lines += ["", "#: Every function of the headers: (result, (parameter, ...)) as type codes (see ucudnn._cudnn_abi)."]
    lines += _dict_lines("PROTOTYPES", "dict[str, tuple[str, tuple[str, ...]]]", prototypes)
    enums = [(name, repr(members)) for h in headers for name, members in h.enums.items()]
    lines += ["", "#: The enumerators of each named enum type, in the header's order."]
    lines += _dict_lines("ENUMS", "dict[str, dict[str, int]]", enums)
    lines += ["", "#: hooks.def's functions by entry kind: EXEC, QUERY and BACKEND are the preload library's hooks."]
    lines += _dict_lines("HOOKS", "dict[str, tuple[str, ...]]", [(k, repr(v)) for k, v in hooks().items()])
    lines += ["", "#: uc_stats.def's counters: their names in the stats JSON and their meanings, in the file's order."]
    lines += _dict_lines("STATS", "dict[str, str]", [(k, repr(v)) for k, v in stats()])
    return "\n".join(lines) + "\n"


def write(package_dir: Path) -> Path:
    """Write the module into ``package_dir`` (the ``ucudnn`` folder being built), replacing it whole."""
    package_dir.mkdir(parents=True, exist_ok=True)
    target = package_dir / MODULE
    tmp = target.with_name(f".{MODULE}.{os.getpid()}.tmp")
    tmp.write_text(render(), encoding="utf-8")
    os.replace(tmp, target)
    return target


if __name__ == "__main__":
    print("generated", write(Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT / "ucudnn"))
