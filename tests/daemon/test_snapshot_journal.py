"""The snapshot and the journal give back exactly what was saved."""

from __future__ import annotations

import os
import time
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio
import orjson
import pytest

from ctxd.core.measure import Severity
from ctxd.core.policy import PolicyState
from ctxd.core.session import SessionState, new_session
from ctxd.daemon import snapshot
from ctxd.daemon.centre import Centre
from ctxd.daemon.lifecycle import Daemon, _Ticks
from ctxd.fileio import write_atomic

if TYPE_CHECKING:
    from conftest import World


def _state_dir(tmp_path: Path) -> Path:
    path = tmp_path / "state"
    path.mkdir(mode=0o700)
    return path


def _session(n: int, **fields: Any) -> SessionState:
    state = new_session("claude", f"s{n}", None, 1000.0 + n, cwd="/w")
    return replace(
        state,
        tokens=100_000 * n,
        agent_config=(("CLAUDE_CONFIG_DIR", "/c"), ("X", "y")),
        agent_version="2.1.197",
        policy=PolicyState(warned=Severity.WARNING, recent=(1, 2, 3), warned_at=5.0),
        **fields,
    )


def test_a_saved_session_comes_back_equal_tuples_included(tmp_path: Path) -> None:
    """JSON turns tuples into lists; states with lists in them broke every hook after a
    restart (unhashable), which the soak found."""
    state_dir = _state_dir(tmp_path)
    centre = Centre.open({"HOME": str(tmp_path)}, {})
    saved = _session(1)
    centre.sessions.store(saved)
    snapshot.save(centre.sessions, centre.transcripts, state_dir / "state.json")

    restored = Centre.open({"HOME": str(tmp_path)}, {})
    count = snapshot.restore(restored.sessions, restored.transcripts, state_dir / "state.json")
    assert count == 1
    assert restored.sessions[saved.key] == saved
    hash(restored.sessions[saved.key].agent_config)


def test_journal_lines_after_the_snapshot_win_and_a_torn_line_is_skipped(tmp_path: Path) -> None:
    state_dir = _state_dir(tmp_path)
    centre = Centre.open({"HOME": str(tmp_path)}, {})
    first, second = _session(1), _session(2)
    for state in (first, second):
        centre.sessions.store(state)
    journal = snapshot.Journal(state_dir / "state.journal")
    journal.start()
    journal.append(first, None)  # line 1: older than the snapshot below
    snapshot.save(centre.sessions, centre.transcripts, state_dir / "state.json", journal.seq)
    asked = replace(second, policy=replace(second.policy, handoff_asked=True))
    journal.append(asked, None)  # line 2: after the snapshot
    journal.close()
    with open(state_dir / "state.journal", "ab") as f:
        f.write(b'{"seq":3,"session":{"key":"cla')  # a crash in the middle of a write

    restored = Centre.open({"HOME": str(tmp_path)}, {})
    reopened = snapshot.Journal(state_dir / "state.journal")
    rooms = (restored.sessions, restored.transcripts)
    assert snapshot.restore(*rooms, state_dir / "state.json", reopened) == 2
    assert restored.sessions[asked.key] == asked
    assert restored.sessions[first.key] == first
    assert reopened.seq == 2
    assert restored.sessions.dirty  # the next snapshot takes the journal's line in


def test_a_new_journal_replaces_the_old_one_without_writing_through_a_link(
    tmp_path: Path,
) -> None:
    state_dir = _state_dir(tmp_path)
    victim = tmp_path / "victim"
    victim.write_bytes(b"precious\n")
    (state_dir / "state.journal").symlink_to(victim)
    journal = snapshot.Journal(state_dir / "state.journal")
    journal.start()
    journal.append(_session(1), None)
    journal.close()
    assert victim.read_bytes() == b"precious\n"
    assert not (state_dir / "state.journal").is_symlink()
    assert oct(os.stat(state_dir / "state.journal").st_mode & 0o777) == "0o600"


def test_what_a_session_proved_of_its_models_window_survives_a_restart(tmp_path: Path) -> None:
    """A gpt-5.6-sol session held 371,606 of a 272,000 table row: after a restart another
    session of that model is still judged on the window that figure proved, and the session
    itself keeps it through its compaction."""
    state_dir = _state_dir(tmp_path)
    centre = Centre.open({"HOME": str(tmp_path)}, {})
    held = replace(_session(1), agent="pi", model="gpt-5.6-sol", proved_tokens=371_606)
    centre.sessions.store(held)
    centre.sessions.learn(held)
    centre.sessions.learn(replace(held, proved_tokens=50_000))  # a smaller figure proves less
    assert centre.sessions.proved == {"gpt-5.6-sol": 371_606}
    snapshot.save(centre.sessions, centre.transcripts, state_dir / "state.json")

    restored = Centre.open({"HOME": str(tmp_path)}, {})
    snapshot.restore(restored.sessions, restored.transcripts, state_dir / "state.json")
    assert restored.sessions.proved == {"gpt-5.6-sol": 371_606}
    assert restored.sessions[held.key].proved_tokens == 371_606
    other = replace(new_session("pi", "s9", None, 2000.0), model="gpt-5.6-sol", tokens=30_000)
    restored.sessions.store(other)
    row = restored.status.document()["sessions"]
    fresh = next(r for r in row if r["session_id"] == "s9")
    # the window OpenAI states for the model that holds it
    assert (fresh["window"], fresh["window_source"]) == (372_000, "usage")


SESSIONS = 10_000


