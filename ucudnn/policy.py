"""Workspace policies: how much scratch memory convolutions may use, and how batches may be split.

A ``WorkspacePolicy`` is a frozen value. Use it three ways: ``to_env()`` for a child process started with the
preload library; ``apply(policy)`` inside a process that already has ``libucudnn.so`` loaded; or pass it to
``Planner(policy=...)``. ``PRESETS`` holds named starting points; ``dataclasses.replace`` (or ``.replace``)
derives variants.
"""

from __future__ import annotations

import dataclasses
import math
import os
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ucudnn import config

__all__ = [
    "OPS",
    "PRESETS",
    "KernelOverride",
    "PolicyError",
    "WorkspacePolicy",
    "active",
    "apply",
    "current",
    "preset",
]

MiB = 1024**2

# Op names as the shim numbers them (UCUDNN_OP_* in ucudnn.h); short aliases accepted.
OPS: Mapping[str, int] = {"forward": 0, "backward_data": 1, "backward_filter": 2}
_OP_ALIASES = {"fwd": "forward", "bwd_data": "backward_data", "bwd_filter": "backward_filter"}

# The variables to_env() writes, in this order.
_ENV_NAMES = (
    "UCUDNN_BATCH_SIZE_POLICY",
    "UCUDNN_DEFAULT_WORKSPACE_LIMIT",
    "UCUDNN_TOTAL_WORKSPACE_SIZE",
    "UCUDNN_DETERMINISTIC",
    "UCUDNN_TIME_SLACK",
)


class PolicyError(ValueError):
    """An invalid policy, or one that cannot be applied here; the message says what to do."""


def _op_name(op: int | str) -> str:
    if isinstance(op, int) and not isinstance(op, bool):
        for name, number in OPS.items():
            if number == op:
                return name
    elif isinstance(op, str):
        low = op.strip().lower()
        low = _OP_ALIASES.get(low, low)
        if low in OPS:
            return low
    raise PolicyError(f"unknown op {op!r}: expected one of {', '.join(OPS)} (or fwd, bwd_data, bwd_filter, 0-2)")


def _size(value: int | str, what: str) -> int:
    if isinstance(value, str):
        try:
            return config.parse_size(value, name=what)
        except config.ConfigError as exc:
            raise PolicyError(str(exc)) from None
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise PolicyError(f"{what} must be a non-negative number of bytes (or a size like '64MiB'), not {value!r}")
    return value


@dataclass(frozen=True)
class KernelOverride:
    """A different per-kernel workspace limit for kernels whose key contains ``key_contains`` and/or whose op is
    ``op`` (both must match when both are given).

    The planner applies it as min(limit of the call, override): an override can lower a kernel's limit but not
    raise it past the workspace the caller actually offers."""

    workspace_limit_bytes: int
    key_contains: str | None = None
    op: str | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "workspace_limit_bytes", _size(self.workspace_limit_bytes, "workspace_limit_bytes"))
        if self.op is not None:
            object.__setattr__(self, "op", _op_name(self.op))
        if not self.key_contains and self.op is None:
            raise PolicyError("a KernelOverride needs key_contains, op or both")

    def matches(self, key: str, op: int | str | None = None) -> bool:
        if self.key_contains and self.key_contains not in key:
            return False
        return self.op is None or (op is not None and _op_name(op) == self.op)


