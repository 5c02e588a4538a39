"""Severity, debounce, handoff and forecast rules, and the texts they produce."""

from __future__ import annotations

import re

import pytest

from ctxd.core.measure import Basis, Forecast, Severity, Usage, remaining_pct, used_pct
from ctxd.core.messages import handoff_text, warning_text
from ctxd.core.policy import (
    RECENT_CALLS,
    PolicyState,
    forecast,
    on_compaction,
    on_stop,
    on_tool_call,
    on_tool_call_handoff,
    severity_for,
)
from ctxd.core.settings import HandoffSettings, Thresholds
from ctxd.errors import InvalidInput

W, C, OK = Severity.WARNING, Severity.CRITICAL, Severity.OK
WINDOW = 1_000_000
POINT = 937_500  # claude, 1M


def usage_at_remaining(remaining: float, basis: Basis) -> Usage:
    """A usage whose remaining % on `basis` is exactly `remaining`."""
    base = WINDOW if basis == "window" else POINT
    tokens = round(base * (100 - remaining) / 100)
    return Usage(tokens=tokens, window=WINDOW, compaction_at=POINT)


# --- severity and percentages ---------------------------------------------------------------


def test_severity_labels() -> None:
    assert [str(s) for s in Severity] == ["ok", "warning", "critical"]
    assert [s.label for s in Severity] == ["ok", "warning", "critical"]
    assert OK < W < C


@pytest.mark.parametrize(
    ("remaining", "expected"),
    [
        (100.0, OK),
        (40.0, OK),
        (35.01, OK),
        (35.0, W),
        (30.0, W),
        (25.01, W),
        (25.0, C),
        (20.0, C),
        (0.0, C),
    ],
)
def test_severity_for_defaults(remaining: float, expected: Severity) -> None:
    assert severity_for(remaining, Thresholds()) == expected


@pytest.mark.parametrize(
    ("remaining", "expected"), [(50.0, OK), (40.0, W), (15.0, W), (10.0, C), (5.0, C)]
)
def test_severity_for_custom(remaining: float, expected: Severity) -> None:
    assert severity_for(remaining, Thresholds(warning=40, critical=10)) == expected


@pytest.mark.parametrize(
    ("usage", "basis", "used"),
    [
        (Usage(500_000, 1_000_000, 937_500), "window", 50.0),
        (Usage(500_000, 1_000_000, 937_500, reported_used_pct=48.0), "window", 48.0),
        (Usage(468_750, 1_000_000, 937_500), "compaction", 50.0),
        # The statusline's % is of the whole window: it does not speak for the compaction basis.
        (Usage(468_750, 1_000_000, 937_500, reported_used_pct=10.0), "compaction", 50.0),
        # Gemini: half the window used is all of the room before compression.
        (Usage(524_288, 1_048_576, 524_288), "compaction", 100.0),
        (Usage(524_288, 1_048_576, 524_288), "window", 50.0),
        # Never clamped above: a usage past the window (or the point) shows as such.
        (Usage(1_000_000, 1_000_000, 937_500), "compaction", 100 * 1_000_000 / 937_500),
        (Usage(213_000, 200_000, 167_000), "window", 106.5),
        (Usage(0, 1_000_000, 937_500, reported_used_pct=104.0), "window", 104.0),
        # ...but never below 0.
        (Usage(0, 1_000_000, 937_500, reported_used_pct=-3.0), "window", 0.0),
        # Claude Code counts the reply's output towards its point (`pending`), not the window.
        (Usage(150_300, 200_000, 167_000, pending=16_700), "compaction", 100.0),
        (Usage(150_300, 200_000, 167_000, pending=16_700), "window", 75.15),
    ],
)
def test_used_and_remaining_pct(usage: Usage, basis: Basis, used: float) -> None:
    assert used_pct(usage, basis) == pytest.approx(used)
    assert remaining_pct(usage, basis) == pytest.approx(100 - used)


@pytest.mark.parametrize(
    "kwargs",
    [
        {"tokens": -1, "window": 1, "compaction_at": 1},
        {"tokens": 0, "window": 0, "compaction_at": 1},
        {"tokens": 0, "window": 1, "compaction_at": 0},
    ],
)
def test_invalid_usage(kwargs: dict[str, int]) -> None:
    with pytest.raises(InvalidInput):
        Usage(**kwargs)


