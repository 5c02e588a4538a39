"""Where Claude Code compacts: its own rule, as bisected to the token with the real CLI.

Claude Code compacts before its next request once its count reaches T, where (brief, section 2,
"Claude Code's own compaction rule"; measured with 2.1.197 and 2.1.332 against a mock API)

    count = the last response's input + cache_creation + cache_read + output tokens
    W = min(window, cap)          cap: CLAUDE_CODE_AUTO_COMPACT_WINDOW / autoCompactWindow
    E = W - min(maxOut, 20,000)   maxOut: CLAUDE_CODE_MAX_OUTPUT_TOKENS or the model default
    T = E - 13,000
    T = min(floor(E * p / 100), T)   only with CLAUDE_AUTOCOMPACT_PCT_OVERRIDE=p

Measured: 200k -> 167,000; 1M -> 967,000; CLAUDE_CODE_MAX_OUTPUT_TOKENS=8000 on 1M -> 979,000;
p=50 on 1M -> 490,000; p=99 changes nothing; claude-sonnet-5[1m] (2.1.197 caps its window at
967,000) -> 934,000; DISABLE_AUTO_COMPACT=1 or `autoCompactEnabled: false` turns it off.
claude-sonnet-4-5 (200k and [1m]) never auto-compacts unless a compact window is set, in both
versions; claude-opus-4-8[1m] did not in 2.1.197 and does in 2.1.332.
Claude Code also adds a few tokens it estimates for what was appended since the last response;
that estimate is not reproduced, so ctxd's count runs a few tokens below Claude Code's.

Reported, not measured here (public reports of the CLI's source): the compact window is clamped
to 100,000..1,000,000 (a decompile of 2.1.221; the settings schema states the same range);
DISABLE_COMPACT turns auto-compaction off too; a per-model `modelSettings.<id>.autoCompactWindow`
ranks between the environment variable and the top-level setting; the CLI caps
CLAUDE_CODE_MAX_OUTPUT_TOKENS at the model's maximum. Values are read the way the CLI's
JavaScript reads them (parseInt/parseFloat of a leading number), since that is what decides.

The auto-compact window W (read from the 2.1.337 bundle; measured with 2.1.337 against a mock
API): from 2.1.334 a current model whose own window is 1,000,000 compacts against 400,000 when
nothing else decides (offline, telemetry off, third-party providers; a first-party session may
get another from a server experiment), so claude-opus-5-5 compacts at 400,000 - 20,000 - 13,000
= 367,000. What decides W, first match: CLAUDE_CODE_AUTO_COMPACT_WINDOW (from 2.1.334 "400k"
and "1m" read as such, under 100,000 taken as 100,000); `modelSettings.<model>.autoCompactWindow`
(where `/autocompact 1m` writes, in the user's settings.json), then `autoCompactWindow` ("auto"
means none); the version's default. From 2.1.336 the statusline's `used_percentage` counts
against W, so the statusline reveals W whatever decided it (`statusline.py`), and that outranks
everything here; an automatic compaction observed below the point predicted shows a smaller W.
`auto_compact_window` names the source that decided.

The agent configuration a rule gets (`ctxd.core.compaction.CompactionRule`) is a flat str -> str
mapping: the hook's environment variables by their names (`CONFIG_ENV`), and the settings.json
keys by their JSON path with the value as JSON text (`settings_config`).
"""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import orjson

from ctxd.agents.claude.models import MODELS
from ctxd.agents.models import lookup, normalise_model_id
from ctxd.core.compaction import (
    AGENT_VERSION,
    COMPACTED_FROM,
    REPORTED_COMPACT_WINDOW,
    AgentOverrides,
    CompactWindow,
    ConfigKey,
    at_least_one,
    check_window,
)

