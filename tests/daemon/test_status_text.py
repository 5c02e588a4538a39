"""What the `status_view` op answers (`ctxd.daemon.outputs.status_text.printed`): the table,
one session in full, or the JSON document, in the reader's clock and home."""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from ctxd.daemon.outputs.status_text import (
    offset_clock,
    printed,
    session_lines,
    status_lines,
)
from ctxd.errors import InvalidInput

NOW = 1_800_000_000.0
#: 23:30 UTC on the day of NOW.
IDLE_AT = NOW - NOW % 86_400 + 23.5 * 3600


def _row(session_id: str, **fields: Any) -> dict[str, Any]:
    return {
        "session_id": session_id,
        "agent": "claude",
        "model": "claude-opus-5-5",
        "tokens": 120_000,
        "window": 1_000_000,
        "window_source": "model-id",
        "used_pct": 12.0,
        "severity": "ok",
        "tokens_to_compaction": 800_000,
        "cwd": "/home/me/work/project",
        "transcript_path": "/home/me/.claude/x.jsonl",
        "updated_at": NOW - 30,
        "idle_compaction_at": IDLE_AT,
        **fields,
    }


def _doc() -> dict[str, Any]:
    return {
        "schema": "ctxd.status/v1",
        "sessions": [_row("aaaa1111-0000"), _row("bbbb2222-0000"), _row("bbbb3333-0000")],
        "config_error": "bad [windows]",
        "daemon": {"version": "0.1.0", "pid": 7, "requests": 3, "config_error": "bad [windows]"},
    }


def test_the_table_is_the_status_lines_in_the_readers_home_and_clock() -> None:
    clock = offset_clock(-3600)
    out = printed(_doc(), None, as_json=False, now=NOW, home="/home/me", clock=clock)

    doc = _doc()
    del doc["daemon"]["config_error"]
    assert out.decode().splitlines() == status_lines(doc, NOW, "/home/me", clock)
    assert "~/work/project" in out.decode() and "compacted if idle at 22:30" in out.decode()


def test_one_session_in_full_by_the_start_of_its_id() -> None:
    out = printed(_doc(), "aaaa", as_json=False, now=NOW, home="/elsewhere")

    assert out.decode().splitlines() == session_lines(_row("aaaa1111-0000"), NOW, "/elsewhere")
    assert "/home/me/work/project" in out.decode()


def test_the_json_document_leaves_the_daemons_copy_of_the_config_error_out() -> None:
    out = printed(_doc(), "aaaa", as_json=True, now=NOW)

    doc = _doc()
    del doc["daemon"]["config_error"]
    assert out == orjson.dumps({**doc, "sessions": doc["sessions"][:1]}) + b"\n"


@pytest.mark.parametrize(
    ("prefix", "said"),
    [
        ("cccc", "no tracked session id starts with 'cccc' (see `ctxd status`)"),
        ("bbbb", "'bbbb' is the start of 2 session ids: bbbb2222-0000, bbbb3333-0000"),
    ],
)
def test_a_prefix_naming_no_single_session_is_refused(prefix: str, said: str) -> None:
    with pytest.raises(InvalidInput) as refused:
        printed(_doc(), prefix, as_json=False, now=NOW)
    assert str(refused.value) == said


@pytest.mark.parametrize(
    ("offset", "expected"), [(0, "23:30"), (5 * 3600 + 45 * 60, "05:15"), (-10 * 3600, "13:30")]
)
def test_a_readers_clock_at_its_utc_offset(offset: int, expected: str) -> None:
    assert offset_clock(offset)(IDLE_AT) == expected