@pytest.mark.parametrize(
    "kwargs",
    [
        {"warning": 20.0, "critical": 25.0},
        {"warning": 101.0},
        {"critical": -1.0},
        {"debounce": 0},
        {"basis": "tokens"},
    ],
)
def test_invalid_thresholds(kwargs: dict[str, object]) -> None:
    with pytest.raises(InvalidInput):
        Thresholds(**kwargs)  # type: ignore[arg-type]


@pytest.mark.parametrize("kwargs", [{"at": 0.0}, {"at": 120.0}, {"action": "shout"}])
def test_invalid_handoff_settings(kwargs: dict[str, object]) -> None:
    with pytest.raises(InvalidInput):
        HandoffSettings(**kwargs)  # type: ignore[arg-type]


# --- debounce: GSD's observed trace ---------------------------------------------------------

# remaining % per call -> the warning level given (None: nothing said).
GSD_TRACE: list[tuple[float, Severity | None]] = [
    (40, None),
    (30, W),
    (30, None),
    (30, None),
    (30, None),
    (30, None),
    (30, W),
    (20, C),  # escalation: at once
    (20, None),
    (20, None),
    (20, None),
    (20, None),
    (20, C),
    (30, None),  # de-escalation is debounced like any repeat
]


def run_trace(
    trace: list[tuple[float, Severity | None]], t: Thresholds, state: PolicyState | None = None
) -> PolicyState:
    state = state or PolicyState()
    for step, (remaining, expected) in enumerate(trace):
        state, warning = on_tool_call(state, usage_at_remaining(remaining, t.basis), t, now=step)
        got = warning.severity if warning else None
        assert got == expected, f"call {step + 1} at {remaining}% remaining"
    return state


@pytest.mark.parametrize("basis", ["window", "compaction"])
def test_gsd_trace(basis: Basis) -> None:
    run_trace(GSD_TRACE, Thresholds(basis=basis))


def test_gsd_trace_step_by_step_state() -> None:
    t = Thresholds(basis="window")
    state = PolicyState()
    expected_states = [
        (OK, 0),  # 40: above the threshold, counter untouched
        (W, 0),  # first warning
        (W, 1),
        (W, 2),
        (W, 3),
        (W, 4),
        (W, 0),  # 5th call since the warning
        (C, 0),  # escalation
        (C, 1),
        (C, 2),
        (C, 3),
        (C, 4),
        (C, 0),
        (C, 1),  # 30 after CRITICAL: counted, not warned, level kept
    ]
    for step, ((remaining, _), (warned, calls)) in enumerate(
        zip(GSD_TRACE, expected_states, strict=True)
    ):
        state, _ = on_tool_call(state, usage_at_remaining(remaining, "window"), t, now=step)
        assert (state.warned, state.calls_since_warning) == (warned, calls), f"call {step + 1}"


def test_deescalated_warning_comes_after_the_debounce() -> None:
    t = Thresholds(basis="window")
    state = run_trace(GSD_TRACE, t)
    trace: list[tuple[float, Severity | None]] = [(30, None), (30, None), (30, None), (30, W)]
    state = run_trace(trace, t, state)
    assert state.warned == W


def test_above_threshold_calls_do_not_advance_the_debounce() -> None:
    t = Thresholds(basis="window")
    trace: list[tuple[float, Severity | None]] = [
        (30, W),
        (30, None),
        (50, None),
        (50, None),
        (50, None),
        (30, None),
        (30, None),
        (30, None),
        (30, W),
    ]
    run_trace(trace, t)


def test_first_warning_may_be_critical() -> None:
    run_trace([(40, None), (10, C), (10, None)], Thresholds(basis="window"))


def test_debounce_setting() -> None:
    trace: list[tuple[float, Severity | None]] = [(30, W), (30, None), (30, W), (30, None)]
    run_trace(trace, Thresholds(basis="window", debounce=2))
    run_trace([(30, W), (30, W), (30, W)], Thresholds(basis="window", debounce=1))


def test_warning_records_time_and_recent_tokens() -> None:
    t = Thresholds(basis="window")
    state, warning = on_tool_call(PolicyState(), usage_at_remaining(30, "window"), t, now=123.5)
    assert warning is not None
    assert state.warned_at == 123.5
    assert state.recent == (700_000,)


def test_recent_keeps_the_last_calls_only() -> None:
    t = Thresholds()
    state = PolicyState()
    for i in range(RECENT_CALLS + 3):
        state, _ = on_tool_call(state, Usage(i * 1_000, WINDOW, POINT), t, now=i)
    assert state.recent == tuple(i * 1_000 for i in range(3, RECENT_CALLS + 3))


