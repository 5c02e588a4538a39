"""Truth tables for Claude Code's compaction rule (brief section 2, "Claude Code's own
compaction rule"): every measured row, the environment and settings overrides, the models that
never auto-compact, and the built-in model tables. Reviewed and moved from a colleague's
scratch implementation; the rows marked "reported" are from public reports of the CLI's source,
not measured here.
"""

from __future__ import annotations

from collections.abc import Mapping

import pytest

from ctxd.agents.claude import compaction
from ctxd.agents.claude.compaction import (
    ClaudeCompactionConfig,
    compaction_point,
    config_from,
    settings_config,
)
from ctxd.agents.claude.models import MODELS as CLAUDE_MODELS
from ctxd.agents.codex.models import MODELS as CODEX_MODELS
from ctxd.agents.gemini.models import MODELS as GEMINI_MODELS
from ctxd.agents.models import ModelInfo, normalise_model_id
from ctxd.agents.models import lookup as lookup_in

MODELS = (*CLAUDE_MODELS, *GEMINI_MODELS, *CODEX_MODELS)


def lookup(model: str | None) -> ModelInfo | None:
    return lookup_in(model, MODELS)


def cfg(
    env: Mapping[str, str], settings: Mapping[str, object], *, model: str | None = None
) -> ClaudeCompactionConfig:
    """The configuration a session has: its hook's environment and its settings.json keys."""
    return config_from({**env, **settings_config(settings)}, model)


C = ClaudeCompactionConfig
M = 1_000_000

#: The version the rows below were measured with, unless a row names its own: from 2.1.334 a
#: native 1M model compacts against 400,000 by default (see test_claude_auto_compact_window.py).
MEASURED = "2.1.332"
_UNSET = object()
NO_SETTINGS = C()


def claude_compaction_point(
    window: int,
    model: str | None,
    config: ClaudeCompactionConfig = NO_SETTINGS,
    *,
    version: object = _UNSET,
) -> int | None:
    named = MEASURED if version is _UNSET else version
    assert named is None or isinstance(named, str)
    return compaction.claude_compaction_point(window, model, config, version=named)


K200 = 200_000


# --- the brief's measured rows ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("window", "model", "config", "version", "expected"),
    [
        (K200, "claude-sonnet-4-6", C(), None, 167_000),
        (M, "claude-opus-5-5", C(), "2.1.332", 967_000),
        (M, "claude-opus-5-5", C(), None, 967_000),
        (M, "claude-opus-4-8[1m]", C(), "2.1.332", 967_000),
        (M, "claude-opus-5-5", C(max_output_override=8000), None, 979_000),
        (M, "claude-opus-5-5", C(pct_override=50), None, 490_000),
        (M, "claude-opus-5-5", C(pct_override=99), None, 967_000),
        (M, "claude-sonnet-5[1m]", C(), "2.1.197", 934_000),
        (M, "claude-sonnet-4-5[1m]", C(), "2.1.197", None),
        (M, "claude-sonnet-4-5[1m]", C(), "2.1.332", None),
        (K200, "claude-sonnet-4-5", C(), "2.1.197", None),
        (K200, "claude-sonnet-4-5", C(), "2.1.332", None),
        (M, "claude-opus-4-8[1m]", C(), "2.1.197", None),
    ],
)
def test_measured_rows(
    window: int,
    model: str,
    config: ClaudeCompactionConfig,
    version: str | None,
    expected: int | None,
) -> None:
    assert claude_compaction_point(window, model, config, version=version or MEASURED) == expected


def test_pct_override_can_only_lower_the_point() -> None:
    base = claude_compaction_point(M, "claude-opus-5-5", C())
    for p in (1.0, 10.0, 50.0, 98.0, 98.67, 99.0, 100.0):
        point = claude_compaction_point(M, "claude-opus-5-5", C(pct_override=p))
        assert point is not None and base is not None
        assert point <= base
    # floor(E * (p / 100)) with E = 980,000, in IEEE doubles as the CLI (JavaScript) computes it:
    # 33.3 / 100 is 0.33299999999999996, so the point is 326,339, not 326,340.
    assert claude_compaction_point(M, "claude-opus-5-5", C(pct_override=33.3)) == 326_339
    assert claude_compaction_point(M, "claude-opus-5-5", C(pct_override=25)) == 245_000
    assert claude_compaction_point(K200, "claude-sonnet-4-6", C(pct_override=80)) == 144_000


# --- overrides ---------------------------------------------------------------------------------