__all__ = [
    "AUTOCOMPACT_BUFFER",
    "CONFIG_ENV",
    "CONFIG_KEYS",
    "DEFAULT_AUTO_WINDOW",
    "PCT_OF_AUTO_WINDOW_FROM",
    "RESERVE",
    "SUMMARY_OUTPUT_CAP",
    "VERSION_KEY",
    "WINDOW_CAP_MAX",
    "WINDOW_CAP_MIN",
    "ClaudeCompactionConfig",
    "auto_compact_window",
    "claude_compaction_point",
    "compact_window",
    "compaction_point",
    "config_from",
    "is_version_at_least",
    "parse_js_int",
    "parse_version",
    "settings_config",
    "settings_json",
]

#: At most this many of the model's output tokens are kept free for the summary (measured).
SUMMARY_OUTPUT_CAP = 20_000
#: Headroom Claude Code keeps below the effective window E (measured).
AUTOCOMPACT_BUFFER = 13_000
#: The range a compact window is clamped to (reported, not measured).
WINDOW_CAP_MIN = 100_000
WINDOW_CAP_MAX = 1_000_000

_MAX_OUTPUT_ENV = "CLAUDE_CODE_MAX_OUTPUT_TOKENS"
_PCT_ENV = "CLAUDE_AUTOCOMPACT_PCT_OVERRIDE"
_WINDOW_ENV = "CLAUDE_CODE_AUTO_COMPACT_WINDOW"
_DISABLE_ENVS = ("DISABLE_AUTO_COMPACT", "DISABLE_COMPACT")
#: The key under which the rule finds Claude Code's version ("2.1.332") in its configuration,
#: when the session's transcript or statusline said it.
VERSION_KEY = AGENT_VERSION

#: The environment variables the rule reads; the hook client passes them (`ctxd_wire.HOOK_ENV`).
#: CLAUDE_CODE_IDLE_COMPACT_MIN_TOKENS is the idle compaction's (`ctxd.agents.claude.idle`).
CONFIG_ENV: tuple[str, ...] = (
    _MAX_OUTPUT_ENV,
    _PCT_ENV,
    _WINDOW_ENV,
    *_DISABLE_ENVS,
    "CLAUDE_CODE_IDLE_COMPACT_MIN_TOKENS",
)

#: ctxd's own setting for this rule (`[compaction.claude]`): compact at window - reserve instead
#: of Claude Code's measured rule.
RESERVE = ConfigKey("reserve", int, low=0, default=None, alias="claude_reserve")
CONFIG_KEYS = (RESERVE,)

_WINDOW_KEY = "autoCompactWindow"
_IDLE_KEY = "idleCompaction"  # read by `ctxd.agents.claude.idle`
_ENABLED_KEY = "autoCompactEnabled"
_MODEL_SETTINGS = "modelSettings"

# Families that never auto-compact unless a compact window is set (measured).
_NEVER_COMPACTS = "claude-sonnet-4-5"
_NEVER_COMPACTS_1M = "claude-opus-4-8"
#: The first version measured to auto-compact claude-opus-4-8[1m] (2.1.197 did not).
_OPUS_4_8_1M_COMPACTS_FROM = (2, 1, 332)
# Claude Code's own window for a family when no compact window is set (measured in 2.1.197).
_AUTO_WINDOW = {"claude-sonnet-5": 967_000}
#: From this version a current 1M model compacts against DEFAULT_AUTO_WINDOW unless something
#: decides otherwise (2.1.334 changelog; measured with 2.1.337).
_DEFAULT_AUTO_WINDOW_FROM = (2, 1, 334)
DEFAULT_AUTO_WINDOW = 400_000
#: From this version the statusline's used/remaining percentages count against the auto-compact
#: window, not the model's window (2.1.336 changelog; measured with 2.1.337).
PCT_OF_AUTO_WINDOW_FROM = (2, 1, 336)
#: The model's own window from which the 400,000 default applies (the bundle: a model whose
#: window is 1,000,000 without opting in).
_ONE_MILLION = 1_000_000
#: An observed compaction's window is rounded to this (Claude Code's windows are whole
#: thousands; its count and its record differ by a few tokens).
_OBSERVED_ROUNDING = 1_000
_ROUND_WINDOW = 50_000
#: Windows above this are the 1M variants (the only other size measured).
_STANDARD_WINDOW = 200_000