def test_same_figures_on_both_bases_differ() -> None:
    # The brief's point: on Gemini CLI (compression at half the window) a threshold on the
    # whole window stays silent while the room before compression is almost gone.
    g = Usage(400_000, 1_048_576, 524_288)
    assert severity_for(remaining_pct(g, "window"), Thresholds()) == OK
    assert severity_for(remaining_pct(g, "compaction"), Thresholds()) == C


# --- compaction resets ------------------------------------------------------------------------


def test_compaction_resets_to_the_first_warning_state() -> None:
    t = Thresholds(basis="window")
    state = run_trace(GSD_TRACE[:9], t)  # CRITICAL given, counter at 1
    state = on_compaction(state)
    assert state == PolicyState()
    # Without the reset this WARNING would be swallowed by the debounce.
    run_trace([(30, W), (30, None)], t, state)


def test_compaction_clears_the_forecast_history() -> None:
    state = PolicyState(recent=(1, 2, 3), handoff_asked=True, warned=C, calls_since_warning=3)
    assert on_compaction(state).recent == ()
    assert on_compaction(state).handoff_asked is False


# --- handoff ----------------------------------------------------------------------------------

HIGH = Usage(700_000, WINDOW, POINT)  # 70 % of the window, ~74.7 % of the room
LOW = Usage(600_000, WINDOW, POINT)  # 60 % of the window, 64 % of the room


@pytest.mark.parametrize(
    ("usage", "basis", "h", "active", "asked", "expect_text"),
    [
        (HIGH, "window", HandoffSettings(), False, False, True),
        (HIGH, "compaction", HandoffSettings(), False, False, True),
        (LOW, "window", HandoffSettings(), False, False, False),
        (LOW, "compaction", HandoffSettings(), False, False, False),
        (LOW, "compaction", HandoffSettings(at=60.0), False, False, True),
        (HIGH, "window", HandoffSettings(), True, False, False),  # stop_hook_active
        (HIGH, "window", HandoffSettings(enabled=False), False, False, False),
        (HIGH, "window", HandoffSettings(), False, True, False),  # already asked
        (HIGH, "window", HandoffSettings(action="block"), False, False, True),
    ],
)
def test_on_stop_table(
    usage: Usage, basis: Basis, h: HandoffSettings, active: bool, asked: bool, expect_text: bool
) -> None:
    state = PolicyState(handoff_asked=asked)
    new_state, text = on_stop(state, usage, h, basis, stop_hook_active=active)
    assert (text is not None) == expect_text
    assert new_state.handoff_asked == (asked or expect_text)


@pytest.mark.parametrize(
    ("usage", "basis", "h", "asked", "expect_text"),
    [
        (HIGH, "window", HandoffSettings(), False, True),
        (HIGH, "compaction", HandoffSettings(), False, True),
        (LOW, "window", HandoffSettings(), False, False),
        (LOW, "compaction", HandoffSettings(), False, False),
        (LOW, "compaction", HandoffSettings(at=60.0), False, True),
        (HIGH, "window", HandoffSettings(enabled=False), False, False),
        (HIGH, "window", HandoffSettings(), True, False),  # already asked
        (HIGH, "window", HandoffSettings(action="block"), False, True),  # the model reads it
    ],
)
def test_on_tool_call_handoff_table(
    usage: Usage, basis: Basis, h: HandoffSettings, asked: bool, expect_text: bool
) -> None:
    """An agent that reads answers only at tool calls is asked there, and the answer that
    carries the request is its delivery: asked, with nothing left to confirm."""
    state = PolicyState(handoff_asked=asked)
    new_state, text = on_tool_call_handoff(state, usage, h, basis)
    assert (text is not None) == expect_text
    if expect_text:
        assert text == handoff_text(usage, basis)
    assert new_state.handoff_asked == (asked or expect_text)
    assert not new_state.handoff_unconfirmed


def test_tool_call_handoff_once_then_rearmed_by_compaction() -> None:
    h = HandoffSettings()
    state, first = on_tool_call_handoff(PolicyState(), HIGH, h, "window")
    state, again = on_tool_call_handoff(state, HIGH, h, "window")
    assert (first is not None, again) == (True, None)
    state, after = on_tool_call_handoff(on_compaction(state), HIGH, h, "window")
    assert after is not None


