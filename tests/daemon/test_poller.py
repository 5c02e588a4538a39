"""The folders the watcher could not watch are polled: in process, over real files, one poll at a
time (the daemon polls every POLL_INTERVAL; `test_watch_limit.py` runs it for real)."""

from __future__ import annotations

import json
import os
import time
import uuid
from pathlib import Path
from typing import Any

from usage_lines import claude_assistant

from ctxd.daemon import poller, watches
from ctxd.daemon.centre import Centre
from ctxd.daemon.config import parse_settings
from ctxd.daemon.poller import FULL_POLL_EVERY, Poller

DATA = Path(__file__).resolve().parents[1] / "data"
LINES: dict[str, Any] = json.loads((DATA / "daemon" / "lines.json").read_text())
DAY = 86_400.0


def _assistant(path: Path, tokens: int) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("ab") as f:
        f.write(claude_assistant(path.stem, tokens))


def _unwatched(root: Path, centre: Centre) -> Poller:
    """A poller told that nothing under `root` could be watched."""
    folders = watches.find_folders([root])
    polls = Poller(centre.transcripts, centre.sessions, lambda: 6 * 3600.0)
    by_age = tuple(sorted(folders, key=lambda path: -folders[path].mtime_ns))
    polls.cover(watches.WatchCoverage(len(folders), 0, by_age, None, True, frozenset(folders)))
    return polls


def _tokens(centre: Centre, path: Path) -> int | None:
    state = centre.sessions.get(str(path))
    return None if state is None else state.tokens


def test_unwatched_folders_are_polled_for_appends_and_new_sessions(tmp_path: Path) -> None:
    root = tmp_path / "projects"
    env = {"HOME": str(tmp_path), "XDG_STATE_HOME": str(tmp_path / "state")}
    centre = Centre.open(env, {"claude": root}, time.time, settings=parse_settings(""))
    live = root / "-work-live" / f"{uuid.uuid4()}.jsonl"
    _assistant(live, 10_000)
    old_project = root / "-work-old"
    old_project.mkdir(parents=True)
    long_ago = time.time() - 30 * DAY
    os.utime(old_project, (long_ago, long_ago))
    centre.transcripts.discover([root])
    assert _tokens(centre, live) == 10_000
    polls = _unwatched(root, centre)
    assert polls.active
    assert polls.statistics()["unwatched"] == 3  # the root and both projects

    # A followed transcript's append, a new session beside it, a subagent in a new folder.
    _assistant(live, 200_000)
    beside = live.with_name(f"{uuid.uuid4()}.jsonl")
    _assistant(beside, 30_000)
    subagent = live.with_suffix("") / "subagents" / "agent-a1b2c3.jsonl"
    _assistant(subagent, 40_000)
    polls.poll()
    assert _tokens(centre, live) == 200_000
    assert _tokens(centre, beside) == 30_000
    assert _tokens(centre, subagent) == 40_000
    assert polls.statistics()["unwatched"] == 5, "the new folders are polled too"

    # A folder untouched for a month is looked at every FULL_POLL_EVERY polls only.
    in_old = old_project / f"{uuid.uuid4()}.jsonl"
    _assistant(in_old, 50_000)
    polled = 0
    while _tokens(centre, in_old) is None and polled < FULL_POLL_EVERY:
        polls.poll()
        polled += 1
    assert _tokens(centre, in_old) == 50_000
    assert polled > 1, "an old folder is not looked at on every poll"


def test_live_folders_are_the_followed_transcripts_newest_first(tmp_path: Path) -> None:
    root = tmp_path / "projects"
    env = {"HOME": str(tmp_path), "XDG_STATE_HOME": str(tmp_path / "state")}
    clock = [1_800_000_000.0]
    centre = Centre.open(env, {"claude": root}, lambda: clock[0], settings=parse_settings(""))
    paths = [root / f"-work-p{i}" / f"{uuid.uuid4()}.jsonl" for i in range(3)]
    for path in paths:
        _assistant(path, 10_000)
        centre.transcripts.track(str(path), "claude")
        clock[0] += 1.0
    centre.sessions.end(str(paths[0]), "test")
    assert poller.live_folders(centre.sessions) == [str(paths[2].parent), str(paths[1].parent)]


def test_the_watcher_asks_for_live_folders_first_then_recent_ones_then_the_roots() -> None:
    # When the cap bites, it bites on what was asked for last: history.
    now = 1_800_000_000.0

    def folder(age_s: float) -> watches.Folder:
        return watches.Folder(0, 0, int((now - age_s) * 1e9))

    folders = {
        "/r": folder(10),
        "/r/old": folder(30 * DAY),
        "/r/live-but-old": folder(20 * DAY),
        "/r/recent": folder(60),
        "/r/newest": folder(5),
        "/s": folder(40 * DAY),
    }
    order = watches.watch_order(
        [Path("/r"), Path("/s")], folders, ["/r/live-but-old", "/gone"], now
    )
    assert order == ["/r/live-but-old", "/r/newest", "/r/recent", "/r", "/s"]