def test_max_output_override() -> None:
    # Only min(maxOut, 20,000) counts: any override >= 20,000 changes nothing.
    assert (
        claude_compaction_point(K200, "claude-sonnet-4-6", C(max_output_override=8000)) == 179_000
    )
    for big in (20_000, 32_000, 64_000, 128_000, 10**9):
        assert claude_compaction_point(M, "claude-opus-5-5", C(max_output_override=big)) == 967_000
    # With both overrides, E uses the output override: E = 992,000.
    both = C(max_output_override=8000, pct_override=50)
    assert claude_compaction_point(M, "claude-opus-5-5", both) == 496_000


def test_window_cap() -> None:
    assert claude_compaction_point(M, "claude-opus-5-5", C(window_cap=500_000)) == 467_000
    # A cap above the window changes nothing ("capped at the model's actual context window").
    assert claude_compaction_point(K200, "claude-sonnet-4-6", C(window_cap=400_000)) == 167_000
    # The percentage applies to the capped window.
    capped = C(window_cap=500_000, pct_override=50)
    assert claude_compaction_point(M, "claude-opus-5-5", capped) == 240_000


def test_window_cap_makes_never_compacting_models_compact() -> None:
    cap = C(window_cap=500_000)
    assert claude_compaction_point(M, "claude-sonnet-4-5[1m]", cap) == 467_000
    assert claude_compaction_point(K200, "claude-sonnet-4-5", cap) == 167_000
    assert claude_compaction_point(M, "claude-opus-4-8[1m]", cap, version="2.1.197") == 467_000
    assert claude_compaction_point(M, "claude-opus-4-8[1m]", cap) == 467_000


def test_sonnet_5_auto_window_yields_to_an_explicit_cap() -> None:
    assert claude_compaction_point(M, "claude-sonnet-5[1m]", C()) == 934_000
    assert claude_compaction_point(M, "claude-sonnet-5", C()) == 934_000
    assert claude_compaction_point(M, "claude-sonnet-5[1m]", C(window_cap=M)) == 967_000
    assert claude_compaction_point(M, "claude-sonnet-5[1m]", C(window_cap=600_000)) == 567_000
    # The 967,000 auto window is below a 200k window's size: no effect there.
    assert claude_compaction_point(K200, "claude-sonnet-5", C()) == 167_000


def test_disabled() -> None:
    off = C(enabled=False)
    assert claude_compaction_point(M, "claude-opus-5-5", off) is None
    assert (
        claude_compaction_point(M, "claude-opus-5-5", C(enabled=False, window_cap=500_000)) is None
    )


@pytest.mark.parametrize(
    ("version", "expected"),
    [
        # An unknown version is taken as the newest behaviour: current installs compact it, from
        # 2.1.334 against a 400,000 window.
        (None, 367_000),
        ("", 367_000),
        ("garbage", 367_000),
        ("2.1.197", None),
        ("2.1.331", None),
        ("2.1.332", 967_000),
        ("2.1.400", 367_000),
        ("2.2", 367_000),
        ("3.0.0", 367_000),
        ("v2.1.332 (Claude Code)", 967_000),
    ],
)
def test_opus_4_8_1m_depends_on_version(version: str | None, expected: int | None) -> None:
    assert claude_compaction_point(M, "claude-opus-4-8[1m]", C(), version=version) == expected
    # The same session named without the suffix, with the window from the statusline.
    assert claude_compaction_point(M, "claude-opus-4-8", C(), version=version) == expected


def test_opus_4_8_on_200k_compacts() -> None:
    assert claude_compaction_point(K200, "claude-opus-4-8", C(), version="2.1.197") == 167_000


# --- model matching ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "model",
    [
        "claude-sonnet-4-5",
        "claude-sonnet-4-5-20250929",
        "claude-sonnet-4-5[1m]",
        "Claude-Sonnet-4-5-20250929[1M]",
        "  claude-sonnet-4-5  ",
        "claude-sonnet-4-5@20250929",
        "us.anthropic.claude-sonnet-4-5-20250929-v1:0",
        "anthropic/claude-sonnet-4-5",
    ],
)
def test_never_compacting_family_spellings(model: str) -> None:
    assert claude_compaction_point(M, model, C()) is None