@dataclass(frozen=True, slots=True)
class ClaudeCompactionConfig:
    """The settings Claude Code's rule depends on, already parsed (see `config_from`).

    `max_output_override`: CLAUDE_CODE_MAX_OUTPUT_TOKENS; `pct_override`:
    CLAUDE_AUTOCOMPACT_PCT_OVERRIDE in (0, 100]; `window_cap`: the compact window
    (CLAUDE_CODE_AUTO_COMPACT_WINDOW or `autoCompactWindow`); `enabled`: False when
    auto-compaction is turned off. Out-of-range values raise ValueError.
    """

    max_output_override: int | None = None
    pct_override: float | None = None
    window_cap: int | None = None
    enabled: bool = True
    #: Which setting gave `window_cap`: "env", "model-settings" or "settings".
    window_source: str | None = None

    def __post_init__(self) -> None:
        if self.max_output_override is not None and self.max_output_override <= 0:
            raise ValueError(
                f"max_output_override must be positive, got {self.max_output_override}"
            )
        if self.pct_override is not None and not 0 < self.pct_override <= 100:
            raise ValueError(f"pct_override must be in (0, 100], got {self.pct_override}")
        if self.window_cap is not None and self.window_cap <= 0:
            raise ValueError(f"window_cap must be positive, got {self.window_cap}")


# --- parsing, lenient the way the CLI (JavaScript) is ---------------------------------------

_JS_INT = re.compile(r"\s*([+-]?\d+)")
_JS_FLOAT = re.compile(r"\s*([+-]?(?:Infinity|(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?))")
_TRUTHY = frozenset({"1", "true", "yes", "on"})


def _parse_int(text: str | None) -> int | None:
    """JavaScript's parseInt(text, 10): a leading integer, the rest ignored ("200k" -> 200)."""
    if not text:
        return None
    m = _JS_INT.match(text)
    return int(m.group(1)) if m else None


def _parse_float(text: str | None) -> float | None:
    """JavaScript's parseFloat: a leading decimal number, the rest ignored ("50%" -> 50.0)."""
    if not text:
        return None
    m = _JS_FLOAT.match(text)
    return float(m.group(1)) if m else None


def _truthy(text: str | None) -> bool:
    # Claude Code's isEnvTruthy: "1", "true", "yes", "on", any case, blanks trimmed.
    return text is not None and text.strip().lower() in _TRUTHY


def _json(text: str | None) -> object:
    if text is None:
        return None
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError:
        return None


def _clamp_window(value: int) -> int:
    return min(WINDOW_CAP_MAX, max(WINDOW_CAP_MIN, value))


def _window_setting(value: object) -> tuple[bool, int | None]:
    """A settings.json `autoCompactWindow` value as (usable, window); "auto" is (True, None)."""
    if isinstance(value, str) and value.strip().lower() == "auto":
        return True, None
    # bool is an int subclass; true/false is not a window.
    if isinstance(value, bool) or not isinstance(value, int | float):
        return False, None
    if not math.isfinite(value) or value <= 0:
        return False, None
    return True, _clamp_window(int(value))


def _model_setting(config: Mapping[str, str], model: str | None) -> str | None:
    if not model:
        return None
    for key in (model, normalise_model_id(model)):
        value = config.get(f"{_MODEL_SETTINGS}.{key}.{_WINDOW_KEY}")
        if value is not None:
            return value
    return None


