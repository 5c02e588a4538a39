"""A session the daemon finds at start-up, on disk or in an agent's session store, is as old as
its own last activity: `ctxd status` shows its real age, not "updated 0s ago", and it leaves the
live list when its own live window is up, not that long after the daemon started.

A Claude Code transcript last written 3 hours ago and an OpenCode database session last active
3 hours ago (a real SQLite database shaped as OpenCode 1.18.33 writes it): a real daemon and
`ctxd status --json` as a user runs them, then the daemon's centre in process under a clock of
the test's."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from opencode_db import Writer, copy_capture

from ctxd.agents.opencode import database_path
from ctxd.daemon.centre import Centre
from ctxd.daemon.config import parse_settings

if TYPE_CHECKING:
    from conftest import ClaudeTranscript, World

HOURS_AGO = 3 * 3600.0
SESSION = "ses_three_hours_idle"


def _history(world: World, now: float) -> tuple[ClaudeTranscript, Path]:
    """A transcript and an OpenCode session, each last active `HOURS_AGO` before `now`."""
    transcript = world.claude()
    transcript.assistant(100_000)
    os.utime(transcript.path, (now - HOURS_AGO, now - HOURS_AGO))

    db = database_path(world.env)
    db.parent.mkdir(parents=True)
    copy_capture(db.parent, live=False)  # the capture's own session: days old, not listed
    w = Writer(db)
    w.clock = int((now - HOURS_AGO - 60) * 1000)
    w.session(SESSION, cwd="/w/project")
    ask = w.message(SESSION, "user")
    w.part(SESSION, ask, type="text", text="a request")
    w.step(SESSION, 30_000)
    w.db.execute("update session set time_updated = ? where id = ?", (w.clock, SESSION))
    w.db.commit()
    w.close()
    return transcript, db


def _rows(doc: dict[str, Any], transcript: ClaudeTranscript) -> tuple[dict[str, Any], ...]:
    by_transcript = next(r for r in doc["sessions"] if r["transcript_path"] == str(transcript.path))
    by_store = next(r for r in doc["sessions"] if r["session_id"] == SESSION)
    return by_transcript, by_store


def test_ctxd_status_shows_the_age_of_sessions_found_at_start(world: World) -> None:
    transcript, _ = _history(world, time.time())

    world.start()
    result = world.cli("status", "--json")

    assert result.returncode == 0, result.stderr
    on_disk, in_store = _rows(json.loads(result.stdout), transcript)
    assert on_disk["tokens"] == 100_000 and in_store["tokens"] == 30_000
    for row in (on_disk, in_store):
        assert row["age_s"] == pytest.approx(HOURS_AGO, abs=120), f"{row['agent']}: heard now"
        assert row["ended_at"] is None
    assert world.cli("status").stdout.count("updated 3.0h ago") == 2


def test_sessions_found_at_start_leave_when_their_own_window_is_up(world: World) -> None:
    now = [time.time()]
    transcript, db = _history(world, now[0])
    roots = {"claude": world.claude_projects}
    centre = Centre.open(world.env, roots, lambda: now[0], lambda: 0.0, parse_settings(""))
    centre.transcripts.discover([world.claude_projects])
    centre.transcripts.catch_up(str(db))
    for row in _rows(centre.status.document(), transcript):
        assert row["age_s"] == pytest.approx(HOURS_AGO, abs=120)

    # Six hours of their own idleness less a minute: still live.
    now[0] += 6 * 3600 - HOURS_AGO - 120
    centre.transcripts.sweep()
    assert all(r["ended_at"] is None for r in _rows(centre.status.document(), transcript))

    # Their six hours are up, three after the daemon found them (not six): idle, ended.
    now[0] += 240
    centre.transcripts.sweep()
    for row in _rows(centre.status.document(), transcript):
        assert row["ended_reason"] == "idle", row["agent"]