@pytest.mark.parametrize(
    ("model", "expected"),
    [
        ("claude-sonnet-5-5[1m]", 967_000),  # not the sonnet-5 family: no 967,000 cap
        ("claude-sonnet-4-6[1m]", 967_000),
        ("claude-opus-4-8-5[1m]", 967_000),  # a different (hypothetical) model
        ("claude-sonnet-4-50", 967_000),
        ("CLAUDE-SONNET-5-20260630[1M]", 934_000),
        ("claude-sonnet-5@20260630", 934_000),
    ],
)
def test_family_match_is_exact(model: str, expected: int) -> None:
    assert claude_compaction_point(M, model, C()) == expected


@pytest.mark.parametrize("model", [None, "", "some-future-model", "[1m]"])
def test_unknown_model_assumes_a_default_of_at_least_20000(model: str | None) -> None:
    assert claude_compaction_point(K200, model, C()) == 167_000
    assert claude_compaction_point(M, model, C()) == 967_000
    assert claude_compaction_point(M, model, C(max_output_override=8000)) == 979_000


def test_every_claude_row_gives_the_same_point() -> None:
    # Every documented default is >= 20,000, so the table never changes the threshold.
    never = ("claude-sonnet-4-5", "claude-opus-4-8", "claude-sonnet-5")
    for info in MODELS:
        if info.prefix.startswith("claude-") and info.prefix not in never:
            assert claude_compaction_point(K200, info.prefix, C()) == 167_000, info.prefix
            assert claude_compaction_point(M, info.prefix, C()) == 967_000, info.prefix


def test_override_is_capped_at_the_model_maximum(monkeypatch: pytest.MonkeyPatch) -> None:
    # Reported: the CLI caps CLAUDE_CODE_MAX_OUTPUT_TOKENS at the model's maximum.
    small = ModelInfo("claude-tiny", 200_000, 8_192, "test")
    monkeypatch.setattr(compaction, "MODELS", (small,))
    assert claude_compaction_point(K200, "claude-tiny", C()) == 200_000 - 8_192 - 13_000
    # 64,000 is capped to the model's 8,192, as the CLI does.
    big = C(max_output_override=64_000)
    assert claude_compaction_point(K200, "claude-tiny", big) == 200_000 - 8_192 - 13_000
    assert claude_compaction_point(K200, "claude-tiny", C(max_output_override=4_000)) == 183_000


def test_point_is_never_below_one() -> None:
    assert claude_compaction_point(20_000, None, C()) == 1
    assert claude_compaction_point(M, None, C(pct_override=0.0001)) == 1


@pytest.mark.parametrize("window", [0, -1])
def test_bad_window(window: int) -> None:
    with pytest.raises(ValueError, match="window must be positive"):
        claude_compaction_point(window, "claude-opus-5-5", C())


@pytest.mark.parametrize(
    "kwargs",
    [
        {"max_output_override": 0},
        {"pct_override": 0.0},
        {"pct_override": 100.5},
        {"window_cap": 0},
    ],
)
def test_config_rejects_out_of_range(kwargs: dict[str, float]) -> None:
    (name,) = kwargs
    with pytest.raises(ValueError, match=f"^{name} must be"):
        ClaudeCompactionConfig(**kwargs)  # type: ignore[arg-type]


# --- config_from: parsing ----------------------------------------------------------------------


def test_config_from_empty() -> None:
    assert cfg({}, {}) == ClaudeCompactionConfig()


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("8000", 8000),
        (" 8000 ", 8000),
        ("+8000", 8000),
        ("8000tokens", 8000),
        ("8000.9", 8000),
        ("8e3", 8),
        ("abc", None),
        ("", None),
        ("0", None),
        ("-5", None),
    ],
)
def test_max_output_env(text: str, expected: int | None) -> None:
    env = {"CLAUDE_CODE_MAX_OUTPUT_TOKENS": text}
    assert cfg(env, {}).max_output_override == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("50", 50.0),
        ("50%", 50.0),
        (" 99.5", 99.5),
        (".5", 0.5),
        ("1e2", 100.0),
        ("100", 100.0),
        ("0", None),
        ("-10", None),
        ("101", None),
        ("Infinity", None),
        ("abc", None),
        ("", None),
    ],
)
def test_pct_env(text: str, expected: float | None) -> None:
    assert cfg({"CLAUDE_AUTOCOMPACT_PCT_OVERRIDE": text}, {}).pct_override == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("500000", 500_000),
        ("500000tokens", 500_000),
        ("200k", 100_000),  # parseInt reads 200, clamped up to the minimum
        ("150000", 150_000),
        ("99999", 100_000),
        ("5000000", 1_000_000),
        ("0", None),
        ("-1", None),
        ("x", None),
        ("", None),
    ],
)
def test_window_env(text: str, expected: int | None) -> None:
    env = {"CLAUDE_CODE_AUTO_COMPACT_WINDOW": text, "version": MEASURED}
    assert cfg(env, {}).window_cap == expected


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (400_000, 400_000),
        (200_000.0, 200_000),
        (50_000, 100_000),
        (2_000_000, 1_000_000),
        ("auto", None),
        ("AUTO", None),
        ("400000", None),
        (True, None),
        (None, None),
        (0, None),
        (-5, None),
        (float("nan"), None),
        (float("inf"), None),
        ([400_000], None),
    ],
)
def test_window_setting(value: object, expected: int | None) -> None:
    assert cfg({}, {"autoCompactWindow": value}).window_cap == expected