def _parse_window_text(text: str | None) -> int | None:
    """CLAUDE_CODE_AUTO_COMPACT_WINDOW as 2.1.334+ reads it: "400k", "1m" or a number; None
    when unusable, WINDOW_CAP_MIN when below it (no upper clamp: the model's window is)."""
    if not text or not text.strip():
        return None
    body = text.strip()
    unit = {"k": 1_000, "m": 1_000_000}.get(body[-1].lower())
    value = _parse_float(body)
    if value is None or not math.isfinite(value):
        return None
    tokens = round(value * (unit or 1))
    if tokens < 1:
        return None
    return max(WINDOW_CAP_MIN, tokens)


def config_from(config: Mapping[str, str], model: str | None = None) -> ClaudeCompactionConfig:
    """Claude Code's compaction settings from its environment and settings, as one flat mapping
    (environment variables by name; settings.json keys as `settings_config` gives them).

    The environment is the hook's: Claude Code copies settings.json's `env` block into its own
    environment before it starts hooks, so that block is not read separately. Unusable values
    are ignored, as the CLI ignores them: CLAUDE_CODE_MAX_OUTPUT_TOKENS must be > 0, the
    percentage in (0, 100], a compact window > 0 (then clamped to 100,000..1,000,000).

    The compact window: CLAUDE_CODE_AUTO_COMPACT_WINDOW, then
    `modelSettings[model].autoCompactWindow`, then `autoCompactWindow` ("auto" at a level means
    none; an unusable environment value falls through). Auto-compaction is off when
    DISABLE_AUTO_COMPACT or DISABLE_COMPACT is truthy or `autoCompactEnabled` is false.
    """
    max_output = _parse_int(config.get(_MAX_OUTPUT_ENV))
    pct = _parse_float(config.get(_PCT_ENV))

    window_cap: int | None = None
    source: str | None = None
    if is_version_at_least(config.get(VERSION_KEY), _DEFAULT_AUTO_WINDOW_FROM):
        window_cap = _parse_window_text(config.get(_WINDOW_ENV))
    else:
        env_window = _parse_int(config.get(_WINDOW_ENV))
        window_cap = _clamp_window(env_window) if env_window and env_window > 0 else None
    if window_cap is not None:
        source = "env"
    else:
        levels = (
            (_model_setting(config, model), "model-settings"),
            (config.get(_WINDOW_KEY), "settings"),
        )
        for raw, level in levels:
            usable, window_cap = _window_setting(_json(raw))
            if usable:
                source = None if window_cap is None else level
                break

    enabled = not any(_truthy(config.get(name)) for name in _DISABLE_ENVS)
    if _json(config.get(_ENABLED_KEY)) is False:
        enabled = False

    return ClaudeCompactionConfig(
        max_output_override=max_output if max_output is not None and max_output > 0 else None,
        pct_override=pct if pct is not None and 0 < pct <= 100 else None,
        window_cap=window_cap,
        enabled=enabled,
        window_source=source,
    )


def settings_config(doc: Mapping[str, Any]) -> dict[str, str]:
    """The keys of a parsed settings.json the rules read, flattened: `autoCompactWindow`,
    `autoCompactEnabled`, `idleCompaction` and `modelSettings.<id>.autoCompactWindow`, each
    value as JSON text."""
    out: dict[str, str] = {}
    for key in (_WINDOW_KEY, _ENABLED_KEY, _IDLE_KEY):
        if key in doc:
            out[key] = orjson.dumps(doc[key]).decode()
    per_model = doc.get(_MODEL_SETTINGS)
    if isinstance(per_model, Mapping):
        for model, entry in per_model.items():
            if isinstance(entry, Mapping) and _WINDOW_KEY in entry:
                out[f"{_MODEL_SETTINGS}.{model}.{_WINDOW_KEY}"] = orjson.dumps(
                    entry[_WINDOW_KEY]
                ).decode()
    return out


# --- the rule ---------------------------------------------------------------------------------

_DATE_OR_BUILD = re.compile(r"(?:[-@]\d{8})?(?:-v\d+(?::\d+)?)?$")


