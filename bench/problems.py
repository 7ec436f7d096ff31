"""Convolution problems: the DeepBench shape tuple, and the three file formats it arrives in.

Formats read by :func:`load_problems`:

* DeepBench-order CSV ``w,h,c,n,k,filter_w,filter_h,pad_w,pad_h,stride_w,stride_h``, with or without a header,
  optionally led by a label column (``application``, ``source``, ``label`` or ``name``; header-less rows with 12
  fields take the first as the label).
* The original μ-cuDNN CSV (``source,W,H,C_in,N,C_out,kernel_w,kernel_h,pad_w,pad_h,stride_w,stride_h``): the same
  order after the label, so it is read through the same header aliases.
* DeepBench's C++ header ``conv_problems.h``: ``std::make_tuple(...)`` entries inside ``<set> = { ... };``, with
  ``//`` and ``/* */`` comments, line breaks and trailing commas. A comment inside a set names the rows after it
  (DeepBench marks each group with its application), a comment on the same line as a tuple names that row.

Every error is a :class:`ProblemError` naming the file, the line and the offending value.
"""

from __future__ import annotations

import csv
import io
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

FIELDS: tuple[str, ...] = ("w", "h", "c", "n", "k", "filter_w", "filter_h", "pad_w", "pad_h", "stride_w", "stride_h")

# Header spellings (lower-cased) of each field: DeepBench's, the original μ-cuDNN's, and a few obvious ones.
_ALIASES: dict[str, str] = {
    "w": "w",
    "width": "w",
    "h": "h",
    "height": "h",
    "c": "c",
    "c_in": "c",
    "channels": "c",
    "n": "n",
    "batch": "n",
    "k": "k",
    "c_out": "k",
    "filter_w": "filter_w",
    "kernel_w": "filter_w",
    "s": "filter_w",
    "filter_h": "filter_h",
    "kernel_h": "filter_h",
    "r": "filter_h",
    "pad_w": "pad_w",
    "pad_h": "pad_h",
    "stride_w": "stride_w",
    "wstride": "stride_w",
    "stride_h": "stride_h",
    "hstride": "stride_h",
}
_LABEL_COLUMNS = frozenset({"application", "source", "label", "name", "layer"})

SETS: tuple[str, ...] = ("training", "inference_server", "inference_device")


class ProblemError(ValueError):
    """Bad problem input; the message names the file/line (or suite entry) and the bad value."""


@dataclass(frozen=True)
class Problem:
    """One 2-D convolution in DeepBench's terms (NCHW, cross-correlation, no groups, no dilation).

    ``origin`` says where it came from (``file:line`` or ``suite:name``) for error messages and reports.
    """

    label: str
    w: int
    h: int
    c: int
    n: int
    k: int
    filter_w: int
    filter_h: int
    pad_w: int
    pad_h: int
    stride_w: int
    stride_h: int
    origin: str = ""

    @property
    def out_w(self) -> int:
        return (self.w + 2 * self.pad_w - self.filter_w) // self.stride_w + 1

    @property
    def out_h(self) -> int:
        return (self.h + 2 * self.pad_h - self.filter_h) // self.stride_h + 1

    @property
    def shape(self) -> tuple[int, ...]:
        """The 11 numbers in DeepBench order."""
        return tuple(getattr(self, f) for f in FIELDS)

    @property
    def macs(self) -> int:
        """Multiply-accumulates of one forward pass (the same count for each backward op)."""
        return self.n * self.k * self.out_h * self.out_w * self.c * self.filter_h * self.filter_w

    def describe(self) -> str:
        """Compact shape string used in tables: ``N64 C32x16x16 K32 5x5 p2 s1``."""
        pad = f"p{self.pad_h}" if self.pad_h == self.pad_w else f"p{self.pad_h}x{self.pad_w}"
        stride = f"s{self.stride_h}" if self.stride_h == self.stride_w else f"s{self.stride_h}x{self.stride_w}"
        return f"N{self.n} C{self.c}x{self.h}x{self.w} K{self.k} {self.filter_h}x{self.filter_w} {pad} {stride}"


