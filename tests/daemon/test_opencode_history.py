"""A month of OpenCode history at start-up: only the sessions that can be live are read and
listed, by their own last activity and the same live window as the transcripts' (the settings'
`idle_seconds`, six hours by default); an older one is read from its new rows once it moves.

A real SQLite database of 200 sessions spread over 30 days, shaped as OpenCode 1.18.33 writes it
(`opencode_db.Writer`): the daemon's centre in process under a clock of the test's, then a real
daemon and `ctxd status` as a user runs them."""

from __future__ import annotations

import json
import sqlite3
import time
from pathlib import Path
from typing import TYPE_CHECKING

from opencode_db import Writer, copy_capture

from ctxd.agents.opencode import database_path
from ctxd.agents.opencode_family.store import OpenCodeStore
from ctxd.core.settings import SessionSettings
from ctxd.daemon.centre import Centre
from ctxd.daemon.config import parse_settings

if TYPE_CHECKING:
    from conftest import World

SESSIONS = 200
MONTH = 30 * 86400.0
STEPS = 4  # model calls per session: a user message and an assistant step each
#: The transcripts' live window, which the database's sessions share.
LIVE = SessionSettings().idle_seconds


def _age(n: int) -> float:
    """Seconds since session `n` was last active: spread evenly over the month."""
    return 600 + n * MONTH / SESSIONS


def month_of_history(path: Path, now: float) -> dict[str, float]:
    """`SESSIONS` sessions, each last active `_age(n)` before `now` (its messages and parts
    written at that time, its `time_updated` too, as OpenCode touches it); id -> age."""
    w = Writer(path)
    w.db.execute("pragma synchronous=off")  # thousands of commits, nothing to make durable
    ages = {}
    for n in range(SESSIONS):
        session_id = f"ses_hist_{n:03d}"
        w.clock = int((now - _age(n) - 60) * 1000)
        w.session(session_id, cwd=f"/w/project-{n}")
        for step in range(STEPS):
            ask = w.message(session_id, "user")
            w.part(session_id, ask, type="text", text=f"request {step} " + "x" * 2000)
            w.step(session_id, 20_000 + 1000 * step + n)
        w.db.execute("update session set time_updated = ? where id = ?", (w.clock, session_id))
        w.db.commit()
        ages[session_id] = _age(n)
    w.close()
    return ages


def _parts_of(path: Path, sessions: list[str]) -> int:
    with sqlite3.connect(path) as db:
        marks = ",".join("?" * len(sessions))
        (count,) = db.execute(
            f"select count(*) from part where session_id in ({marks})", sessions
        ).fetchone()
    return int(count)


def _best_first_read(path: Path, since: float | None) -> float:
    """Seconds a fresh reader's first read takes, the best of three."""
    times = []
    for _ in range(3):
        reader = OpenCodeStore(str(path))
        begin = time.perf_counter()
        reader.read(since=since)
        times.append(time.perf_counter() - begin)
        reader.close()
    return min(times)


def test_a_first_start_reads_only_the_sessions_active_in_the_live_window(
    world: World,
) -> None:
    now = 1_796_500_000.0
    path = database_path(world.env)
    path.parent.mkdir(parents=True)
    copy_capture(path.parent, live=False)  # the real capture: its session days old at `now`
    ages = month_of_history(path, now)
    live = sorted(sid for sid, age in ages.items() if age < LIVE)
    assert len(live) == 2  # of 200: what a month of history leaves live

    centre = Centre.open(world.env, {}, lambda: now, lambda: 0.0, parse_settings(""))
    centre.transcripts.catch_up(str(path))

    listed = sorted(row["session_id"] for row in centre.status.document()["sessions"])
    assert listed == live
    # What was read: the live sessions' parts, not the history's.
    reader = centre.transcripts._stores[str(path)][1]
    assert isinstance(reader, OpenCodeStore)
    assert reader.rows_read == _parts_of(path, live)
    assert not reader.behind
    # Against the same database read whole (what every first start did): rows and time, the
    # best of three fresh readers each (a loaded machine's pauses are not the reader's).
    whole = OpenCodeStore(str(path))
    assert len({u.session_id for u in whole.read()}) == SESSIONS + 1
    assert whole.rows_read > 90 * reader.rows_read
    whole.close()
    took_live = _best_first_read(path, now - LIVE)
    took_whole = _best_first_read(path, None)
    assert took_live < took_whole / 4, (took_live, took_whole)

    # An old session moves (a new message, a new step): it is read from its new rows, listed.
    old = "ses_hist_150"  # 22 days idle
    w = Writer(path)
    w.clock = int(now * 1000)
    w.step(old, 77_000)
    w.close()
    centre.transcripts.catch_up(str(path))
    rows = {row["session_id"]: row for row in centre.status.document()["sessions"]}
    assert sorted(rows) == sorted([*live, old])
    assert rows[old]["tokens"] == 77_000


def test_ctxd_status_lists_only_the_sessions_active_in_the_window(world: World) -> None:
    path = database_path(world.env)
    path.parent.mkdir(parents=True)
    copy_capture(path.parent, live=False)
    ages = month_of_history(path, time.time())
    live = sorted(sid for sid, age in ages.items() if age < LIVE)

    world.start()
    result = world.cli("status", "--json")

    assert result.returncode == 0, result.stderr
    doc = json.loads(result.stdout)
    assert sorted(row["session_id"] for row in doc["sessions"]) == live
    text = world.cli("status").stdout
    assert "2 sessions" in text.splitlines()[0]
    assert "ses_hist_000" in text and "ses_hist_001" in text and "ses_hist_002" not in text

    # A month-old session gets a new message: the daemon hears of it and lists it.
    w = Writer(path)
    w.clock = int(time.time() * 1000)
    w.step("ses_hist_199", 66_000)
    w.close()
    row = world.wait_for(
        lambda: next(
            (r for r in world.status()["sessions"] if r["session_id"] == "ses_hist_199"), None
        ),
        10,
        "the old session's new step",
    )
    assert row["tokens"] == 66_000
    assert len(world.status()["sessions"]) == 3