def test_handoff_once_then_rearmed_by_compaction() -> None:
    h = HandoffSettings()
    state, first = on_stop(PolicyState(), HIGH, h, "window", stop_hook_active=False)
    assert first is not None
    state, _ = on_stop(state, HIGH, h, "window", stop_hook_active=True)  # the agent went on
    state, again = on_stop(state, HIGH, h, "window", stop_hook_active=False)
    assert again is None
    state = on_compaction(state)
    state, after = on_stop(state, HIGH, h, "window", stop_hook_active=False)
    assert after is not None


def test_stop_hook_active_does_not_use_up_the_handoff() -> None:
    h = HandoffSettings()
    state, text = on_stop(PolicyState(), HIGH, h, "window", stop_hook_active=True)
    assert text is None
    assert state.handoff_asked is False
    _, text = on_stop(state, HIGH, h, "window", stop_hook_active=False)
    assert text is not None


# --- forecast ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("recent", "usage", "t", "expected"),
    [
        # Too little history or no growth: nothing forecast.
        ((), Usage(100_000, WINDOW, POINT), Thresholds(), Forecast(None, None, None)),
        ((100_000,), Usage(100_000, WINDOW, POINT), Thresholds(), Forecast(None, None, None)),
        (
            (100_000, 100_000),
            Usage(100_000, WINDOW, POINT),
            Thresholds(),
            Forecast(None, None, None),
        ),
        (
            (200_000, 150_000),
            Usage(150_000, WINDOW, POINT),
            Thresholds(),
            Forecast(None, None, None),
        ),
        # 12,000 per call, window basis: 652,100 used, WARNING at 650,000 reached, CRITICAL at
        # 750,000 -> 97,900 / 12,000 = 8.2 -> 9 calls; compaction at 937,500 -> 285,400 -> 24.
        (
            (628_100, 640_100, 652_100),
            Usage(652_100, WINDOW, POINT),
            Thresholds(basis="window"),
            Forecast(12_000.0, 9, 24, C),
        ),
        # The current usage is appended when `recent` does not end with it.
        (
            (628_100, 640_100),
            Usage(652_100, WINDOW, POINT),
            Thresholds(basis="window"),
            Forecast(12_000.0, 9, 24, C),
        ),
        # Compaction basis, OK now: WARNING at 65 % of 937,500 = 609,375.
        (
            (500_000, 510_000),
            Usage(520_000, WINDOW, POINT),
            Thresholds(),
            Forecast(10_000.0, 9, 42, W),
        ),
        # At CRITICAL there is no next threshold.
        (
            (880_000, 900_000),
            Usage(900_000, WINDOW, POINT),
            Thresholds(),
            Forecast(20_000.0, None, 2, None),
        ),
        # Past the compaction point.
        (
            (930_000, 940_000),
            Usage(940_000, WINDOW, POINT),
            Thresholds(),
            Forecast(10_000.0, None, 0, None),
        ),
        # Only the run since the last drop counts (a rewind at 300,000).
        (
            (500_000, 600_000, 300_000, 305_000, 310_000),
            Usage(310_000, WINDOW, POINT),
            Thresholds(),
            Forecast(5_000.0, 60, 126, W),
        ),
    ],
)
def test_forecast(recent: tuple[int, ...], usage: Usage, t: Thresholds, expected: Forecast) -> None:
    assert forecast(recent, usage, t) == expected


def _limits(warning: int | None, critical: int | None, basis: Basis = "window") -> Thresholds:
    return Thresholds(basis=basis, warning_tokens=warning, critical_tokens=critical)