def make_problem(label: str, values: Sequence[int], origin: str) -> Problem:
    """Build and validate a problem from the 11 DeepBench numbers; raises ProblemError naming ``origin``."""
    if len(values) != len(FIELDS):
        raise ProblemError(f"{origin}: expected {len(FIELDS)} numbers ({', '.join(FIELDS)}), got {len(values)}")
    named = dict(zip(FIELDS, values, strict=True))
    for field in ("w", "h", "c", "n", "k", "filter_w", "filter_h", "stride_w", "stride_h"):
        if named[field] <= 0:
            raise ProblemError(f"{origin}: {field}={named[field]} must be positive")
    for field in ("pad_w", "pad_h"):
        if named[field] < 0:
            raise ProblemError(f"{origin}: {field}={named[field]} must not be negative")
    p = Problem(label=label, origin=origin, **named)
    if p.out_w <= 0 or p.out_h <= 0:
        raise ProblemError(
            f"{origin}: output size {p.out_w}x{p.out_h} (w x h) is not positive: "
            f"(in + 2*pad - filter) // stride + 1 with w={p.w}, h={p.h}, filter {p.filter_w}x{p.filter_h}, "
            f"pad {p.pad_w}x{p.pad_h}, stride {p.stride_w}x{p.stride_h}"
        )
    return p


def _int(text: str, field: str, origin: str) -> int:
    try:
        return int(text.strip())
    except ValueError:
        raise ProblemError(f"{origin}: {field}={text.strip()!r} is not an integer") from None


def _is_int(text: str) -> bool:
    return re.fullmatch(r"\s*[+-]?\d+\s*", text) is not None


# ---------------------------------------------------------------------------------------------------- CSV


def parse_csv(text: str, source: str = "<csv>") -> list[Problem]:
    """Parse DeepBench-order or μ-cuDNN CSV text (see the module docstring). Blank and ``#`` lines are skipped."""
    rows = [
        (lineno, row)
        for lineno, row in enumerate(csv.reader(io.StringIO(text)), start=1)
        if row and any(cell.strip() for cell in row) and not row[0].lstrip().startswith("#")
    ]
    if not rows:
        raise ProblemError(f"{source}: no problems found")
    columns: list[str | None] | None = None  # per column: a field name, "label", or None (ignored)
    first_line, first = rows[0]
    # A header has no integer cell; a data row with one bad value is reported as that row's error instead.
    if not any(_is_int(cell) for cell in first):
        columns = _header_columns(first, f"{source}:{first_line}")
        rows = rows[1:]
    problems: list[Problem] = []
    for lineno, row in rows:
        origin = f"{source}:{lineno}"
        cells = [cell.strip() for cell in row]
        if columns is not None:
            if len(cells) != len(columns):
                raise ProblemError(f"{origin}: expected {len(columns)} columns as in the header, got {len(cells)}")
            label = ""
            named: dict[str, int] = {}
            for name, cell in zip(columns, cells, strict=True):
                if name == "label":
                    label = cell
                elif name is not None:
                    named[name] = _int(cell, name, origin)
            values = [named[f] for f in FIELDS]
        else:
            if len(cells) == len(FIELDS) + 1:
                label, numbers = cells[0], cells[1:]
            elif len(cells) == len(FIELDS):
                label, numbers = "", cells
            else:
                raise ProblemError(
                    f"{origin}: expected {len(FIELDS)} numbers ({','.join(FIELDS)}), optionally after a label, "
                    f"got {len(cells)} fields"
                )
            values = [_int(cell, field, origin) for cell, field in zip(numbers, FIELDS, strict=True)]
        problems.append(make_problem(label or f"row{lineno}", values, origin))
    if not problems:
        raise ProblemError(f"{source}: header only, no problems")
    return problems


