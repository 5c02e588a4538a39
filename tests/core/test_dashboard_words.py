"""What the dashboard draws from the core: where the levels start in tokens (the lines on each
chart) and why a session ended, in words; truth tables."""

from __future__ import annotations

import pytest

from ctxd.core.endings import ended_words
from ctxd.core.measure import Severity, Usage, remaining_pct
from ctxd.core.policy import level_lines, severity_for
from ctxd.core.settings import Thresholds


@pytest.mark.parametrize(
    ("thresholds", "window", "point", "expected"),
    [
        # The default: on the room before compaction.
        (
            Thresholds(),
            1_000_000,
            967_000,
            (
                628_550,
                "35 % left of the room before compaction",
                725_250,
                "25 % left of the room before compaction",
            ),
        ),
        (
            Thresholds(basis="window", warning=20, critical=10),
            200_000,
            167_000,
            (160_000, "20 % left of the window", 180_000, "10 % left of the window"),
        ),
        # A token limit that comes before the percentage sets the line, and says so.
        (
            Thresholds(warning_tokens=150_000),
            1_000_000,
            967_000,
            (
                150_000,
                "warning_tokens = 150,000",
                725_250,
                "25 % left of the room before compaction",
            ),
        ),
        # One that comes after it does not.
        (
            Thresholds(critical_tokens=900_000),
            1_000_000,
            967_000,
            (
                628_550,
                "35 % left of the room before compaction",
                725_250,
                "25 % left of the room before compaction",
            ),
        ),
    ],
)
def test_the_level_lines_start_where_the_levels_do(
    thresholds: Thresholds, window: int, point: int, expected: tuple[int, str, int, str]
) -> None:
    lines = level_lines(thresholds, window, point)
    got = (
        lines["warning_at"],
        lines["warning_label"],
        lines["critical_at"],
        lines["critical_label"],
    )
    assert got == expected
    # At each line the level is the one it names; a token below it, not yet.
    for name, level in (("warning", Severity.WARNING), ("critical", Severity.CRITICAL)):
        at = lines[f"{name}_at"]
        assert isinstance(at, int)
        for tokens, reached in ((at, True), (at - 1, False)):
            usage = Usage(tokens=tokens, window=window, compaction_at=point)
            severity = severity_for(remaining_pct(usage, thresholds.basis), thresholds, tokens)
            assert (severity >= level) == reached, (name, tokens, severity)


@pytest.mark.parametrize(
    ("reason", "words"),
    [
        ("prompt_input_exit", "the user quit"),
        ("exit", "the user quit"),
        ("clear", "cleared with /clear"),
        ("logout", "the user logged out"),
        ("other", "reason not given"),
        ("idle", "no activity for [sessions] idle_minutes"),
        ("transcript replaced", "its transcript was replaced"),
        ("some_new_code", "some_new_code"),
        (None, "reason not given"),
        ("", "reason not given"),
    ],
)
def test_an_ending_is_said_in_words(reason: str | None, words: str) -> None:
    assert ended_words(reason) == words