def _family(model: str | None) -> str:
    # "us.anthropic.claude-sonnet-4-5-20250929-v1:0[1m]" -> "claude-sonnet-4-5": exact family,
    # so "claude-sonnet-5" never matches "claude-sonnet-5-5".
    if not model:
        return ""
    return _DATE_OR_BUILD.sub("", normalise_model_id(model))


def _version(text: str | None) -> tuple[int, ...] | None:
    if not text:
        return None
    m = re.match(r"\s*v?(\d+(?:\.\d+)*)", text)
    return tuple(int(part) for part in m.group(1).split(".")) if m else None


def _max_output(model: str | None, override: int | None) -> int:
    info = lookup(model, MODELS)
    default = info.max_output if info is not None else None
    if override is not None:
        return override if default is None else min(override, default)
    # Unknown model: every documented Claude default is >= 20,000, and only
    # min(maxOut, 20,000) matters.
    return default if default is not None else SUMMARY_OUTPUT_CAP


def parse_version(text: str | None) -> tuple[int, ...] | None:
    """Claude Code's version as numbers ("2.1.337 (Claude Code)" -> (2, 1, 337)), else None."""
    return _version(text)


def is_version_at_least(text: str | None, since: tuple[int, ...]) -> bool:
    """Whether Claude Code's version `text` ("2.1.337") is `since` or later; an unknown version
    counts as the newest, as current installs are."""
    version = _version(text)
    return version is None or version >= since


def _is_native_1m(window: int, model: str | None) -> bool:
    # A model whose own window is 1M (claude-opus-5-5), not one that opts in ("[1m]" on a 200k id).
    info = lookup(model, MODELS)
    return window >= _ONE_MILLION and info is not None and info.window >= _ONE_MILLION


def _positive(text: str | None) -> int | None:
    value = _parse_int(text)
    return value if value is not None and value > 0 else None


def auto_compact_window(
    window: int, model: str | None, raw: Mapping[str, str], config: ClaudeCompactionConfig
) -> CompactWindow:
    """The window Claude Code's automatic compaction counts against (at most `window`) and the
    source that decided it: "statusline" (what 2.1.336+ reported), "env", "model-settings",
    "settings", "compaction" (an automatic compaction observed before the point the version's
    default predicts), "default" (the version's own) or "window" (none: the model's window)."""
    reported = _positive(raw.get(REPORTED_COMPACT_WINDOW))
    if reported is not None:
        return CompactWindow(min(window, reported), "statusline")
    if config.window_cap is not None:
        return CompactWindow(min(window, config.window_cap), config.window_source or "settings")
    version = raw.get(VERSION_KEY)
    default: CompactWindow | None = None
    if is_version_at_least(version, _DEFAULT_AUTO_WINDOW_FROM) and _is_native_1m(window, model):
        default = CompactWindow(DEFAULT_AUTO_WINDOW, "default")
    elif (cap := _AUTO_WINDOW.get(_family(model))) is not None:
        default = CompactWindow(min(window, cap), "default")
    expected = default or CompactWindow(window, "window")
    observed = _observed_window(raw, model, config)
    # A compaction happens at the point or past it (a large tool result overshoots): only one
    # clearly before the point expected shows a smaller window.
    if observed is not None and observed < expected.size - _OBSERVED_ROUNDING:
        return CompactWindow(observed, "compaction")
    return expected


def _observed_window(
    raw: Mapping[str, str], model: str | None, config: ClaudeCompactionConfig
) -> int | None:
    compacted_from = _positive(raw.get(COMPACTED_FROM))
    if compacted_from is None or config.pct_override is not None:
        return None
    reserve = min(_max_output(model, config.max_output_override), SUMMARY_OUTPUT_CAP)
    implied = compacted_from + AUTOCOMPACT_BUFFER + reserve
    # Claude Code's auto-compact windows are round figures (400k; a server's 500k, 600k): a
    # compaction pointing to none was forced by something else (the API refusing the prompt).
    nearest = round(implied / _ROUND_WINDOW) * _ROUND_WINDOW
    if abs(implied - nearest) > _OBSERVED_ROUNDING or nearest < WINDOW_CAP_MIN:
        return None
    return nearest


