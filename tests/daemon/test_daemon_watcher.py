"""The watcher slows down after a quiet spell and wakes up at the next change, losing nothing.

In process (a real Daemon, a real watcher on real files), so that the quiet spell can be
shortened: the daemon's own 30 s would make this test slow.
"""

from __future__ import annotations

import json
import os
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import anyio
import orjson
import pytest

from ctxd import protocol
from ctxd.daemon import watcher
from ctxd.daemon.lifecycle import Daemon

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def _assistant(tokens: int, n: int) -> bytes:
    record: dict[str, Any] = {
        "type": "assistant",
        "sessionId": "s-watch",
        "uuid": f"u{n}",
        "timestamp": datetime.now(UTC).isoformat().replace("+00:00", "Z"),  # a live session
        "isSidechain": False,
        "message": {
            "id": f"msg_{n}",
            "model": "claude-opus-5-5",
            "role": "assistant",
            "stop_reason": "tool_use",
            "content": [],
            "usage": {
                "input_tokens": tokens,
                "cache_creation_input_tokens": 0,
                "cache_read_input_tokens": 0,
                "output_tokens": 1,
            },
        },
    }
    return json.dumps(record).encode() + b"\n"


def _daemon_with_a_transcript(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> tuple[Daemon, Path]:
    """An in-process daemon (not started) for a HOME with one Claude transcript at 10,000."""
    monkeypatch.setattr(os, "chdir", lambda path: None)  # the daemon would leave the test's cwd
    project = tmp_path / "home" / ".claude" / "projects" / "-work"
    project.mkdir(parents=True)
    (tmp_path / "run").mkdir(mode=0o700)
    transcript = project / "s-watch.jsonl"
    transcript.write_bytes(_assistant(10_000, 1))
    env = {
        "HOME": str(tmp_path / "home"),
        "XDG_RUNTIME_DIR": str(tmp_path / "run"),
        "XDG_STATE_HOME": str(tmp_path / "state"),
        "XDG_CONFIG_HOME": str(tmp_path / "config"),
    }
    return Daemon(env), transcript


@pytest.mark.slow
async def test_a_quiet_watcher_slows_down_and_status_still_sees_an_append_at_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(watcher, "QUIET_AFTER_MS", 1000)
    daemon, transcript = _daemon_with_a_transcript(tmp_path, monkeypatch)

    def tokens() -> int | None:
        state = daemon.centre.sessions.get(str(transcript))
        return None if state is None else state.tokens

    woke_after: float  # set inside the task group, which mypy cannot see through
    async with anyio.create_task_group() as tg:
        tg.start_soon(daemon.run)
        with anyio.fail_after(10):
            while tokens() != 10_000:
                await anyio.sleep(0.05)
            while not daemon._watcher.quiet:  # slowed down: a 1 s step
                await anyio.sleep(0.05)
            with transcript.open("ab") as f:
                f.write(_assistant(20_000, 2))
            # Status reads what the slow watcher has not reported yet.
            answer = await _request(daemon.paths.socket, "status", b"")
            started = time.monotonic()
            while daemon._watcher.quiet:
                await anyio.sleep(0.01)
            woke_after = time.monotonic() - started
        daemon._stopping.set()
    rows = orjson.loads(protocol.decode_response(answer))["sessions"]
    assert [row["tokens"] for row in rows] == [20_000]
    assert woke_after < 2 * watcher.IDLE_STEP_MS / 1000 + 0.5  # then the fast step again


@pytest.mark.slow
async def test_the_watcher_loses_nothing_across_its_pace_and_stops_when_cancelled(
    tmp_path: Path,
) -> None:
    root = tmp_path / "projects"
    (root / "p").mkdir(parents=True)
    seen: list[str] = []

    async def record(batch: list[tuple[str, bool]]) -> None:
        seen.extend(path for path, deleted in batch if not deleted)

    roots_watcher = watcher.RootsWatcher([root], record, quiet_after_ms=300)
    written: list[str] = []
    started: float  # set inside the task group, which mypy cannot see through
    with anyio.fail_after(10):
        async with anyio.create_task_group() as tg:
            await tg.start(roots_watcher.run)
            for n in range(40):  # a burst while fast, files in a brand-new directory too
                path = root / ("p" if n % 2 else f"new-{n // 10}") / f"{n}.jsonl"
                path.parent.mkdir(exist_ok=True)
                path.write_bytes(b"{}\n")
                written.append(str(path))
            while not roots_watcher.quiet:
                await anyio.sleep(0.05)
            late = root / "p" / "after-the-lull.jsonl"
            late.write_bytes(b"{}\n")
            written.append(str(late))
            while str(late) not in seen:
                await anyio.sleep(0.05)
            assert not roots_watcher.quiet
            started = time.monotonic()
            tg.cancel_scope.cancel()  # as at shutdown: must not wait for the watcher's thread
        cancelled_after = time.monotonic() - started
    # A file made in a new directory before inotify watches it has no event of its own: the
    # directory is reported instead, for the transcripts room to scan.
    unreported = [p for p in written if p not in seen and os.path.dirname(p) not in seen]
    assert unreported == []
    assert cancelled_after < 0.5


@pytest.mark.slow
async def test_without_inotify_the_daemon_still_serves_reads_on_hooks_and_rescans(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    # The inotify watch limit cannot be reached safely on a shared machine; its error can.
    attempts: list[object] = []

    def no_more_watches(*args: Any) -> None:
        attempts.append(args)
        raise OSError(28, "inotify watch limit reached")

    monkeypatch.setattr(watcher, "RustNotify", no_more_watches)
    monkeypatch.setattr(watcher, "RETRY_UNWATCHED", 0.3)
    daemon, transcript = _daemon_with_a_transcript(tmp_path, monkeypatch)
    payload = {
        "session_id": "s-watch",
        "transcript_path": str(transcript),
        "cwd": "/work",
        "hook_event_name": "PostToolUse",
    }
    async with anyio.create_task_group() as tg:
        tg.start_soon(daemon.run)
        with anyio.fail_after(10):
            while not daemon._watcher.quiet:  # started, without a watcher
                await anyio.sleep(0.05)
            with transcript.open("ab") as f:
                f.write(_assistant(20_000, 2))
            answer = await _request(daemon.paths.socket, "hook", json.dumps(payload).encode())
            state = daemon.centre.sessions[str(transcript)]
            later = transcript.with_name("s-later.jsonl")  # no hook names it
            later.write_bytes(_assistant(30_000, 3))
            while str(later) not in daemon.centre.sessions:  # the rescan at the next attempt
                await anyio.sleep(0.05)
        daemon._stopping.set()
    assert len(attempts) >= 2
    assert answer.startswith(b'{"v":1,"ok":true}')
    assert state.tokens == 20_000  # read by the hook itself
    assert "cannot watch" in caplog.text and "inotify watch limit reached" in caplog.text


async def _request(path: Path, op: str, payload: bytes) -> bytes:
    stream = await anyio.connect_unix(path)
    async with stream:
        await stream.send(protocol.encode_request(op, payload, agent="claude"))
        data = b""
        with anyio.move_on_after(5):
            while True:
                try:
                    data += await stream.receive()
                except anyio.EndOfStream:
                    break
    return data[4:]


def _gemini_document(*tokens: int) -> bytes:
    """An older Gemini CLI recording (one indented object, as it writes them) of a live session
    with a turn for each of `tokens`."""
    now = datetime.now(UTC).isoformat().replace("+00:00", "Z")
    messages: list[dict[str, Any]] = []
    for n, figure in enumerate(tokens):
        messages.append(
            {"id": f"u{n}", "timestamp": now, "type": "user", "content": [{"text": "go on"}]}
        )
        messages.append(
            {
                "id": f"g{n}",
                "timestamp": now,
                "type": "gemini",
                "content": "done",
                "tokens": {"input": figure, "output": 5, "cached": 0, "total": figure + 5},
                "model": "gemini-2.5-pro",
            }
        )
    doc = {
        "sessionId": "0b5a1f3e-6c1d-4b8e-9d7a-2f4e8c6a1b3d",
        "projectHash": "ab14fe397f91d5f283525b3178d2314aef552f761131c42172a21b7bf735e73d",
        "startTime": now,
        "lastUpdated": now,
        "messages": messages,
    }
    return json.dumps(doc, indent=2).encode()


async def test_the_daemon_finds_and_follows_gemini_recordings_written_as_one_json_object(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    daemon, _ = _daemon_with_a_transcript(tmp_path, monkeypatch)
    chats = tmp_path / "home" / ".gemini" / "tmp" / "ab14fe39" / "chats"
    chats.mkdir(parents=True)
    there_before = chats / "session-2026-12-02T01-00-0b5a1f3e.json"  # found by the first scan
    there_before.write_bytes(_gemini_document(12_000))
    started_later = chats / "session-2026-12-02T01-05-7c9d2e4f.json"  # found by the watcher

    def tokens(path: Path) -> int | None:
        state = daemon.centre.sessions.get(str(path))
        return None if state is None else state.tokens

    async with anyio.create_task_group() as tg:
        tg.start_soon(daemon.run)
        with anyio.fail_after(10):
            while tokens(there_before) != 12_000:
                await anyio.sleep(0.02)
            started_later.write_bytes(_gemini_document(30_000))
            while tokens(started_later) != 30_000:
                await anyio.sleep(0.02)
            started_later.write_bytes(_gemini_document(30_000, 45_000))  # rewritten whole
            while tokens(started_later) != 45_000:
                await anyio.sleep(0.02)
        daemon._stopping.set()