@pytest.mark.parametrize(
    ("env", "settings", "expected"),
    [
        ({}, {}, True),
        ({"DISABLE_AUTO_COMPACT": "1"}, {}, False),
        ({"DISABLE_AUTO_COMPACT": "true"}, {}, False),
        ({"DISABLE_AUTO_COMPACT": " YES "}, {}, False),
        ({"DISABLE_AUTO_COMPACT": "on"}, {}, False),
        ({"DISABLE_AUTO_COMPACT": "0"}, {}, True),
        ({"DISABLE_AUTO_COMPACT": "false"}, {}, True),
        ({"DISABLE_AUTO_COMPACT": ""}, {}, True),
        ({"DISABLE_AUTO_COMPACT": "2"}, {}, True),
        ({"DISABLE_COMPACT": "1"}, {}, False),
        ({}, {"autoCompactEnabled": False}, False),
        ({}, {"autoCompactEnabled": True}, True),
        ({}, {"autoCompactEnabled": "false"}, True),  # not a boolean: ignored
        ({}, {"autoCompactEnabled": 0}, True),
        # Nothing re-enables what another source turned off.
        ({"DISABLE_AUTO_COMPACT": "0"}, {"autoCompactEnabled": False}, False),
        ({"DISABLE_AUTO_COMPACT": "1"}, {"autoCompactEnabled": True}, False),
    ],
)
def test_enabled(env: dict[str, str], settings: dict[str, object], expected: bool) -> None:
    assert cfg(env, settings).enabled is expected


# --- config_from: precedence -------------------------------------------------------------------


def test_env_window_wins_over_settings() -> None:
    env = {"CLAUDE_CODE_AUTO_COMPACT_WINDOW": "500000"}
    assert cfg(env, {"autoCompactWindow": 300_000}).window_cap == 500_000
    assert cfg(env, {"autoCompactWindow": "auto"}).window_cap == 500_000


def test_bad_env_window_falls_through_to_settings() -> None:
    env = {"CLAUDE_CODE_AUTO_COMPACT_WINDOW": "lots"}
    assert cfg(env, {"autoCompactWindow": 300_000}).window_cap == 300_000


def test_model_settings_rank_between_env_and_top_level() -> None:
    settings: dict[str, object] = {
        "autoCompactWindow": 300_000,
        "modelSettings": {"claude-opus-5-5": {"autoCompactWindow": 250_000}},
    }
    assert cfg({}, settings, model="claude-opus-5-5").window_cap == 250_000
    assert cfg({}, settings, model="Claude-Opus-5-5[1m]").window_cap == 250_000
    assert cfg({}, settings, model="claude-sonnet-5").window_cap == 300_000
    assert cfg({}, settings).window_cap == 300_000
    env = {"CLAUDE_CODE_AUTO_COMPACT_WINDOW": "600000"}
    assert cfg(env, settings, model="claude-opus-5-5").window_cap == 600_000


def test_model_settings_exact_key_first_and_auto() -> None:
    settings: dict[str, object] = {
        "autoCompactWindow": 300_000,
        "modelSettings": {
            "claude-opus-5-5[1m]": {"autoCompactWindow": 700_000},
            "claude-opus-5-5": {"autoCompactWindow": 250_000},
            "claude-sonnet-5": {"autoCompactWindow": "auto"},
            "claude-haiku-5-5": {"autoCompactWindow": "junk"},
            "claude-fable-5-1": "not a mapping",
        },
    }
    assert cfg({}, settings, model="claude-opus-5-5[1m]").window_cap == 700_000
    # "auto" for this model: no compact window, the top-level value does not apply.
    assert cfg({}, settings, model="claude-sonnet-5").window_cap is None
    # Unusable per-model values fall through to the top level.
    assert cfg({}, settings, model="claude-haiku-5-5").window_cap == 300_000
    assert cfg({}, settings, model="claude-fable-5-1").window_cap == 300_000
    assert cfg({}, {"modelSettings": "junk"}, model="x").window_cap is None