def _header_columns(header: Sequence[str], origin: str) -> list[str | None]:
    columns: list[str | None] = []
    seen: set[str] = set()
    for cell in header:
        key = cell.strip().lower()
        if key in _ALIASES:
            field = _ALIASES[key]
            if field in seen:
                raise ProblemError(f"{origin}: header names {field!r} twice (as {cell.strip()!r})")
            seen.add(field)
            columns.append(field)
        elif key in _LABEL_COLUMNS and "label" not in seen:
            seen.add("label")
            columns.append("label")
        else:
            raise ProblemError(
                f"{origin}: unknown header column {cell.strip()!r}; expected {','.join(FIELDS)} "
                "(or the μ-cuDNN names W,H,C_in,N,C_out,kernel_w,kernel_h,...) after an optional label column"
            )
    missing = [f for f in FIELDS if f not in seen]
    if missing:
        raise ProblemError(f"{origin}: header lacks column(s) {', '.join(missing)}")
    return columns


# ------------------------------------------------------------------------------------------ conv_problems.h

_SET_RE = re.compile(r"\b(\w+)\s*=\s*\{")
_TUPLE_RE = re.compile(r"(?:std::)?make_tuple\s*\(([^()]*)\)")


def _strip_comments(text: str) -> tuple[str, list[tuple[int, int, str]]]:
    """Blank out comments (keeping offsets and line breaks); return the text and (start, end, comment) spans."""
    out = list(text)
    comments: list[tuple[int, int, str]] = []
    i = 0
    while i < len(text):
        if text.startswith("//", i):
            end = text.find("\n", i)
            end = len(text) if end < 0 else end
        elif text.startswith("/*", i):
            end = text.find("*/", i + 2)
            end = len(text) if end < 0 else end + 2
        elif text[i] == '"':
            end = i + 1
            while end < len(text) and text[end] != '"':
                end += 2 if text[end] == "\\" else 1
            i = end + 1
            continue
        else:
            i += 1
            continue
        body = text[i:end].strip("/*").strip()
        comments.append((i, end, body))
        for j in range(i, end):
            if out[j] != "\n":
                out[j] = " "
        i = end
    return "".join(out), comments


def _matching_brace(text: str, open_at: int) -> int:
    depth = 0
    for i in range(open_at, len(text)):
        if text[i] == "{":
            depth += 1
        elif text[i] == "}":
            depth -= 1
            if depth == 0:
                return i
    return -1


def _comment_label(comment: str) -> str:
    """A short label from a DeepBench comment such as ``// DeepSpeech`` or ``/* Vision: ResNet */``."""
    words = re.sub(r"[^\w\s.+-]", " ", comment).split()
    return " ".join(words[:4])


def parse_conv_problems_h(text: str, set_name: str = "training", source: str = "<conv_problems.h>") -> list[Problem]:
    """Parse DeepBench's ``conv_problems.h``; ``set_name`` is ``training``, ``inference_server`` or
    ``inference_device`` (the ``_set`` suffix is optional) or any other variable name in the file."""
    wanted = set_name if set_name.endswith("_set") else f"{set_name}_set"
    clean, comments = _strip_comments(text)
    found: list[str] = []
    for m in _SET_RE.finditer(clean):
        found.append(m.group(1))
        if m.group(1) != wanted:
            continue
        open_at = m.end() - 1
        close_at = _matching_brace(clean, open_at)
        if close_at < 0:
            raise ProblemError(f"{source}:{clean.count(chr(10), 0, open_at) + 1}: {wanted} is never closed by '}}'")
        return _tuples(clean, comments, open_at, close_at, wanted, source)
    sets = ", ".join(n.removesuffix("_set") for n in found) or "none"
    raise ProblemError(f"{source}: no problem set {wanted!r} (sets found: {sets})")


