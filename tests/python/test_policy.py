"""Workspace policies: presets, the environment round trip, overrides, and apply()."""

from __future__ import annotations

import ctypes
import os
from typing import Any

import pytest

from ucudnn import config
from ucudnn import policy as policy_mod
from ucudnn.policy import PRESETS, KernelOverride, PolicyError, WorkspacePolicy, apply, preset

MiB = 1024**2


@pytest.mark.parametrize("name", sorted(PRESETS))
def test_presets_round_trip_through_the_environment(name: str) -> None:
    pol = preset(name)
    env = pol.to_env()
    assert set(env) <= set(config.BY_NAME)
    assert all(isinstance(v, str) for v in env.values())
    assert WorkspacePolicy.from_env(env) == pol


def test_presets_say_what_they_are() -> None:
    assert preset("cudnn").batch_size_policy == "undivided"
    assert preset("auto") == WorkspacePolicy()  # the default: the framework's workspace decides
    assert preset("auto").to_env()["UCUDNN_DEFAULT_WORKSPACE_LIMIT"] == "auto"
    assert preset("ucudnn") == WorkspacePolicy(workspace_limit_bytes=64 * MiB)  # the μ-cuDNN defaults
    assert preset("ucudnn").to_env()["UCUDNN_DEFAULT_WORKSPACE_LIMIT"] == str(64 * MiB)
    assert WorkspacePolicy(workspace_limit_bytes="auto").workspace_limit_bytes is None  # type: ignore[arg-type]
    assert preset("tight").workspace_limit_bytes == 8 * MiB
    assert preset("exhaustive").batch_size_policy == "all"
    assert preset("memory-saver").time_slack > 0
    with pytest.raises(PolicyError, match=r"unknown preset 'fast'.*cudnn"):
        preset("fast")


def test_from_env_reads_the_standard_variables() -> None:
    env = {
        "UCUDNN_BATCH_SIZE_POLICY": "ALL",
        "UCUDNN_DEFAULT_WORKSPACE_LIMIT": "16MiB",
        "UCUDNN_TOTAL_WORKSPACE_SIZE": "1GiB",
        "UCUDNN_DETERMINISTIC": "yes",
        "UCUDNN_TIME_SLACK": "0.1",
    }
    pol = WorkspacePolicy.from_env(env)
    assert pol == WorkspacePolicy("all", 16 * MiB, 1024 * MiB, True, 0.1)
    assert WorkspacePolicy.from_env({}) == WorkspacePolicy()
    with pytest.raises(config.ConfigError, match="UCUDNN_TIME_SLACK"):
        WorkspacePolicy.from_env({"UCUDNN_TIME_SLACK": "a lot"})
    with pytest.raises(config.ConfigError, match="UCUDNN_DEFAULT_WORKSPACE_LIMIT"):
        WorkspacePolicy.from_env({"UCUDNN_DEFAULT_WORKSPACE_LIMIT": "lots"})


def test_values_are_validated_and_normalised() -> None:
    pol = WorkspacePolicy(batch_size_policy="POWEROFTWO", workspace_limit_bytes="8MiB", total_workspace_bytes=0)  # type: ignore[arg-type]
    assert (pol.batch_size_policy, pol.workspace_limit_bytes, pol.total_workspace_bytes) == (
        "powerOfTwo",
        8 * MiB,
        None,
    )
    with pytest.raises(PolicyError, match=r"UCUDNN_BATCH_SIZE_POLICY='fibonacci'.*undivided, powerOfTwo, all"):
        WorkspacePolicy(batch_size_policy="fibonacci")
    with pytest.raises(PolicyError, match="workspace_limit_bytes"):
        WorkspacePolicy(workspace_limit_bytes=-1)
    with pytest.raises(PolicyError, match="time_slack"):
        WorkspacePolicy(time_slack=float("nan"))
    with pytest.raises(PolicyError, match="needs key_contains, op or both"):
        KernelOverride(MiB)
    with pytest.raises(PolicyError, match="unknown op"):
        KernelOverride(MiB, op="sideways")


def test_limit_for_uses_the_first_matching_override() -> None:
    pol = WorkspacePolicy(
        workspace_limit_bytes=64 * MiB,
        overrides=(
            KernelOverride(0, key_contains="w=512x512", op="bwd_filter"),
            KernelOverride(8 * MiB, op="backward_filter"),
            KernelOverride("16MiB", key_contains="x=?x3x224x224"),  # type: ignore[arg-type]
        ),
    )
    assert pol.limit_for("fwd|w=512x512x3x3") == 64 * MiB
    assert pol.limit_for("bwdf|w=512x512x3x3", op=2) == 0
    assert pol.limit_for("bwdf|w=64x64x3x3", op="backward_filter") == 8 * MiB
    assert pol.limit_for("fwd|x=?x3x224x224", op=0) == 16 * MiB
    with pytest.raises(PolicyError, match="no environment form"):
        pol.to_env()


def test_apply_without_the_preload_library_says_what_to_do() -> None:
    if hasattr(ctypes.CDLL(None), "ucudnn_set_option"):
        pytest.skip("the preload library is loaded in this test process")
    with pytest.raises(PolicyError, match=r"libucudnn.so is not loaded.*LD_PRELOAD"):
        apply("tight")
    assert policy_mod.active() is None


def test_apply_pushes_shim_settings_and_keeps_python_ones(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[tuple[str, Any]] = []

    class Shim:  # ucudnn.bridge's control calls, recorded
        def set_option(self, *args: str) -> None:
            calls.append(("ucudnn_set_option", args))

        def clear_plans(self) -> None:
            calls.append(("ucudnn_clear_plans", ()))

    monkeypatch.setattr(policy_mod, "_control", Shim)
    monkeypatch.setattr(policy_mod, "_active", None)
    for name in policy_mod._ENV_NAMES:  # restored by monkeypatch after the test
        monkeypatch.setenv(name, "")
    pol = WorkspacePolicy(deterministic_only=True, overrides=(KernelOverride(0, op="fwd"),))
    assert apply(pol) is pol
    assert calls == [
        ("ucudnn_set_option", ("UCUDNN_BATCH_SIZE_POLICY", "powerOfTwo")),
        ("ucudnn_set_option", ("UCUDNN_DEFAULT_WORKSPACE_LIMIT", "auto")),
        ("ucudnn_set_option", ("UCUDNN_TOTAL_WORKSPACE_SIZE", "0")),
        ("ucudnn_set_option", ("UCUDNN_DETERMINISTIC", "1")),  # the shim checks plans' determinism too
        ("ucudnn_set_option", ("UCUDNN_TIME_SLACK", "0")),  # validated by the shim too (one rule for every setting)
        ("ucudnn_clear_plans", ()),
    ]
    assert policy_mod.active() is pol and policy_mod.current() is pol
    assert os.environ["UCUDNN_DETERMINISTIC"] == "1"


def test_apply_reports_a_rejected_setting(monkeypatch: pytest.MonkeyPatch) -> None:
    class Refusing:  # ucudnn.bridge.set_option when the shim returns -1
        def set_option(self, name: str, value: str) -> None:
            raise ValueError(f"ucudnn: the preload library rejected {name}={value!r}")

    monkeypatch.setattr(policy_mod, "_control", Refusing)
    monkeypatch.setattr(policy_mod, "_active", None)
    with pytest.raises(PolicyError, match="rejected UCUDNN_BATCH_SIZE_POLICY"):
        apply("cudnn")
    assert policy_mod.active() is None
