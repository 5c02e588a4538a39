"""pi's own model windows (ctxd/agents/pi/catalog.json): the lookup, the shipped file, and the file
against the pi catalogs tests/e2e/install-agents.sh installs (skipped where they are not)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from ctxd.agents.pi import catalog

ROOT = Path(__file__).resolve().parents[3]
SHIPPED = ROOT / "ctxd" / "agents" / "pi" / catalog.FILE
GENERATOR = Path(__file__).with_name("make_pi_catalog.py")
CACHE = Path(os.environ.get("CTXD_E2E_CACHE") or ROOT / "tests" / "e2e" / ".cache")
PI1_DATA = CACHE / "pi/node_modules/@earendil-works/pi-ai/dist/providers/data"


@pytest.mark.parametrize(
    ("provider", "model", "window"),
    [
        ("anthropic", "claude-sonnet-4-6", 1_000_000),  # the typr session's; a table says 200,000
        ("anthropic", "claude-opus-4-6", 1_000_000),
        ("github-copilot", "claude-opus-4.6", 1_000_000),  # pi 0.73.1's only: the trl session's
        ("github-copilot", "claude-opus-4.7", 144_000),
        ("github-copilot", "gpt-5", 128_000),  # one id, another provider, another window
        ("openai", "gpt-5", 400_000),
        ("openai-codex", "gpt-5.6-sol", 272_000),
        ("azure", "gpt-5.6-sol", 1_050_000),
        ("deepseek", "deepseek-v4-pro", 1_000_000),
        ("ant-ling", "Ling-2.6-1T", 262_144),  # ids as pi spells them
        # exact ids only: pi looks its models up so
        ("ant-ling", "ling-2.6-1t", None),
        ("anthropic", "claude-sonnet-4-6-20260101", None),
        ("anthropic", "claude-sonnet-4-6[1m]", None),
        # providers left out, or no provider of pi's
        ("openrouter", "anthropic/claude-sonnet-4.6", None),
        ("amazon-bedrock", "anthropic.claude-sonnet-4-6", None),
        ("mock", "mock-model", None),  # a models.json provider (the e2e tests')
        ("anthropic", None, None),
        (None, "claude-sonnet-4-6", None),
        ("", "claude-sonnet-4-6", None),
        ("anthropic", "", None),
    ],
)
def test_the_window_pi_runs_a_model_with(
    provider: str | None, model: str | None, window: int | None
) -> None:
    assert catalog.window(provider, model) == window


def _shipped() -> dict[str, Any]:
    doc: dict[str, Any] = json.loads(SHIPPED.read_text(encoding="utf-8"))
    return doc


def test_the_shipped_table_is_small_and_whole() -> None:
    doc = _shipped()
    windows = doc["windows"]
    assert SHIPPED.stat().st_size < 40_000
    assert doc["sources"] == {"@earendil-works/pi-ai": "1.6.0", "@mariozechner/pi-ai": "0.73.1"}
    for provider in ("anthropic", "openai", "openai-codex", "google", "google-vertex"):
        assert windows[provider], provider
    for provider in ("github-copilot", "xai", "mistral", "deepseek", "opencode"):
        assert windows[provider], provider
    assert not set(doc["left_out"]) & set(windows)
    assert {"openrouter", "amazon-bedrock", "vercel-ai-gateway"} <= set(doc["left_out"])
    sizes = [size for models in windows.values() for size in models.values()]
    assert all(type(size) is int and size > 0 for size in sizes)


def test_the_table_is_read_once() -> None:
    catalog.window("anthropic", "claude-sonnet-4-6")
    assert catalog._windows() is catalog._windows()
    assert catalog._windows.cache_info().currsize == 1


def _installed_pi1() -> dict[str, dict[str, int]]:
    """pi 1.6.0's chat models as its own files state them: provider -> id -> contextWindow."""
    if not PI1_DATA.is_dir():
        pytest.skip(f"no pi 1.x catalog under {CACHE}: run tests/e2e/install-agents.sh")
    found: dict[str, dict[str, int]] = {}
    for path in PI1_DATA.glob("[!.]*.json"):
        for models in json.loads(path.read_text(encoding="utf-8")).values():
            for model in models.values():
                if model.get("type") == "chat" and model.get("contextWindow"):
                    found.setdefault(model["provider"], {})[model["id"]] = model["contextWindow"]
    return found


def test_the_shipped_table_holds_the_installed_pi_1_catalog() -> None:
    installed = _installed_pi1()
    version = json.loads((PI1_DATA.parents[2] / "package.json").read_text())["version"]
    doc = _shipped()
    assert doc["sources"]["@earendil-works/pi-ai"] == version
    # every provider of pi's is kept or left out on purpose
    assert not set(installed) - set(doc["windows"]) - set(doc["left_out"])
    for provider, models in installed.items():
        if provider in doc["left_out"]:
            continue
        for model, window in models.items():
            assert catalog.window(provider, model) == window, (provider, model)


def test_the_generator_writes_the_shipped_table() -> None:
    if not PI1_DATA.is_dir():
        pytest.skip(f"no pi 1.x catalog under {CACHE}: run tests/e2e/install-agents.sh")
    result = subprocess.run(
        [sys.executable, str(GENERATOR), "--check"],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "CTXD_E2E_CACHE": str(CACHE)},
        check=False,
    )
    if result.returncode == 2:
        pytest.skip(result.stderr.strip())
    assert result.returncode == 0, result.stderr
