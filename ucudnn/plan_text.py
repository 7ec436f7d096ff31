"""One notation for plans and kernels in every table: ``ucudnn db list``, ``ucudnn plan`` and ``ucudnn-bench``.

A plan reads ``32 x 8 GEMM + 1 x 2 FFT``: 32 micro-batches of 8 samples with the GEMM algorithm, then one of 2
samples with FFT (count x micro-batch size, then cuDNN's algorithm name without its enum prefix). A math type
other than the default follows the name: ``GEMM (math 1)``. A kernel key (about 200 characters) is shown by
:func:`short_kernel_name`: ``fwd x32x16x16 w32x32x5x5 pad2,2``.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from ucudnn import _abi as H


def _algo_names(enum_type: str, prefix: str) -> tuple[str, ...]:
    """The algorithms of a cuDNN algorithm enum in enum order, named as after ``..._ALGO_`` (a bare number keeps its
    ``ALGO_``: ``ALGO_0``), its COUNT left out."""
    members = sorted((v, n.removeprefix(prefix)) for n, v in H.ENUMS[enum_type].items() if not n.endswith("_COUNT"))
    return tuple(f"ALGO_{n}" if n.isdigit() else n for _, n in members)


# cuDNN's algorithm names per op (cudnnConvolution{Fwd,BwdData,BwdFilter}Algo_t, from cudnn_abi.h).
ALGO_NAMES: dict[str, tuple[str, ...]] = {
    "fwd": _algo_names("cudnnConvolutionFwdAlgo_t", "CUDNN_CONVOLUTION_FWD_ALGO_"),
    "bwd_data": _algo_names("cudnnConvolutionBwdDataAlgo_t", "CUDNN_CONVOLUTION_BWD_DATA_ALGO_"),
    "bwd_filter": _algo_names("cudnnConvolutionBwdFilterAlgo_t", "CUDNN_CONVOLUTION_BWD_FILTER_ALGO_"),
}

# Spellings of the ops: the benchmark's (bwd-data), the kernel key's (bwd_data), and suffixes of table names.
_OP_ALIASES = {
    "fwd": "fwd",
    "forward": "fwd",
    "bwd_data": "bwd_data",
    "bwd-data": "bwd_data",
    "bwdd": "bwd_data",
    "bwd_filter": "bwd_filter",
    "bwd-filter": "bwd_filter",
    "bwdf": "bwd_filter",
}


def normalise_op(op: str | None) -> str | None:
    """``fwd``, ``bwd_data`` or ``bwd_filter`` for any spelling of an op; None when ``op`` is not one."""
    return _OP_ALIASES.get(op.lower()) if op else None


def algo_name(op: str | None, algo: int) -> str:
    """cuDNN's name of ``algo`` for ``op`` (``GEMM``); ``algo7`` when the op or the number is unknown."""
    names = ALGO_NAMES.get(normalise_op(op) or "", ())
    return names[algo] if 0 <= algo < len(names) else f"algo{algo}"


def _key_fields(key: str) -> dict[str, str]:
    fields: dict[str, str] = {}
    for item in key.split(";"):
        name, sep, value = item.partition("=")
        if sep:
            fields[name.strip()] = value.strip()
    return fields


def op_of_key(key: str) -> str | None:
    """The op of a kernel key (``op=fwd;...``) or of a table name ending in it (``conv2.fwd``, ``bwdf|...``)."""
    op = normalise_op(_key_fields(key).get("op"))
    if op is not None:
        return op
    for sep in (".", "|", " ", ":"):
        for part in (key.rpartition(sep)[2], key.partition(sep)[0]):
            op = normalise_op(part)
            if op is not None:
                return op
    return None


def _dims(text: str) -> str:
    return "x".join(d for d in text.split(",") if d.strip().isdigit())


def short_kernel_name(key: str, width: int = 60) -> str:
    """A kernel key in a few words: op, data type unless float, input CxHxW, filter KxCxRxS, then pad, stride,
    dilation and groups where they are not the trivial ones. Anything not a kernel key is cut to ``width``."""
    f = _key_fields(key)
    op, x, w = normalise_op(f.get("op")), f.get("x", ""), f.get("w", "")
    if op is None or not x or not w:
        return key if len(key) <= width else key[: width - 3] + "..."
    parts = [op]
    if f.get("dtype", "float") != "float":
        parts.append(f["dtype"])
    parts.append("x" + _dims(x.partition("/")[0]))
    parts.append("w" + _dims(",".join(w.split(",")[-4:])))
    trivial = {"pad": "0,0", "stride": "1,1", "dilation": "1,1", "groups": "1"}
    for name, default in trivial.items():
        value = f.get(name, default)
        if value != default or name == "pad":
            parts.append(f"{name}{value}")
    return " ".join(parts)


def format_groups(groups: Iterable[tuple[int, int, str]]) -> str:
    """``count x size name`` per group of equal consecutive micro-batches, joined by `` + ``."""
    return " + ".join(f"{count} x {batch} {name}" for count, batch, name in groups)


def group_steps(steps: Iterable[Sequence[int]], op: str | None) -> list[tuple[int, int, str]]:
    """Micro-batches ``(batch, algo[, math_type])`` merged into ``(count, batch, name)`` groups."""
    out: list[tuple[int, int, str]] = []
    last: tuple[int, ...] | None = None
    for step in steps:
        batch, algo = int(step[0]), int(step[1])
        math_type = int(step[2]) if len(step) > 2 else 0
        name = algo_name(op, algo) + (f" (math {math_type})" if math_type else "")
        if last == (batch, algo, math_type):
            count, _, _ = out[-1]
            out[-1] = (count + 1, batch, name)
        else:
            out.append((1, batch, name))
        last = (batch, algo, math_type)
    return out


def format_plan(steps: Iterable[Sequence[int]], op: str | None) -> str:
    """``32 x 8 GEMM + 1 x 2 FFT`` for the micro-batches ``(batch, algo[, math_type])`` of a plan for ``op``."""
    return format_groups(group_steps(steps, op))