def claude_compaction_point(
    window: int,
    model: str | None,
    config: ClaudeCompactionConfig = ClaudeCompactionConfig(),
    *,
    version: str | None = None,
    raw: Mapping[str, str] | None = None,
) -> int | None:
    """T, the count (input + cache + output of the last response) at which Claude Code
    auto-compacts; None when it never will.

    `model` may carry a "[1m]" suffix, a date or a provider prefix. `version` is Claude Code's
    ("2.1.332"), used where the versions measured differ: claude-opus-4-8 on a 1M window never
    compacted in 2.1.197 and compacts in 2.1.332; from 2.1.334 a native 1M model compacts
    against 400,000 by default (`auto_compact_window`); an unknown version is taken as the
    newest behaviour, as current installs are. `raw` is the flat configuration `config` was read
    from (what the statusline reported and the last compaction's size are in it). None is
    returned when auto-compaction is off, and for claude-sonnet-4-5 at any window, unless a
    compact window is set. The result is never below 1. Raises ValueError for window <= 0.
    """
    if window <= 0:
        raise ValueError(f"window must be positive, got {window}")
    if not config.enabled:
        return None
    flat = dict(raw or {})
    if version is not None:
        flat[VERSION_KEY] = version
    compact = auto_compact_window(window, model, flat, config)
    family = _family(model)
    # Only a window the user set makes the models that never auto-compact do so: an observed
    # compaction of theirs was forced (the API refused the prompt), not their rule.
    if compact.source in ("window", "default", "compaction") or (
        compact.source == "statusline" and compact.size >= window
    ):
        if family == _NEVER_COMPACTS:
            return None
        is_1m = window > _STANDARD_WINDOW or "[1m]" in (model or "").lower()
        if family == _NEVER_COMPACTS_1M and is_1m:
            measured = _version(version)
            if measured is not None and measured < _OPUS_4_8_1M_COMPACTS_FROM:
                return None
    w = min(window, compact.size)

    effective = w - min(_max_output(model, config.max_output_override), SUMMARY_OUTPUT_CAP)
    point = effective - AUTOCOMPACT_BUFFER
    if config.pct_override is not None:
        # Same expression order as the CLI: Math.floor(E * (p / 100)).
        point = min(math.floor(effective * (config.pct_override / 100)), point)
    return max(1, point)


def compaction_point(
    window: int, model: str | None, overrides: AgentOverrides, config: Mapping[str, str]
) -> int | None:
    """The rule of Claude Code: ctxd's own `reserve` (`[compaction.claude]`) when the user set one
    (window - reserve), else `claude_compaction_point` with the session's configuration."""
    check_window(window)
    reserve = RESERVE.of(overrides)
    if reserve is not None:
        return at_least_one(window - reserve)
    return _measured_point(window, model, tuple(sorted(config.items())))


@functools.lru_cache(maxsize=4096)  # pure; every hook of a session asks with the same values
def _measured_point(
    window: int, model: str | None, config_items: tuple[tuple[str, str], ...]
) -> int | None:
    config = dict(config_items)
    return claude_compaction_point(
        window, model, config_from(config, model), version=config.get(VERSION_KEY), raw=config
    )


def compact_window(window: int, model: str | None, config: Mapping[str, str]) -> CompactWindow:
    """`auto_compact_window` for the daemon's figures (`AgentSpec.compact_window`)."""
    check_window(window)
    return auto_compact_window(window, model, config, config_from(config, model))


def parse_js_int(text: str | None) -> int | None:
    """A value as the CLI's JavaScript parseInt reads it (None when it reads none)."""
    return _parse_int(text)


def settings_json(config: Mapping[str, str], key: str) -> object:
    """A settings.json key's value from the flat configuration (None when absent or broken)."""
    return _json(config.get(key))