# 5,000 tokens per call on the 1,000,000 window basis: WARNING at 650,000 tokens by the
# percentage, CRITICAL at 750,000; the token limits count `tokens` (without `pending`), as
# `severity_for` does.
@pytest.mark.parametrize(
    ("tokens", "t", "next_severity", "to_next"),
    [
        # Only warning_tokens set. Above the usage: it comes first (10,000 / 5,000 -> 2, not
        # the percentage's 102); 9,000 -> 1.8 -> 2; 1 -> at least 1.
        (140_000, _limits(150_000, None), W, 2),
        (141_000, _limits(150_000, None), W, 2),
        (149_999, _limits(150_000, None), W, 1),
        # At and below it the session is at WARNING already: the next level is CRITICAL, at
        # the percentage (no critical limit): 600,000 / 5,000 and 590,000 / 5,000.
        (150_000, _limits(150_000, None), C, 120),
        (160_000, _limits(150_000, None), C, 118),
        # Only critical_tokens set. Above the usage, before the warning percentage: the session
        # reaches WARNING (CRITICAL, in fact) at the token limit, 160,000 / 5,000.
        (140_000, _limits(None, 300_000), W, 32),
        # At and below it: CRITICAL already, nothing above.
        (300_000, _limits(None, 300_000), None, None),
        (310_000, _limits(None, 300_000), None, None),
        # Both set. Above both: the warning limit first.
        (140_000, _limits(150_000, 250_000), W, 2),
        # Between them: WARNING by tokens, the critical limit first (50,000 / 5,000).
        (200_000, _limits(150_000, 250_000), C, 10),
        # At and past the critical limit: CRITICAL.
        (250_000, _limits(150_000, 250_000), None, None),
        (260_000, _limits(150_000, 250_000), None, None),
        # WARNING by tokens, the critical percentage first: 550,000 / 5,000, not 700,000.
        (200_000, _limits(100_000, 900_000), C, 110),
    ],
)
def test_forecast_counts_the_token_limits(
    tokens: int, t: Thresholds, next_severity: Severity | None, to_next: int | None
) -> None:
    usage = Usage(tokens, WINDOW, POINT)
    fc = forecast((tokens - 10_000, tokens - 5_000), usage, t)
    level = severity_for(remaining_pct(usage, t.basis), t, tokens)
    assert (fc.next_severity, fc.calls_to_next_threshold) == (next_severity, to_next)
    assert fc.next_severity == (None if level == C else Severity(level + 1))
    assert fc.tokens_per_call == 5_000.0


def test_forecast_token_limits_on_the_compaction_basis() -> None:
    """The percentage counts `tokens + pending` of the compaction point, the token limit
    `tokens` alone: at 140,000 + 20,000 pending WARNING is 449,375 tokens away by the
    percentage (90 calls), 10,000 by the limit (2)."""
    usage = Usage(140_000, WINDOW, POINT, pending=20_000)
    fc = forecast((130_000, 135_000), usage, _limits(150_000, None, "compaction"))
    assert (fc.next_severity, fc.calls_to_next_threshold) == (W, 2)


# --- texts ------------------------------------------------------------------------------------

IMPERATIVES = re.compile(r"\b(STOP|NOW|IMMEDIATELY|MUST)\b")


def test_warning_text_states_every_figure() -> None:
    u = Usage(652_100, WINDOW, POINT)
    fc = Forecast(12_345.0, 3, 9, C)
    text = warning_text(W, u, "window", fc)
    assert text.startswith("CONTEXT WARNING:")
    assert "65% of the context window is used, 35% left" in text
    assert "652,100 of 1,000,000 tokens" in text
    assert "about 285,400 tokens before compaction is due" in text
    assert (
        "At the recent rate of ~12,000 tokens per tool call: about 3 tool calls until "
        "CRITICAL, about 9 until compaction." in text
    )
    assert "does not override the user's instructions" in text
    assert "handoff" in text
    assert not IMPERATIVES.search(text)
    assert 2 <= text.count(". ") + 1 <= 3


def test_critical_text_on_the_compaction_basis() -> None:
    u = Usage(750_000, WINDOW, POINT)
    text = warning_text(C, u, "compaction", Forecast(20_000.0, None, 10, None))
    assert text.startswith("CONTEXT CRITICAL:")
    assert "80% of the room before auto-compaction is used, 20% left" in text
    assert "about 187,500 tokens before compaction is due" in text
    assert "~20,000 tokens per tool call: about 10 tool calls until compaction." in text
    assert "until CRITICAL" not in text
    assert not IMPERATIVES.search(text)


def test_unknown_forecast_is_left_out() -> None:
    text = warning_text(W, Usage(652_100, WINDOW, POINT), "window", Forecast(None, None, None))
    assert "rate" not in text
    assert "tool call" not in text
    assert text.count(". ") + 1 == 2


def test_singular_call_and_due_compaction() -> None:
    text = warning_text(C, Usage(940_000, WINDOW, POINT), "compaction", Forecast(500.0, None, 0))
    assert "compaction is due" in text
    assert "until compaction" not in text  # 0 calls: already due, said above
    text = warning_text(W, Usage(652_100, WINDOW, POINT), "window", Forecast(90_000.0, 1, 4, C))
    assert "about 1 tool call until CRITICAL, about 4 until compaction" in text


def test_used_and_left_always_add_up() -> None:
    u = Usage(0, WINDOW, POINT, reported_used_pct=64.5)
    text = warning_text(W, u, "window", Forecast(None, None, None))
    m = re.search(r"(\d+)% of the context window is used, (\d+)% left", text)
    assert m is not None
    assert int(m.group(1)) + int(m.group(2)) == 100