def test_settings_env_block_is_not_read() -> None:
    # Claude Code copies it into its own environment; the caller passes that environment.
    settings: dict[str, object] = {"env": {"CLAUDE_CODE_MAX_OUTPUT_TOKENS": "8000"}}
    assert cfg({}, settings).max_output_override is None


# --- end to end ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("env", "settings", "window", "model", "expected"),
    [
        ({}, {}, K200, "claude-sonnet-4-6", 167_000),
        ({}, {}, M, "claude-opus-5-5", 967_000),
        ({"CLAUDE_CODE_MAX_OUTPUT_TOKENS": "8000"}, {}, M, "claude-opus-5-5", 979_000),
        ({"CLAUDE_AUTOCOMPACT_PCT_OVERRIDE": "50"}, {}, M, "claude-opus-5-5", 490_000),
        ({"CLAUDE_AUTOCOMPACT_PCT_OVERRIDE": "99"}, {}, M, "claude-opus-5-5", 967_000),
        ({"CLAUDE_CODE_AUTO_COMPACT_WINDOW": "500000"}, {}, M, "claude-opus-5-5", 467_000),
        ({}, {"autoCompactWindow": 500_000}, M, "claude-opus-5-5", 467_000),
        ({}, {"autoCompactWindow": 500_000}, M, "claude-sonnet-4-5[1m]", 467_000),
        ({}, {}, M, "claude-sonnet-4-5[1m]", None),
        ({"DISABLE_AUTO_COMPACT": "1"}, {}, M, "claude-opus-5-5", None),
        ({}, {"autoCompactEnabled": False}, K200, "claude-sonnet-4-6", None),
        ({}, {}, M, "claude-sonnet-5[1m]", 934_000),
    ],
)
def test_end_to_end(
    env: dict[str, str],
    settings: dict[str, object],
    window: int,
    model: str,
    expected: int | None,
) -> None:
    config = cfg(env, settings, model=model)
    assert claude_compaction_point(window, model, config, version="2.1.332") == expected


# --- models.lookup -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("model", "prefix"),
    [
        ("claude-opus-4-8", "claude-opus-4-8"),
        ("claude-opus-4-8[1m]", "claude-opus-4-8"),
        ("Claude-Opus-4-8[1M]", "claude-opus-4-8"),
        ("claude-haiku-4-5-20251001", "claude-haiku-4-5"),
        ("claude-opus-4-1-20250805", "claude-opus-4-1"),
        ("claude-opus-4-20250514", "claude-opus-4"),
        ("us.anthropic.claude-opus-4-1-20250805-v1:0", "claude-opus-4-1"),
        ("global.anthropic.claude-sonnet-4-5-20250929-v1:0", "claude-sonnet-4-5"),
        ("claude-sonnet-4-5@20250929", "claude-sonnet-4-5"),
        ("anthropic/claude-fable-5.1", "claude-fable-5"),  # a gateway's dotted id
        ("claude-fable-5-1", "claude-fable-5-1"),
        ("claude-sonnet-5-5", "claude-sonnet-5-5"),
        ("claude-sonnet-5", "claude-sonnet-5"),
        ("gemini-3.8-flash", "gemini-3.8-flash"),
        ("gemini-3.5-flash-lite", "gemini-3.5-flash-lite"),
        ("gemini-3.1-pro-preview-customtools", "gemini-3.1-pro"),
        ("gemini-3-pro-preview", "gemini-3-pro"),
        ("models/gemini-2.5-pro", "gemini-2.5-pro"),
        ("gemini-2.5-flash-lite", "gemini-2.5-flash-lite"),
        ("gemini-2.5-flash-preview-05-20", "gemini-2.5-flash"),
        ("gpt-5.5", "gpt-5.5"),
        ("openai/gpt-5.5", "gpt-5.5"),
        ("gpt-5.6-sol", "gpt-5.6-sol"),
        ("gpt-5.2-codex", "gpt-5.2-codex"),
        ("gpt-5.1-codex-max", "gpt-5.1-codex-max"),
        ("gpt-5.1-codex-mini", "gpt-5.1-codex"),
        ("gpt-5.7", "gpt-5"),
        ("gpt-5-codex", "gpt-5"),
        ("o4-mini", "o4-mini"),
        ("o3-mini", "o3"),
        ("gemini-9-ultra", "gemini"),  # Gemini CLI's default window for a model it does not know
    ],
)
def test_lookup(model: str, prefix: str) -> None:
    info = lookup(model)
    assert info is not None and info.prefix == prefix