def _counting_encodes(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Bytes orjson encodes from now on, in a one-item list."""
    encoded = [0]
    dumps = orjson.dumps

    def counted(*args: Any, **kwargs: Any) -> bytes:
        out = dumps(*args, **kwargs)
        encoded[0] += len(out)
        return out

    monkeypatch.setattr(orjson, "dumps", counted)
    return encoded


def test_a_snapshot_of_10000_sessions_encodes_only_those_that_changed(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every few seconds while anything changed, 10,000 sessions encoded whole held the event
    loop (and every hook behind it) for most of a second."""
    daemon = Daemon(world.env)
    sessions = daemon.centre.sessions
    for i in range(SESSIONS):
        state = sessions.open("claude", f"s{i}", None, cwd=f"/work/p{i}")
        sessions.store(replace(state, tokens=100_000 + i, model="claude-sonnet-4-5"))
    assert daemon._save()
    changed = sessions[sessions.key_for("claude", "s7") or ""]
    sessions.store(replace(changed, tokens=150_000))
    encoded = _counting_encodes(monkeypatch)
    assert daemon._save()
    size = daemon.paths.state.stat().st_size
    assert encoded[0] < size / 20, f"{encoded[0]:,} of {size:,} bytes encoded again"
    monkeypatch.undo()

    restored = Centre.open(world.env, {})
    assert snapshot.restore(restored.sessions, restored.transcripts, daemon.paths.state) == SESSIONS
    assert restored.sessions[changed.key].tokens == 150_000


def test_the_snapshot_is_written_off_the_event_loop_and_loses_no_answer_given_meanwhile(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Writing (and syncing) the snapshot happens in a worker thread; a handoff asked while it
    is written survives a crash right after, through the journal that comes next."""
    daemon = Daemon(world.env)
    sessions = daemon.centre.sessions
    first = sessions.open("claude", "s1", None, cwd="/work/p1")
    sessions.store(first)
    assert daemon._save()
    sessions.store(replace(first, tokens=123_000))

    def slow_disk(path: Path, data: bytes) -> None:
        time.sleep(0.5)
        write_atomic(path, data)

    monkeypatch.setattr(snapshot, "write_atomic", slow_disk)
    took = 0.0

    async def serve() -> None:
        nonlocal took
        async with anyio.create_task_group() as tg:
            daemon._tasks = tg
            begin = time.monotonic()
            daemon._housekeep(_Ticks(begin - 100.0))
            took = time.monotonic() - begin
            await anyio.sleep(0.1)  # the snapshot is being written
            state = sessions[first.key]
            asked = replace(state, policy=replace(state.policy, handoff_asked=True))
            sessions.store(asked)
            daemon._persist(asked.key)
            await anyio.sleep(1.5)
            tg.cancel_scope.cancel()

    anyio.run(serve)
    daemon.journal.close()  # a crash: no snapshot at shutdown
    assert took < 0.25, f"housekeeping held the event loop {took:.2f} s"

    restored = Centre.open(world.env, {})
    journal = snapshot.Journal(daemon.paths.journal)
    snapshot.restore(restored.sessions, restored.transcripts, daemon.paths.state, journal)
    back = restored.sessions[first.key]
    assert back.tokens == 123_000
    assert back.policy.handoff_asked, "the handoff asked while the snapshot was written is lost"
    assert orjson.loads(daemon.paths.state.read_bytes())["sessions"][0]["tokens"] == 123_000


def test_a_snapshot_from_kept_bytes_is_the_document_encoded_whole(world: World) -> None:
    """Sessions and read positions (their readers' states included) put together from the
    bytes kept for each are the same document as the snapshot encoded in one piece, also after
    a transcript moved; and a snapshot that may dump only one reader's state gives the others
    without theirs, to be taken in by the next."""
    transcripts = [world.claude(slug=f"-work-p{n}") for n in range(3)]
    for n, transcript in enumerate(transcripts):
        transcript.assistant(10_000 * (n + 1))
    centre = Centre.open(world.env, {"claude": world.claude_projects})
    assert centre.transcripts.discover([world.claude_projects]) == 3
    for transcript in transcripts:
        centre.transcripts.catch_up(str(transcript.path))

    def whole() -> bytes:
        states, learned, proved = centre.sessions.export()
        doc = {
            "format": snapshot.FORMAT,
            "journal": 7,
            "sessions": states,
            "files": centre.transcripts.positions(),
            "stores": centre.transcripts.store_positions(),
            "ended": centre.transcripts.ended.export(),
            "learned": learned,
            "proved": proved,
        }
        return orjson.dumps(doc)

    exporter = snapshot.Exporter()
    assert snapshot.snapshot(centre.sessions, centre.transcripts, 7, exporter) == whole()
    assert all("state" in p for p in orjson.loads(whole())["files"].values())
    transcripts[1].assistant(80_000)
    centre.transcripts.catch_up(str(transcripts[1].path))
    assert snapshot.snapshot(centre.sessions, centre.transcripts, 7, exporter) == whole()
    assert exporter.encoded == 3 + 1

    fresh = Centre.open(world.env, {"claude": world.claude_projects})
    fresh.transcripts.discover([world.claude_projects])
    for transcript in transcripts:
        fresh.transcripts.catch_up(str(transcript.path))
    files = orjson.loads(snapshot.snapshot(fresh.sessions, fresh.transcripts, dumps=1))["files"]
    assert sorted("state" in p for p in files.values()) == [False, False, True]
    assert fresh.transcripts.states_left_out == 2
    files = orjson.loads(snapshot.snapshot(fresh.sessions, fresh.transcripts, dumps=5))["files"]
    assert all("state" in p for p in files.values())
    assert fresh.transcripts.states_left_out == 0
