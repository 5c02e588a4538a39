"""Kimi Code's compaction rule and window, by truth table (2.1.0's DefaultCompactionStrategy)."""

from __future__ import annotations

import pytest

from ctxd import agents
from ctxd.agents.kimi.compaction import compaction_point, configured_window, settings_config


@pytest.mark.parametrize(
    ("window", "config", "point"),
    [
        (262_144, {}, 212_144),  # window - 50,000 is below 85 %
        (200_000, {}, 150_000),
        (1_000_000, {}, 850_000),  # 85 % is below window - 50,000
        (100_000, {}, 50_000),
        (40_000, {}, 34_000),  # a reserve as large as the window is not used
        (200_000, {"loop_control.reserved_context_size": "20000"}, 170_000),
        (200_000, {"loop_control.reserved_context_size": "0"}, 170_000),
        (1_000_000, {"loop_control.compaction_trigger_ratio": "0.6"}, 600_000),
        (1_000_000, {"loop_control.compaction_trigger_ratio": "0.3"}, 850_000),  # out of range
        (1_000_000, {"loop_control.compaction_trigger_ratio": "nan"}, 850_000),
    ],
)
def test_compaction_point(window: int, config: dict[str, str], point: int) -> None:
    assert compaction_point(window, None, {}, config) == point


def test_config_toml_gives_the_rule_its_settings_and_each_model_its_window() -> None:
    data = (
        b"default_model = 'k2'\n[loop_control]\nreserved_context_size = 30000\n"
        b"compaction_trigger_ratio = 0.7\n[models.k2]\nprovider = 'moonshot'\nmodel = 'kimi-k2.6'\n"
        b"max_context_size = 131072\n[models.big]\nmodel = 'x'\nmax_context_size = 1000000\n"
        b"max_input_size = 900000\n"
    )
    config = agents.spec("kimi").read_settings(data)
    assert config == {
        "loop_control.compaction_trigger_ratio": "0.7",
        "loop_control.reserved_context_size": "30000",
        "window.k2": "131072",
        "window.kimi-k2.6": "131072",
        "window.big": "900000",
        "window.x": "900000",
    }
    assert configured_window("kimi-k2.6", config) == 131_072
    assert configured_window("k2", config) == 131_072
    assert configured_window("other", config) is None
    assert agents.spec("kimi").read_settings(b"[[not toml") == {}
    assert settings_config({"models": "x", "loop_control": {"reserved_context_size": True}}) == {}


def test_the_environments_model_has_the_environments_window() -> None:
    env = {"KIMI_MODEL_NAME": "m", "KIMI_MODEL_MAX_CONTEXT_SIZE": "200000"}
    assert configured_window("m", env) == 200_000
    assert configured_window("__kimi_env_model__", env) == 200_000  # SessionStart's `model`
    assert configured_window("m", {"KIMI_MODEL_NAME": "m"}) == 262_144  # Kimi's default
    assert configured_window("m", {}) is None
