"""ucudnn.config: the one declaration and parser of every UCUDNN_* variable."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

from ucudnn import config
from ucudnn.config import ConfigError, parse_fraction, parse_size

MiB = 1024**2


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("67108864", 64 * MiB),
        ("64MiB", 64 * MiB),
        ("64mib", 64 * MiB),
        ("64M", 64 * MiB),
        ("64 MiB", 64 * MiB),
        ("64MB", 64 * MiB),  # every unit is binary, however it is spelt
        ("1GiB", 1024 * MiB),
        ("1.5KiB", 1536),
        ("512KB", 512 * 1024),
        ("0", 0),
        ("7B", 7),
        (" 2TiB ", 2 * 1024**4),
    ],
)
def test_sizes_with_units(text: str, expected: int) -> None:
    assert parse_size(text) == expected


@pytest.mark.parametrize("text", ["", "-1", "64 apples", "1.3B", "MiB", "0x40", "1e6"])
def test_bad_sizes_name_the_variable_and_the_accepted_form(text: str) -> None:
    with pytest.raises(ConfigError, match=r"UCUDNN_DEFAULT_WORKSPACE_LIMIT=.*(64MiB|whole number)"):
        config.get("UCUDNN_DEFAULT_WORKSPACE_LIMIT", {"UCUDNN_DEFAULT_WORKSPACE_LIMIT": text or "junk"})


@pytest.mark.parametrize("text", ["-1", "3.5", "x", "1e3", "0x10", "1234567890", "٣"])
def test_bad_counts_name_the_variable(text: str) -> None:
    with pytest.raises(ConfigError, match=r"UCUDNN_VERIFY_SAMPLES=.*non-negative integer"):
        config.get("UCUDNN_VERIFY_SAMPLES", {"UCUDNN_VERIFY_SAMPLES": text})


@pytest.mark.parametrize("text", ["-0.1", "1e-2", "nan", "inf", ".5", "0.", "1_0", "0.1234567891"])
def test_bad_fractions_name_the_variable(text: str) -> None:
    with pytest.raises(ConfigError, match=r"UCUDNN_VERIFY_MARGIN=.*non-negative number"):
        config.get("UCUDNN_VERIFY_MARGIN", {"UCUDNN_VERIFY_MARGIN": text})


def test_defaults_and_empty_values() -> None:
    # auto: no limit of ucudnn's own, the framework's workspace decides.
    assert config.get("UCUDNN_DEFAULT_WORKSPACE_LIMIT", {}) == "auto"
    assert config.get("UCUDNN_DEFAULT_WORKSPACE_LIMIT", {"UCUDNN_DEFAULT_WORKSPACE_LIMIT": ""}) == "auto"
    assert config.get("UCUDNN_DEFAULT_WORKSPACE_LIMIT", {"UCUDNN_DEFAULT_WORKSPACE_LIMIT": " AUTO "}) == "auto"
    assert config.get("UCUDNN_DEFAULT_WORKSPACE_LIMIT", {"UCUDNN_DEFAULT_WORKSPACE_LIMIT": "64MiB"}) == 64 * MiB
    assert config.get("UCUDNN_VERIFY_SAMPLES", {}) == 3
    assert config.get("UCUDNN_VERIFY_MARGIN", {}) == 0.02
    assert config.get("UCUDNN_HOST_DEVICE_MEMORY", {}) == 0
    assert config.get("UCUDNN_TOTAL_WORKSPACE_SIZE", {}) == 0
    assert config.get("UCUDNN_BATCH_SIZE_POLICY", {}) == "powerOfTwo"
    assert config.get("UCUDNN_DISABLE", {}) is False
    assert config.get("UCUDNN_DETERMINISTIC", {}) is False
    assert config.get("UCUDNN_LOG_LEVEL", {}) == "warning"


@pytest.mark.parametrize(("text", "expected"), [("1", True), ("TRUE", True), ("on", True), ("no", False), ("0", False)])
def test_booleans(text: str, expected: bool) -> None:
    assert config.get("UCUDNN_DISABLE", {"UCUDNN_DISABLE": text}) is expected


def test_bad_boolean_and_choice_name_the_accepted_values() -> None:
    with pytest.raises(ConfigError, match=r"UCUDNN_DISABLE='maybe': expected 1 or 0"):
        config.get("UCUDNN_DISABLE", {"UCUDNN_DISABLE": "maybe"})
    with pytest.raises(ConfigError, match=r"UCUDNN_BATCH_SIZE_POLICY='fibonacci': .*undivided, powerOfTwo, all"):
        config.get("UCUDNN_BATCH_SIZE_POLICY", {"UCUDNN_BATCH_SIZE_POLICY": "fibonacci"})
    assert config.get("UCUDNN_BATCH_SIZE_POLICY", {"UCUDNN_BATCH_SIZE_POLICY": "POWEROFTWO"}) == "powerOfTwo"


def test_fractions() -> None:
    assert parse_fraction("0.25") == 0.25 and parse_fraction(" 0 ") == 0.0
    for bad in ("-0.1", "nan", "inf", "lots", ""):
        with pytest.raises(ConfigError, match=r"UCUDNN_TIME_SLACK=.*non-negative"):
            parse_fraction(bad, name="UCUDNN_TIME_SLACK")


def test_database_path(tmp_path: Path) -> None:
    assert config.database_path({"UCUDNN_DATABASE": str(tmp_path / "x.db")}) == tmp_path / "x.db"
    assert config.database_path({"XDG_CACHE_HOME": str(tmp_path)}) == tmp_path / "ucudnn" / "cache.sqlite"
    assert config.database_path({}).name == "cache.sqlite"


def test_every_variable_is_declared_once_with_a_valid_default() -> None:
    names = [v.name for v in config.VARIABLES]
    assert len(names) == len(set(names)) and all(n.startswith("UCUDNN_") for n in names)
    for original in (
        "UCUDNN_BATCH_SIZE_POLICY",
        "UCUDNN_DEFAULT_WORKSPACE_LIMIT",
        "UCUDNN_TOTAL_WORKSPACE_SIZE",
        "UCUDNN_DATABASE",
        "UCUDNN_BENCHMARK_DEVICES",
    ):
        assert original in names
    for var in config.VARIABLES:
        config.parse(var, var.default)
        assert var.doc and set(var.readers) <= {"shim", "python", "host", "build"}
        assert f"`{var.name}`" in config.markdown_table()


def test_config_imports_only_the_standard_library() -> None:
    # The native build loads this file to generate the shim's table, before any dependency exists.
    tree = ast.parse(Path(config.__file__).read_text())
    imported = {
        (node.module or "").split(".")[0] if isinstance(node, ast.ImportFrom) else alias.name.split(".")[0]
        for node in ast.walk(tree)
        if isinstance(node, (ast.Import, ast.ImportFrom))
        for alias in node.names
    }
    assert imported <= set(sys.stdlib_module_names) | {"__future__"}


def test_markdown_cli() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "ucudnn.config", "--markdown"], capture_output=True, text=True, check=True
    ).stdout
    assert out.startswith("| variable |") and "UCUDNN_DATABASE" in out


def test_log_level_comes_from_ucudnn_log_level(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from ucudnn import log

    try:
        monkeypatch.delenv("UCUDNN_LOG_LEVEL", raising=False)
        logger = log.setup(force=True)
        logger.info("hidden")
        logger.warning("shown\nsecond line")
        assert capsys.readouterr().err == "ucudnn: warning: shown\nucudnn: warning: second line\n"
        monkeypatch.setenv("UCUDNN_LOG_LEVEL", "DEBUG")
        log.setup(force=True)
        log.get_logger("cache").debug("detail %d", 7)
        log.get_logger("cache").info("note")
        assert capsys.readouterr().err == "ucudnn: debug: detail 7\nucudnn: note\n"
        monkeypatch.setenv("UCUDNN_LOG_LEVEL", "loud")
        log.setup(force=True).info("hidden")
        assert "UCUDNN_LOG_LEVEL='loud': expected one of error, warning, info, debug" in capsys.readouterr().err
    finally:
        monkeypatch.undo()
        log.setup(force=True)


def test_benchmark_devices_parses_ordinals_and_names_the_variable() -> None:
    assert config.benchmark_devices({}) == ()
    assert config.benchmark_devices({"UCUDNN_BENCHMARK_DEVICES": " 0, 2 "}) == (0, 2)
    with pytest.raises(config.ConfigError, match=r"UCUDNN_BENCHMARK_DEVICES='0,gpu1'.*ordinals"):
        config.benchmark_devices({"UCUDNN_BENCHMARK_DEVICES": "0,gpu1"})


def test_several_benchmark_devices_say_they_are_not_used(
    monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    from ucudnn import _runtime

    monkeypatch.setenv("UCUDNN_BENCHMARK_DEVICES", "0,1")
    _runtime._check_benchmark_devices()
    assert "a thread's benchmarks run on its own device" in capfd.readouterr().err
    monkeypatch.setenv("UCUDNN_BENCHMARK_DEVICES", "0")
    _runtime._check_benchmark_devices()
    assert capfd.readouterr().err == ""
