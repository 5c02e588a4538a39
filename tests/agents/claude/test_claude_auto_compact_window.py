"""Claude Code's auto-compact window by version (2.1.332 against the 2.1.337 binary, read and
measured): the window in force, the source that decided it, and what a 2.1.336+ statusline's
percentage reveals of it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ctxd.agents.claude import SPEC, install
from ctxd.agents.claude.compaction import compact_window, compaction_point
from ctxd.agents.claude.statusline import compact_window_from, parse_statusline
from ctxd.cli.replay import Row, replay
from ctxd.core import session as core
from ctxd.core.compaction import CompactWindow
from ctxd.core.settings import Settings

M = 1_000_000
OPUS = "claude-opus-5-5"
DATA = Path(__file__).parents[2] / "data"


@pytest.mark.parametrize(
    ("config", "window", "model", "expected", "point"),
    [
        # From 2.1.334 a native 1M model compacts against 400,000 when nothing decides.
        ({"version": "2.1.337"}, M, OPUS, CompactWindow(400_000, "default"), 367_000),
        ({"version": "2.1.334"}, M, OPUS, CompactWindow(400_000, "default"), 367_000),
        ({"version": "2.1.332"}, M, OPUS, CompactWindow(M, "window"), 967_000),
        ({}, M, OPUS, CompactWindow(400_000, "default"), 367_000),  # unknown: the newest
        # A model that opts in to 1M ("[1m]" on a 200k id) keeps its whole window.
        ({"version": "2.1.337"}, M, "claude-sonnet-4-6[1m]", CompactWindow(M, "window"), 967_000),
        (
            {"version": "2.1.337"},
            200_000,
            "claude-sonnet-4-6",
            CompactWindow(200_000, "window"),
            167_000,
        ),
        # The variable; from 2.1.334 "1m" and "600k" read as such.
        (
            {"version": "2.1.337", "CLAUDE_CODE_AUTO_COMPACT_WINDOW": "1000000"},
            M,
            OPUS,
            CompactWindow(M, "env"),
            967_000,
        ),
        (
            {"version": "2.1.337", "CLAUDE_CODE_AUTO_COMPACT_WINDOW": "1m"},
            M,
            OPUS,
            CompactWindow(M, "env"),
            967_000,
        ),
        (
            {"version": "2.1.337", "CLAUDE_CODE_AUTO_COMPACT_WINDOW": "600k"},
            M,
            OPUS,
            CompactWindow(600_000, "env"),
            567_000,
        ),
        # Where `/autocompact 1m` writes: the user's modelSettings for the model.
        (
            {"version": "2.1.337", f"modelSettings.{OPUS}.autoCompactWindow": "1000000"},
            M,
            OPUS,
            CompactWindow(M, "model-settings"),
            967_000,
        ),
        (
            {"version": "2.1.337", "autoCompactWindow": "500000"},
            M,
            OPUS,
            CompactWindow(500_000, "settings"),
            467_000,
        ),
        (
            {"version": "2.1.337", "autoCompactWindow": '"auto"'},
            M,
            OPUS,
            CompactWindow(400_000, "default"),
            367_000,
        ),
        # What the statusline revealed outranks everything.
        (
            {
                "version": "2.1.337",
                "reported_compact_window": "1000000",
                "autoCompactWindow": "500000",
            },
            M,
            OPUS,
            CompactWindow(M, "statusline"),
            967_000,
        ),
        # A compaction before the point predicted shows a smaller window; one at it or past it
        # (a large tool result overshoots), or pointing to no round window, changes nothing.
        (
            {"version": "2.1.337", "compacted_from": "267010"},
            M,
            OPUS,
            CompactWindow(300_000, "compaction"),
            267_000,
        ),
        (
            {"version": "2.1.337", "compacted_from": "367108"},
            M,
            OPUS,
            CompactWindow(400_000, "default"),
            367_000,
        ),
        (
            {"version": "2.1.337", "compacted_from": "520000"},
            M,
            OPUS,
            CompactWindow(400_000, "default"),
            367_000,
        ),
        (
            {"version": "2.1.332", "compacted_from": "875100"},
            M,
            OPUS,
            CompactWindow(M, "window"),
            967_000,
        ),
    ],
)
def test_the_window_in_force_and_its_source(
    config: dict[str, str], window: int, model: str, expected: CompactWindow, point: int
) -> None:
    assert compact_window(window, model, config) == expected
    assert compaction_point(window, model, {}, config) == point


@pytest.mark.parametrize(
    ("tokens", "pct", "window", "expected"),
    [
        (300_000, 75, M, 400_000),
        (301_000, 75, M, 400_000),
        (367_000, 92, M, 400_000),
        (300_000, 30, M, M),
        (20_000, 5, M, 400_000),  # only the 400,000 default fits 4.4 % to 5.5 %
        (20_000, 2, M, M),
        (300_000, 60, M, 500_000),  # a server's 500k: fine enough to tell
        (5_000, 1, M, None),  # both known windows fit: too coarse
        (None, 30, M, None),
        (300_000, None, M, None),
        (300_000, 0, M, None),
    ],
)
def test_what_a_2_1_336_percentage_reveals(
    tokens: int | None, pct: float | None, window: int, expected: int | None
) -> None:
    assert compact_window_from(tokens, pct, window) == expected


def _payload(version: str, tokens: int, pct: float) -> bytes:
    return json.dumps(
        {
            "session_id": "s1",
            "transcript_path": "/nonexistent/s1.jsonl",
            "version": version,
            "model": {"id": OPUS, "display_name": "Opus 5.5"},
            "context_window": {
                "context_window_size": M,
                "used_percentage": pct,
                "remaining_percentage": 100 - pct,
                "current_usage": {
                    "input_tokens": 1_000,
                    "cache_creation_input_tokens": 4_000,
                    "cache_read_input_tokens": tokens - 5_000,
                    "output_tokens": 50,
                },
            },
        }
    ).encode()


@pytest.mark.parametrize(
    ("version", "pct", "compact", "to_compaction"),
    [
        # 2.1.336+: 75 % of the auto-compact window, so 400,000; the window stays 1M.
        ("2.1.337", 75, CompactWindow(400_000, "statusline"), 67_000),
        ("2.1.337", 30, CompactWindow(M, "statusline"), 667_000),
        # 2.1.332: 30 % of the window, and nothing said of a cap.
        ("2.1.332", 30, CompactWindow(M, "window"), 667_000),
    ],
)
def test_a_statusline_payload_by_version(
    version: str, pct: float, compact: CompactWindow, to_compaction: int
) -> None:
    report = parse_statusline(_payload(version, 300_000, pct))
    state = core.apply_statusline(core.new_session("claude", "s1", None, 0.0), report, 1.0)
    grounds = core.Grounds(Settings(), SPEC.compaction, compact_window=SPEC.compact_window)
    fig = core.figures(state, grounds)
    assert (fig.window.size, fig.window.source) == (M, "statusline")
    assert fig.compact_window == compact
    assert fig.tokens_to_compaction == to_compaction
    assert fig.used_pct == pytest.approx(30.0)  # of the window, whatever the payload's basis
    row = core.figures_row(fig)
    assert (row["compact_window"], row["compact_window_source"]) == (compact.size, compact.source)


def test_a_2_1_337_transcript_compacts_at_367000() -> None:
    # Captured from the real 2.1.337 (tests/e2e, claude-opus-5-5, telemetry off): its boundary
    # says preTokens 367,108; ctxd's point is 367,000 throughout.
    path = DATA / "transcripts" / "claude-code-2.1.337" / "transcript.autocompact.jsonl"
    rows = [r for r in replay(str(path)) if isinstance(r, Row)]
    assert any(r.compaction for r in rows)
    assert {r.figures.compaction_at for r in rows} == {367_000}
    assert {r.figures.compact_window for r in rows} == {CompactWindow(400_000, "default")}
    before = [r for r in rows if not r.compaction and r.figures.tokens == 350_000 - 50]
    assert before and before[0].figures.tokens_to_compaction == 17_000


def test_interrupt_is_registered_everywhere() -> None:
    assert ("Interrupt", None) in install.EVENTS
    assert SPEC.dialect.kinds["Interrupt"] == "other"
    plugin = Path(__file__).parents[3] / "clients" / "claude-plugin" / "hooks" / "hooks.json"
    hooks = json.loads(plugin.read_text())["hooks"]
    assert set(hooks) == {name for name, _ in install.EVENTS}
