"""`[thresholds] warning_tokens` / `critical_tokens`: absolute limits beside the percentages,
whichever comes first, for every agent; the warning says which limit was passed."""

from __future__ import annotations

from dataclasses import replace

import pytest

from ctxd import agents
from ctxd.core.events import HookEvent
from ctxd.core.measure import Severity
from ctxd.core.policy import PolicyState, severity_for, tokens_severity
from ctxd.core.session import Grounds, figures, figures_row, new_session, on_hook
from ctxd.core.settings import Settings, Thresholds
from ctxd.errors import InvalidInput

LIMITS = Thresholds(warning_tokens=150_000, critical_tokens=250_000)


@pytest.mark.parametrize(
    ("remaining", "tokens", "expected"),
    [
        (90.0, 149_999, Severity.OK),
        (90.0, 150_000, Severity.WARNING),  # the token limit comes first
        (90.0, 250_000, Severity.CRITICAL),
        (30.0, 100_000, Severity.WARNING),  # the percentage comes first
        (20.0, 160_000, Severity.CRITICAL),
        (30.0, 260_000, Severity.CRITICAL),  # the higher of the two
        (90.0, None, Severity.OK),
    ],
)
def test_whichever_comes_first(remaining: float, tokens: int | None, expected: Severity) -> None:
    assert severity_for(remaining, LIMITS, tokens) == expected


def test_unset_by_default_and_checked() -> None:
    assert tokens_severity(10**9, Thresholds()) == Severity.OK
    with pytest.raises(InvalidInput):
        Thresholds(warning_tokens=200_000, critical_tokens=100_000)
    with pytest.raises(InvalidInput):
        Thresholds(warning_tokens=0)


@pytest.mark.parametrize("agent", agents.AGENTS)
def test_every_agent_warns_at_the_token_limit_and_says_so(agent: str) -> None:
    spec = agents.spec(agent)
    settings = Settings(thresholds=LIMITS, default_window=1_000_000)
    grounds = Grounds(settings, spec.compaction)
    state = replace(new_session(agent, "s1", None, 0.0), tokens=160_000)
    assert figures(state, grounds).severity == Severity.WARNING
    event = HookEvent(agent, "PostToolUse", "tool_call", "s1", None, None)
    _, reply = on_hook(state, event, grounds, 1.0)
    assert reply.context is not None
    assert reply.context.startswith(
        "CONTEXT WARNING: past the user's warning limit of 150,000 tokens."
    )
    _, reply = on_hook(replace(state, tokens=260_000), event, grounds, 2.0)
    assert reply.context is not None and "critical limit of 250,000 tokens" in reply.context


def test_the_config_file_takes_the_keys() -> None:
    from ctxd.daemon.config import parse_settings
    from ctxd.errors import ConfigError

    t = parse_settings("[thresholds]\nwarning_tokens = 150000\ncritical_tokens = 200000\n")
    assert (t.thresholds.warning_tokens, t.thresholds.critical_tokens) == (150_000, 200_000)
    assert parse_settings("").thresholds.warning_tokens is None
    with pytest.raises(ConfigError):
        parse_settings("[thresholds]\nwarning_tokens = 300000\ncritical_tokens = 200000\n")
    with pytest.raises(ConfigError):
        parse_settings('[thresholds]\nwarning_tokens = "150k"\n')


@pytest.mark.parametrize(
    ("thresholds", "tokens", "limit"),
    [
        # On a 1,000,000 window and the compaction basis (Claude Code's point: 967,000).
        (LIMITS, 100_000, None),  # nothing passed
        (LIMITS, 160_000, ("warning_tokens", 150_000)),  # the token limit set the level
        (LIMITS, 260_000, ("critical_tokens", 250_000)),
        (LIMITS, 880_000, ("critical", 25.0)),  # the percentage says CRITICAL by itself
        (Thresholds(), 700_000, ("warning", 35.0)),  # 28 % left
        (Thresholds(warning_tokens=800_000), 700_000, ("warning", 35.0)),
    ],
)
def test_the_figures_name_the_limit_that_set_the_level(
    thresholds: Thresholds, tokens: int, limit: tuple[str, float] | None
) -> None:
    spec = agents.spec("claude")
    settings = Settings(thresholds=thresholds, default_window=1_000_000)
    grounds = Grounds(settings, spec.compaction)
    state = replace(new_session("claude", "s1", None, 0.0), tokens=tokens)
    fig = figures(state, grounds)
    assert fig.limit_passed == limit
    row = figures_row(fig)
    assert (row["limit_passed"], row["limit_value"]) == (limit or (None, None))


@pytest.mark.parametrize(
    ("tokens", "severity", "next_severity", "to_next"),
    [
        (140_000, Severity.OK, Severity.WARNING, 2),  # 10,000 to the warning limit
        (200_000, Severity.WARNING, Severity.CRITICAL, 10),  # 50,000 to the critical limit
        (260_000, Severity.CRITICAL, None, None),
    ],
)
def test_the_figures_forecast_from_the_level_the_token_limits_give(
    tokens: int, severity: Severity, next_severity: Severity | None, to_next: int | None
) -> None:
    """Growing 5,000 a call on a 1,000,000 window: the forecast counts from the level the
    figures show, to the next one's token limit when it comes before its percentage."""
    settings = Settings(thresholds=LIMITS, default_window=1_000_000)
    grounds = Grounds(settings, agents.spec("claude").compaction)
    state = new_session("claude", "s1", None, 0.0)
    recent = PolicyState(recent=(tokens - 10_000, tokens - 5_000))
    fig = figures(replace(state, tokens=tokens, policy=recent), grounds)
    assert fig.severity == severity
    assert fig.forecast is not None
    assert (fig.forecast.next_severity, fig.forecast.calls_to_next_threshold) == (
        next_severity,
        to_next,
    )


@pytest.mark.parametrize("agent", agents.AGENTS)
def test_a_warning_past_the_token_limit_forecasts_the_critical_one(agent: str) -> None:
    spec = agents.spec(agent)
    settings = Settings(thresholds=LIMITS, default_window=1_000_000)
    grounds = Grounds(settings, spec.compaction)
    state = replace(
        new_session(agent, "s1", None, 0.0),
        tokens=200_000,
        policy=PolicyState(recent=(190_000, 195_000)),
    )
    event = HookEvent(agent, "PostToolUse", "tool_call", "s1", None, None)
    _, reply = on_hook(state, event, grounds, 1.0)
    assert reply.context is not None
    assert reply.context.startswith(
        "CONTEXT WARNING: past the user's warning limit of 150,000 tokens."
    )
    assert "~5,000 tokens per tool call: about 10 tool calls until CRITICAL" in reply.context