def test_tool_call_warning_carries_the_text_and_forecast() -> None:
    t = Thresholds(basis="window")
    state = PolicyState(recent=(628_100, 640_100))
    _, warning = on_tool_call(state, Usage(652_100, WINDOW, POINT), t, now=0.0)
    assert warning is not None
    assert warning.severity == W
    assert warning.text.startswith("CONTEXT WARNING:")
    assert "~12,000 tokens per tool call: about 9 tool calls until CRITICAL" in warning.text


@pytest.mark.parametrize("basis", ["window", "compaction"])
def test_handoff_text(basis: Basis) -> None:
    text = handoff_text(HIGH, basis)
    assert text.startswith("CONTEXT HANDOFF:")
    assert "700,000 of 1,000,000 tokens" in text
    for part in ("handoff note", "goal", "state", "next steps", "files", "fresh session"):
        assert part in text
    assert "does not override the user's instructions" in text
    assert not IMPERATIVES.search(text)
    phrase = "of the context window" if basis == "window" else "of the room before auto-compaction"
    assert phrase in text


def test_on_stop_returns_the_handoff_text() -> None:
    _, text = on_stop(PolicyState(), HIGH, HandoffSettings(), "window", stop_hook_active=False)
    assert text == handoff_text(HIGH, "window")


IDLE = Usage(250_000, WINDOW, POINT)  # 25 % of the window: far from the handoff point


@pytest.mark.parametrize(
    ("usage", "idle", "h", "active", "asked", "expect_text"),
    [
        (IDLE, False, HandoffSettings(), False, False, False),  # the size point is far
        (IDLE, True, HandoffSettings(), False, False, True),  # the idle compaction comes first
        (HIGH, True, HandoffSettings(), False, False, True),
        (IDLE, True, HandoffSettings(), True, False, False),  # stop_hook_active
        (IDLE, True, HandoffSettings(enabled=False), False, False, False),
        (IDLE, True, HandoffSettings(), False, True, False),  # asked once per compaction
    ],
)
def test_the_handoff_point_is_the_earlier_of_the_two_compactions(
    usage: Usage, idle: bool, h: HandoffSettings, active: bool, asked: bool, expect_text: bool
) -> None:
    state = PolicyState(handoff_asked=asked)
    new_state, text = on_stop(state, usage, h, "compaction", active, idle_compaction=idle)
    assert (text is not None) == expect_text
    assert new_state.handoff_asked == (asked or expect_text)


@pytest.mark.parametrize(
    ("calls_to_compaction", "idle_at", "first"),
    [
        (None, None, None),  # no rate, no idle compaction: nothing known
        (40, None, "size"),
        (None, 1_800_003_240.0, "idle"),
        (40, 1_800_003_240.0, "idle"),  # left as it is, the idle one comes first
        (1, 1_800_003_240.0, "size"),  # unless the next call reaches the size point
        (0, 1_800_003_240.0, "size"),  # or it is due already
    ],
)
def test_the_forecast_names_the_compaction_that_comes_first(
    calls_to_compaction: int | None, idle_at: float | None, first: str | None
) -> None:
    fc = Forecast(5_000.0, None, calls_to_compaction, idle_compaction_at=idle_at)
    assert fc.first_compaction == first


# A handoff asked, by the next stops (stop_hook_active of each): whether each asks.
@pytest.mark.parametrize(
    ("action", "stops", "asked"),
    [
        # the agent went on with it (its next stop says so): asked once
        ("block", [False, True, False], [True, False, False]),
        # its client never got it (the next stop is a plain one): asked again there, once only
        ("block", [False, False, True, False], [True, True, False, False]),
        ("block", [False, False, False, False], [True, True, False, False]),
        # a message to the user has no echo: asked once
        ("message", [False, False, False], [True, False, False]),
    ],
)
def test_a_handoff_block_is_asked_again_once_when_the_next_stop_shows_it_was_not_delivered(
    action: str, stops: list[bool], asked: list[bool]
) -> None:
    h = HandoffSettings(action=action)  # type: ignore[arg-type]
    usage = Usage(tokens=150_000, window=200_000, compaction_at=200_000)
    state = PolicyState()
    said = []
    for active in stops:
        state, text = on_stop(state, usage, h, "window", active)
        said.append(text is not None)
    assert said == asked
    assert state.handoff_asked