@pytest.mark.parametrize(
    "model",
    [None, "", "   ", "[1m]", "gpt-55", "claude", "claude-opus-40", "llama-4", "o30"],
)
def test_lookup_misses(model: str | None) -> None:
    assert lookup(model) is None


def test_lookup_figures() -> None:
    def get(model: str) -> ModelInfo:
        info = lookup(model)
        assert info is not None
        return info

    assert (get("claude-opus-5-5").window, get("claude-opus-5-5").max_output) == (M, 128_000)
    assert (get("claude-haiku-4-5").window, get("claude-haiku-4-5").max_output) == (K200, 64_000)
    assert get("claude-sonnet-4-5-20250929").window == K200
    assert get("gemini-3.8-flash").window == 1_048_576
    assert get("gpt-5.5").window == 272_000


def test_table_is_well_formed() -> None:
    prefixes = [info.prefix for info in MODELS]
    assert len(prefixes) == len(set(prefixes))
    for info in MODELS:
        assert info.prefix == normalise_model_id(info.prefix)
        assert info.window > 0 and info.max_output > 0
        assert info.max_output < info.window
        assert info.source.strip()
        # Every row is found by its own prefix.
        assert lookup(info.prefix) == info


def test_normalise_model_id() -> None:
    assert normalise_model_id(" Claude-Opus-4-8[1m] ") == "claude-opus-4-8"
    assert normalise_model_id("claude-opus-4-8 [1m]") == "claude-opus-4-8"
    assert normalise_model_id("models/gemini-2.5-pro") == "gemini-2.5-pro"
    assert normalise_model_id("eu.anthropic.claude-haiku-4-5") == "claude-haiku-4-5"
    assert normalise_model_id("gpt-5.5") == "gpt-5.5"


# --- the CompactionRule ctxd calls ----------------------------------------------------------


@pytest.mark.parametrize(
    ("config", "window", "model", "expected"),
    [
        ({}, K200, "claude-sonnet-4-6", 167_000),
        ({}, M, "claude-opus-5-5", 967_000),
        ({"CLAUDE_AUTOCOMPACT_PCT_OVERRIDE": "50"}, M, "claude-opus-5-5", 490_000),
        ({"CLAUDE_AUTOCOMPACT_PCT_OVERRIDE": "50"}, K200, "claude-sonnet-4-6", 90_000),
        ({"CLAUDE_CODE_MAX_OUTPUT_TOKENS": "8000"}, M, "claude-opus-5-5", 979_000),
        ({"autoCompactWindow": "500000"}, M, "claude-opus-5-5", 467_000),
        ({"autoCompactEnabled": "false"}, M, "claude-opus-5-5", None),
        ({"DISABLE_AUTO_COMPACT": "1"}, K200, "claude-sonnet-4-6", None),
        ({}, K200, "claude-sonnet-4-5-20250929", None),
        ({"version": "2.1.197"}, M, "claude-opus-4-8[1m]", None),
        ({"version": "2.1.332"}, M, "claude-opus-4-8[1m]", 967_000),
    ],
)
def test_the_rule_reads_the_flat_configuration(
    config: dict[str, str], window: int, model: str, expected: int | None
) -> None:
    assert compaction_point(window, model, {}, {"version": MEASURED, **config}) == expected


def test_a_configured_reserve_outranks_the_rule() -> None:
    rules = {"reserve": 50_000}
    assert compaction_point(M, "claude-sonnet-4-5", rules, {"DISABLE_AUTO_COMPACT": "1"}) == 950_000


def test_settings_config_keeps_only_what_the_rule_reads() -> None:
    doc = {
        "hooks": {},
        "autoCompactWindow": 400_000,
        "autoCompactEnabled": False,
        "modelSettings": {"claude-opus-5-5": {"autoCompactWindow": "auto", "other": 1}},
        "env": {"CLAUDE_AUTOCOMPACT_PCT_OVERRIDE": "50"},
    }
    assert settings_config(doc) == {
        "autoCompactWindow": "400000",
        "autoCompactEnabled": "false",
        "modelSettings.claude-opus-5-5.autoCompactWindow": '"auto"',
    }