@dataclass(frozen=True)
class WorkspacePolicy:
    """How convolutions are planned.

    ``batch_size_policy``: candidate micro-batch sizes (``undivided``, ``powerOfTwo``, ``all``).
    ``workspace_limit_bytes``: per-kernel limit (Workspace Reuse); None (the default, ``auto``): no limit of
    ucudnn's own, the framework's workspace decides (the workspace it passes; the Pareto list of Get/Find).
    ``total_workspace_bytes``: one network-wide budget for Workspace Division (None: off).
    ``deterministic_only``: only deterministic algorithms, whatever callers ask.
    ``time_slack``: accept a plan up to this fraction slower than the fastest if it needs less workspace.
    ``overrides``: per-kernel limits (first match wins). They exist only inside a process (``apply`` or
    ``Planner(policy=...)``); there is no environment form, so ``to_env`` refuses a policy that has any.
    """

    batch_size_policy: str = "powerOfTwo"
    workspace_limit_bytes: int | None = None
    total_workspace_bytes: int | None = None
    deterministic_only: bool = False
    time_slack: float = 0.0
    overrides: tuple[KernelOverride, ...] = ()

    def __post_init__(self) -> None:
        var = config.BY_NAME["UCUDNN_BATCH_SIZE_POLICY"]
        try:
            canonical = config.parse(var, str(self.batch_size_policy))
        except config.ConfigError as exc:
            raise PolicyError(str(exc)) from None
        object.__setattr__(self, "batch_size_policy", canonical)
        workspace_limit_bytes = self.workspace_limit_bytes
        if isinstance(workspace_limit_bytes, str) and workspace_limit_bytes.strip().lower() == config.AUTO:
            workspace_limit_bytes = None
        if workspace_limit_bytes is not None:
            workspace_limit_bytes = _size(workspace_limit_bytes, "workspace_limit_bytes")
        object.__setattr__(self, "workspace_limit_bytes", workspace_limit_bytes)
        total = self.total_workspace_bytes
        total = None if total is None else _size(total, "total_workspace_bytes")
        object.__setattr__(self, "total_workspace_bytes", total or None)
        if not isinstance(self.deterministic_only, bool):
            raise PolicyError(f"deterministic_only must be a bool, not {self.deterministic_only!r}")
        slack = self.time_slack
        if isinstance(slack, bool) or not isinstance(slack, (int, float)) or not 0 <= slack < math.inf:
            raise PolicyError(f"time_slack must be a non-negative number, not {slack!r}")
        object.__setattr__(self, "time_slack", float(slack))
        object.__setattr__(self, "overrides", tuple(self.overrides))
        for o in self.overrides:
            if not isinstance(o, KernelOverride):
                raise PolicyError(f"overrides must be KernelOverride values, not {o!r}")

    def replace(self, **changes: object) -> WorkspacePolicy:
        return dataclasses.replace(self, **changes)  # type: ignore[arg-type]

    def override_for(self, key: str, op: int | str | None = None) -> KernelOverride | None:
        return next((o for o in self.overrides if o.matches(key, op)), None)

    def limit_for(self, key: str, op: int | str | None = None) -> int | None:
        """The per-kernel workspace limit of kernel ``key`` (and ``op``) in bytes; None: no limit of ucudnn's own
        (the workspace the framework gives)."""
        found = self.override_for(key, op)
        return self.workspace_limit_bytes if found is None else found.workspace_limit_bytes

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> WorkspacePolicy:
        """The policy the UCUDNN_* variables describe; ConfigError names a bad variable."""
        total = int(config.get("UCUDNN_TOTAL_WORKSPACE_SIZE", environ))
        workspace_limit = config.get("UCUDNN_DEFAULT_WORKSPACE_LIMIT", environ)  # a size or "auto"
        return cls(
            batch_size_policy=str(config.get("UCUDNN_BATCH_SIZE_POLICY", environ)),
            workspace_limit_bytes=None if workspace_limit == config.AUTO else int(workspace_limit),
            total_workspace_bytes=total or None,
            deterministic_only=bool(config.get("UCUDNN_DETERMINISTIC", environ)),
            time_slack=float(config.get("UCUDNN_TIME_SLACK", environ)),
        )

    def _env_items(self) -> dict[str, str]:
        values = (
            self.batch_size_policy,
            config.AUTO if self.workspace_limit_bytes is None else str(self.workspace_limit_bytes),
            str(self.total_workspace_bytes or 0),
            "1" if self.deterministic_only else "0",
            f"{self.time_slack:.9f}".rstrip("0").rstrip("."),  # a FRACTION: digits, no exponent
        )
        return dict(zip(_ENV_NAMES, values, strict=True))

    def to_env(self) -> dict[str, str]:
        """The UCUDNN_* variables that make a child process (with the preload library) plan this way."""
        if self.overrides:
            raise PolicyError("per-kernel overrides have no environment form; use apply() inside the process")
        return self._env_items()