def _tuples(
    clean: str, comments: list[tuple[int, int, str]], start: int, end: int, set_name: str, source: str
) -> list[Problem]:
    problems: list[Problem] = []
    inner = [c for c in comments if start < c[0] < end]
    group_label = ""
    pos = start + 1
    for m in _TUPLE_RE.finditer(clean, start + 1, end):
        lineno = clean.count("\n", 0, m.start()) + 1
        origin = f"{source}:{lineno}"
        between = clean[pos : m.start()].replace(",", " ").strip()
        if between:
            raise ProblemError(f"{origin}: unexpected text {between[:40]!r} in {set_name}")
        line_end = clean.find("\n", m.end())
        line_end = end if line_end < 0 else min(line_end, end)
        label = ""
        for c_start, _c_end, body in inner:
            if "make_tuple" in body:
                continue  # a commented-out row, not a label
            if pos <= c_start < m.start():
                line_start = clean.rfind("\n", 0, c_start) + 1
                if not clean[line_start:c_start].strip() and body:
                    group_label = _comment_label(body)
            elif m.end() <= c_start < line_end and body:
                label = _comment_label(body)
        parts = [p.strip() for p in m.group(1).split(",")]
        if parts and parts[-1] == "":
            parts = parts[:-1]
        values = [_int(p.removesuffix("u").removesuffix("U"), f, origin) for p, f in zip(parts, FIELDS, strict=False)]
        if len(parts) != len(FIELDS):
            raise ProblemError(f"{origin}: make_tuple has {len(parts)} values, expected {len(FIELDS)}")
        problems.append(make_problem(label or group_label or f"{set_name}#{len(problems) + 1}", values, origin))
        pos = m.end()
    rest = clean[pos:end].replace(",", " ").strip()
    if rest:
        lineno = clean.count("\n", 0, pos) + 1
        raise ProblemError(f"{source}:{lineno}: unexpected text {rest[:40]!r} in {set_name}")
    if not problems:
        raise ProblemError(f"{source}: set {set_name} has no make_tuple entries")
    return problems


# ------------------------------------------------------------------------------------------------ loading


def looks_like_cpp(text: str, path: Path | None = None) -> bool:
    if path is not None and path.suffix.lower() in {".h", ".hpp", ".hh", ".cc", ".cpp", ".cu", ".cuh"}:
        return True
    return "make_tuple" in text


def load_problems(path: Path, set_name: str = "training") -> list[Problem]:
    """Read a problem file in any supported format (chosen by extension, then by content)."""
    try:
        text = path.read_text(encoding="utf-8-sig")
    except OSError as exc:
        raise ProblemError(f"{path}: cannot read: {exc.strerror or exc}") from None
    except UnicodeDecodeError:
        raise ProblemError(f"{path}: not a text file (UTF-8 expected)") from None
    if looks_like_cpp(text, path):
        return parse_conv_problems_h(text, set_name, str(path))
    return parse_csv(text, str(path))


# ------------------------------------------------------------------------------------------ batch handling


def with_batch(
    problems: Iterable[Problem], *, batch: int | None = None, multiplier: int | None = None
) -> list[Problem]:
    """Force N to ``batch`` or multiply it by ``multiplier`` (the original ran DeepBench as given, x4 and N=256)."""
    if batch is not None and batch <= 0:
        raise ProblemError(f"--batch {batch}: must be positive")
    if multiplier is not None and multiplier <= 0:
        raise ProblemError(f"--batch-multiplier {multiplier}: must be positive")
    out: list[Problem] = []
    for p in problems:
        n = batch if batch is not None else p.n * (multiplier or 1)
        out.append(replace(p, n=n))
    return out


def dedupe(problems: Iterable[Problem]) -> list[Problem]:
    """Drop problems whose 11 numbers repeat an earlier one (DeepBench training lists a few layers twice)."""
    seen: set[tuple[int, ...]] = set()
    out: list[Problem] = []
    for p in problems:
        if p.shape not in seen:
            seen.add(p.shape)
            out.append(p)
    return out
