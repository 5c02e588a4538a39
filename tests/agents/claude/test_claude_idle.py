"""Claude Code's idle compaction (2.1.332's bundle): a truth table of the rule, and the
statusline's `prompt_cache` read into it."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from ctxd.agents.claude.idle import compacts_at_resume, idle_compaction_at, idle_floor
from ctxd.agents.claude.statusline import parse_statusline
from ctxd.core.events import PromptCache

EXPIRES = 1_800_000_000.0
HOUR = PromptCache(ttl=3600, expires_at=EXPIRES, warm=True)
#: 0.9 of the hour after the last request: 54 minutes after it, 6 before the cache expires.
AT = EXPIRES - 360


@pytest.mark.parametrize(
    ("tokens", "cache", "config", "expected"),
    [
        (250_000, HOUR, {}, AT),  # 1h cache, over the 200k default floor
        (200_000, HOUR, {}, AT),  # at the floor
        (199_999, HOUR, {}, None),  # below it
        (250_000, PromptCache(300, EXPIRES, True), {}, None),  # a 5-minute cache: never
        (250_000, PromptCache(3600, EXPIRES, False), {}, None),  # cold: lapsed
        (250_000, PromptCache(3600, None, True), {}, None),  # no expiry said
        # the variable moves the floor, never below 100k
        (150_000, HOUR, {"CLAUDE_CODE_IDLE_COMPACT_MIN_TOKENS": "150000"}, AT),
        (149_999, HOUR, {"CLAUDE_CODE_IDLE_COMPACT_MIN_TOKENS": "150000"}, None),
        (100_000, HOUR, {"CLAUDE_CODE_IDLE_COMPACT_MIN_TOKENS": "5000"}, AT),
        (99_999, HOUR, {"CLAUDE_CODE_IDLE_COMPACT_MIN_TOKENS": "5000"}, None),
        (250_000, HOUR, {"CLAUDE_CODE_IDLE_COMPACT_MIN_TOKENS": "300000"}, None),
        (250_000, HOUR, {"CLAUDE_CODE_IDLE_COMPACT_MIN_TOKENS": "junk"}, AT),  # ignored
        # the setting off, or compaction off altogether
        (250_000, HOUR, {"idleCompaction": "false"}, None),
        (250_000, HOUR, {"idleCompaction": "true"}, AT),
        (250_000, HOUR, {"autoCompactEnabled": "false"}, None),
        (250_000, HOUR, {"DISABLE_AUTO_COMPACT": "1"}, None),
        (250_000, HOUR, {"DISABLE_COMPACT": "1"}, None),
    ],
)
def test_idle_compaction_truth_table(
    tokens: int, cache: PromptCache, config: dict[str, str], expected: float | None
) -> None:
    assert idle_compaction_at(tokens, cache, config) == expected


def test_the_floor() -> None:
    assert idle_floor({}) == 200_000
    assert idle_floor({"CLAUDE_CODE_IDLE_COMPACT_MIN_TOKENS": "120000"}) == 120_000
    assert idle_floor({"CLAUDE_CODE_IDLE_COMPACT_MIN_TOKENS": "1"}) == 100_000


SAMPLE = Path(__file__).parents[2] / "data/payloads/statusline/claude-2.1.332.jsonl"


def test_the_statusline_prompt_cache_is_read() -> None:
    first, second = SAMPLE.read_text().splitlines()[:2]
    assert parse_statusline(first.encode()).prompt_cache is None  # before the first request
    report = parse_statusline(second.encode())
    assert report.prompt_cache == PromptCache(ttl=300, expires_at=1795984940.0, warm=True)
    doc = json.loads(second)
    doc["prompt_cache"].update(ttl="1h", warm=False, expires_at=True)
    assert parse_statusline(json.dumps(doc).encode()).prompt_cache == PromptCache(3600, None, False)
    doc["prompt_cache"]["ttl"] = "2h"
    assert parse_statusline(json.dumps(doc).encode()).prompt_cache is None


def test_the_statusline_segment_shows_the_idle_compaction_time() -> None:
    import time

    from ctxd.agents.statusline import StatusView, render_statusline

    view = StatusView("Opus", 300_000, 1_000_000, "statusline", 30.0, 667_000, "ok")
    assert b"idle" not in render_statusline(view)
    at = time.strftime("%H:%M", time.localtime(AT))
    line = render_statusline(dataclasses.replace(view, idle_compaction_at=AT))
    assert line.decode().endswith(f" · idle compact {at}\n")


# --- 2.1.335+: a session resumed after its cache expired is compacted before its first message

AFTER = EXPIRES + 1  # resumed a second after the cache expired


@pytest.mark.parametrize(
    ("tokens", "cache", "config", "now", "expected"),
    [
        (250_000, HOUR, {"version": "2.1.337"}, AFTER, True),
        (250_000, HOUR, {"version": "2.1.335"}, AFTER, True),
        (250_000, HOUR, {}, AFTER, True),  # an unknown version: the newest
        (250_000, HOUR, {"version": "2.1.332"}, AFTER, False),  # not before 2.1.335
        (250_000, HOUR, {"version": "2.1.337"}, EXPIRES - 60, False),  # still warm
        (199_999, HOUR, {"version": "2.1.337"}, AFTER, False),  # below the idle floor
        (
            150_000,
            HOUR,
            {"version": "2.1.337", "CLAUDE_CODE_IDLE_COMPACT_MIN_TOKENS": "100000"},
            AFTER,
            True,
        ),
        (250_000, PromptCache(300, EXPIRES, True), {"version": "2.1.337"}, AFTER, False),
        (250_000, PromptCache(3600, None, True), {"version": "2.1.337"}, AFTER, False),
        (250_000, HOUR, {"version": "2.1.337", "idleCompaction": "false"}, AFTER, False),
        (250_000, HOUR, {"version": "2.1.337", "DISABLE_AUTO_COMPACT": "1"}, AFTER, False),
    ],
)
def test_compaction_at_resume(
    tokens: int, cache: PromptCache, config: dict[str, str], now: float, expected: bool
) -> None:
    assert compacts_at_resume(tokens, cache, config, now) is expected