# Presets. Limits are per kernel unless said otherwise.
PRESETS: Mapping[str, WorkspacePolicy] = {
    # The default: no limit of ucudnn's own. Each call gets the fastest plan within the workspace the framework
    # gives it, and Get/Find list the time/workspace front of plans for the framework to pick from.
    "auto": WorkspacePolicy(batch_size_policy="powerOfTwo", workspace_limit_bytes=None),
    # What cuDNN alone does under the same limit: one call at the full mini-batch with the fastest algorithm
    # whose workspace fits. The baseline every other preset is measured against.
    "cudnn": WorkspacePolicy(batch_size_policy="undivided", workspace_limit_bytes=64 * MiB),
    # The μ-cuDNN defaults: micro-batches of 1, 2, 4, ... and N, 64 MiB per kernel. One Find per candidate size
    # (about log2 N) the first time a kernel is seen; cached afterwards.
    "ucudnn": WorkspacePolicy(batch_size_policy="powerOfTwo", workspace_limit_bytes=64 * MiB),
    # For memory-starved runs: 8 MiB per kernel. Micro-batching recovers part of the speed that such a small
    # limit costs an undivided call; expect slower kernels than "ucudnn", not equal ones.
    "tight": WorkspacePolicy(batch_size_policy="powerOfTwo", workspace_limit_bytes=8 * MiB),
    # Every micro-batch size 1..N: the best plans the benchmarks can give, at the price of N Find calls per
    # kernel on first sight (minutes for big N on a GPU). Worth it only with a persistent cache.
    "exhaustive": WorkspacePolicy(batch_size_policy="all", workspace_limit_bytes=64 * MiB),
    # In the spirit of vDNN/SuperNeurons (memory first): the least-workspace plan among those at most 25% slower
    # than the fastest under 64 MiB, so a hungrier plan is taken only when it is much faster. It only chooses
    # plans; it does not offload or recompute anything as those systems do. Plans are not stored in the cache
    # (its plan key has no slack column); the cached benchmarks make re-planning cost only the DP.
    "memory-saver": WorkspacePolicy(batch_size_policy="powerOfTwo", workspace_limit_bytes=64 * MiB, time_slack=0.25),
}


def preset(name: str) -> WorkspacePolicy:
    try:
        return PRESETS[name]
    except KeyError:
        raise PolicyError(f"unknown preset {name!r}: expected one of {', '.join(PRESETS)}") from None


_active_lock = threading.Lock()
_active: WorkspacePolicy | None = None


def active() -> WorkspacePolicy | None:
    """The policy last given to ``apply()`` in this process, if any."""
    return _active


def current() -> WorkspacePolicy:
    """The policy in force: the one last applied, else the one the environment describes."""
    return _active if _active is not None else WorkspacePolicy.from_env()


def _control() -> Any:
    """The preload library's control API (:mod:`ucudnn.bridge`); PolicyError when the library is not in this process."""
    from ucudnn import bridge

    if not bridge.shim_loaded():
        raise PolicyError(
            "ucudnn_set_option not found: the preload library libucudnn.so is not loaded in this process; start the "
            "program with LD_PRELOAD=<path printed by `ucudnn paths`>, or pass policy.to_env() to a child process"
        )
    return bridge


def apply(policy: WorkspacePolicy | str) -> WorkspacePolicy:
    """Make ``policy`` (or a preset name) the policy of this process: the shim's settings through its
    ``ucudnn_set_option`` (determinism too: the shim checks it), Python-only settings (slack, overrides) for this
    process's planner. The shim's in-memory plans are dropped so later calls are planned under the new policy.
    Returns the policy."""
    global _active
    pol = preset(policy) if isinstance(policy, str) else policy
    shim = _control()
    with _active_lock:
        for name, value in pol._env_items().items():
            if "shim" not in config.BY_NAME[name].readers:
                continue
            try:
                shim.set_option(name, value)
            except (ValueError, RuntimeError):  # refused (-1), or another status (BridgeError)
                raise PolicyError(f"the preload library rejected {name}={value!r}") from None
        _active = pol
        # A planner in a child process inherits the settings through the environment.
        os.environ.update(pol._env_items())
    shim.clear_plans()
    return pol
