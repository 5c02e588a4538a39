"""Compaction headroom and each agent's compaction point, against the brief and the captures."""

from __future__ import annotations

import pytest

from ctxd.agents import AGENTS, spec
from ctxd.core.compaction import (
    CompactionOverrides,
    ConfigKey,
    for_agent,
    for_window,
    reserve_rule,
    tokens_to_compaction,
)
from ctxd.errors import InvalidInput

DEFAULT_RULES: CompactionOverrides = {}


def compaction_point(agent: str, window: int, rules: CompactionOverrides = DEFAULT_RULES) -> int:
    rule = spec(agent).compaction if agent in AGENTS else reserve_rule
    point = rule(window, None, rules, {})
    assert point is not None
    return point


@pytest.mark.parametrize(
    ("window", "reserve"),
    [
        (200_000, 16_384),
        (1_000_000, 62_500),
        (2_000_000, 65_536),
        (8_192, 2_048),
        # Small windows hit the guard at the end of forWindow.
        (1_000, 250),
        (100, 128),
        (1, 128),
    ],
)
def test_for_window(window: int, reserve: int) -> None:
    assert for_window(window) == reserve


@pytest.mark.parametrize("bad", [0, -1, -1_000_000])
def test_for_window_rejects_nonpositive_windows(bad: int) -> None:
    with pytest.raises(InvalidInput, match=f"window must be positive, got {bad}"):
        for_window(bad)


@pytest.mark.parametrize(
    ("agent", "window", "rules", "point"),
    [
        # Claude Code: its measured rule (truth tables in tests/agents/claude), unless the user
        # set a reserve.
        ("claude", 1_000_000, {}, 967_000),
        ("claude", 200_000, {}, 167_000),
        ("claude", 1_000_000, {"claude": {"reserve": 50_000}}, 950_000),
        # Unknown agents get forWindow's reserve.
        ("no-such-agent", 200_000, {}, 183_616),
        ("no-such-agent", 1_000_000, {}, 937_500),
        # Gemini CLI: half the window.
        ("gemini", 1_048_576, {}, 524_288),
        ("gemini", 1_000_000, {"gemini": {"fraction": 0.7}}, 700_000),
        # Codex CLI: 90 % of the catalog window, from the 95 % it reports.
        ("codex", 258_400, {}, 244_800),
        ("codex", 380_000, {}, 360_000),
        ("codex", 258_400, {"codex": {"token_limit": 100_000}}, 100_000),
        # A limit above the 90 % point changes nothing: Codex compacts at the lower one.
        ("codex", 258_400, {"codex": {"token_limit": 250_000}}, 244_800),
    ],
)
def test_compaction_point(agent: str, window: int, rules: CompactionOverrides, point: int) -> None:
    assert compaction_point(agent, window, rules) == point


def test_codex_capture_compacted_above_the_point_and_not_below() -> None:
    # rollout.autocompact.jsonl: 120,100 went on, 250,100 was compacted (window 258,400).
    point = compaction_point("codex", 258_400)
    assert 120_100 < point < 250_100
    # rollout.autocompact_limit.jsonl: with the limit at 100,000, 120,100 was compacted.
    assert compaction_point("codex", 258_400, {"codex": {"token_limit": 100_000}}) < 120_100


def test_gemini_capture_compressed_above_the_point_and_not_below() -> None:
    # gemini-cli 0.61.0: a prompt of 12,000 stayed, one of 600,000 was compressed.
    point = compaction_point("gemini", 1_048_576)
    assert 12_000 < point <= 600_000


def test_claude_capture_compacted_at_the_point() -> None:
    # 2.1.332 compacted between about 965,100 and 970,100 of 1M (input + cache + output).
    assert 965_100 <= compaction_point("claude", 1_000_000) <= 970_100


def test_compaction_point_is_at_least_one() -> None:
    assert compaction_point("claude", 1_000, {"claude": {"reserve": 5_000}}) == 1


@pytest.mark.parametrize("agent", AGENTS)
@pytest.mark.parametrize("bad", [0, -1])
def test_compaction_point_rejects_nonpositive_windows(agent: str, bad: int) -> None:
    with pytest.raises(InvalidInput, match="window must be positive"):
        compaction_point(agent, bad)


FRACTION = ConfigKey("fraction", float, low=0.01, high=1, default=0.5)
LIMIT = ConfigKey("limit", int, low=1, default=None)


@pytest.mark.parametrize(
    ("key", "value", "accepted"),
    [
        (FRACTION, 0.5, True),
        (FRACTION, 1, True),  # TOML's 1 is an integer; a share of 1 is still a share
        (FRACTION, 0.0, False),
        (FRACTION, 1.5, False),
        (FRACTION, float("nan"), False),
        (FRACTION, True, False),
        (FRACTION, "0.5", False),
        (LIMIT, 1, True),
        (LIMIT, 10**9, True),
        (LIMIT, 0, False),
        (LIMIT, 1.0, False),
        (LIMIT, True, False),
    ],
)
def test_a_config_key_takes_its_type_in_its_range(
    key: ConfigKey[int, None] | ConfigKey[float, float], value: object, accepted: bool
) -> None:
    assert key.accepts(value) is accepted


def test_a_config_key_says_what_it_takes_and_gives_its_default() -> None:
    assert FRACTION.expected == "a number from 0.01 to 1"
    assert LIMIT.expected == "a whole number of at least 1"
    assert ConfigKey("n", int, low=0, high=10, default=5).expected == "a whole number from 0 to 10"
    assert (FRACTION.of({}), FRACTION.of({"fraction": 1})) == (0.5, 1.0)
    assert type(FRACTION.of({"fraction": 1})) is float
    assert (LIMIT.of({}), LIMIT.of({"limit": 7}), LIMIT.of({"fraction": 7})) == (None, 7, None)


def test_an_agents_rule_reads_its_own_overrides_only() -> None:
    seen: list[object] = []

    def rule_of(window: int, model: str | None, own: object, config: object) -> int:
        seen.append(own)
        return window

    rule = for_agent("a", rule_of)
    assert rule(10, None, {"a": {"x": 1}, "b": {"y": 2}}, {}) == 10
    assert rule(10, None, {"b": {"y": 2}}, {}) == 10
    assert seen == [{"x": 1}, {}]


@pytest.mark.parametrize("agent", AGENTS)
def test_every_agents_keys_have_usable_defaults(agent: str) -> None:
    for key in spec(agent).config_keys:
        assert key.default is None or key.accepts(key.default), (agent, key.name)
        assert key.alias is None or key.alias.startswith(f"{agent}_"), (agent, key.alias)


@pytest.mark.parametrize(
    ("tokens", "point", "left"),
    [
        (0, 937_500, 937_500),
        (652_100, 937_500, 285_400),
        (937_500, 937_500, 0),
        (950_000, 937_500, 0),
    ],
)
def test_tokens_to_compaction(tokens: int, point: int, left: int) -> None:
    assert tokens_to_compaction(tokens, point) == left
