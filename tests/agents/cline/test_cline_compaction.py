"""Cline CLI's compaction point: 0.9 of the usable input, which is the configured window (its
provider settings' `contextWindow`), else its catalog's `maxInputTokens`, else the window."""

from __future__ import annotations

import json

import pytest

from ctxd import agents
from ctxd.agents.cline.compaction import compaction_point, configured_window, settings_config

PROVIDERS = {
    "version": 1,
    "lastUsedProvider": "openai-compatible",
    "providers": {
        "openai-compatible": {"settings": {"model": "mock-model", "contextWindow": 40_000}},
        "anthropic": {"settings": {"model": "claude-x", "contextWindow": 1_000}},
    },
}


@pytest.mark.parametrize(
    ("window", "config", "point"),
    [
        (40_000, {"maxInputTokens": "40000", "model": "mock-model"}, 36_000),  # measured
        (200_000, {}, 180_000),  # the catalog's maxInputTokens is the window (Claude Sonnet 4.5)
        (128_000, {}, 115_200),
        # the catalog's 922,000 of gpt-5.5's 1,050,000, through Cline's own provider
        (1_050_000, {"provider": "cline"}, 829_800),
        (1_050_000, {"provider": "openai-compatible"}, 945_000),
        (1_000_000, {"maxInputTokens": "400000"}, 360_000),  # capped by the setting
        (100_000, {"maxInputTokens": "400000"}, 90_000),  # ... and by the window
        (200_000, {"compactionEnabled": "false"}, None),
        (200_000, {"maxInputTokens": "40000", "model": "another"}, 180_000),
    ],
)
def test_point(window: int, config: dict[str, str], point: int | None) -> None:
    model = "openai/gpt-5.5" if config.get("provider") else "mock-model"
    assert compaction_point(window, model, {}, config) == point


def test_settings_are_read_from_the_provider_last_used() -> None:
    config = settings_config(PROVIDERS)
    assert config == {
        "maxInputTokens": "40000",
        "model": "mock-model",
        "provider": "openai-compatible",
    }
    assert configured_window("mock-model", config) == 40_000
    assert configured_window("claude-x", config) is None
    assert settings_config({"compactionEnabled": False}) == {"compactionEnabled": "false"}
    assert settings_config({"compactionEnabled": True, "providers": []}) == {}


def test_the_spec_reads_both_files() -> None:
    spec = agents.spec("cline")
    assert spec.read_settings(json.dumps(PROVIDERS).encode())["maxInputTokens"] == "40000"
    assert spec.read_settings(b"{not json") == {}
    names = [p.name for p in spec.settings_files({"HOME": "/h"}, None)]
    assert names == ["providers.json", "global-settings.json"]
