"""The watcher slows down after a quiet spell and wakes up at the next change.

In process (a real Daemon on a real socket and real files), so that the quiet spell can be
shortened: the daemon's own 30 s would make this test slow.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

import anyio
import pytest

from ctxd import daemon as daemon_module
from ctxd import tracker
from ctxd.daemon import Daemon

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def _assistant(tokens: int, n: int) -> bytes:
    record: dict[str, Any] = {
        "type": "assistant",
        "sessionId": "s-watch",
        "uuid": f"u{n}",
        "timestamp": "2026-11-29T21:00:00.000Z",
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


async def test_a_quiet_watcher_slows_down_and_wakes_at_the_next_append(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # longer than a slow step, so that the restart after a change is not quiet already
    monkeypatch.setattr(daemon_module, "QUIET_AFTER", 1.5)
    monkeypatch.setattr(daemon_module, "TICK", 0.1)
    monkeypatch.setattr(os, "chdir", lambda path: None)  # the daemon would leave the test's cwd
    steps: list[int] = []
    watch_roots = tracker.watch_roots

    async def recording_watch_roots(*args: Any) -> None:
        steps.append(args[3])
        await watch_roots(*args)

    monkeypatch.setattr(tracker, "watch_roots", recording_watch_roots)
    home = tmp_path / "home"
    project = home / ".claude" / "projects" / "-work"
    project.mkdir(parents=True)
    (tmp_path / "run").mkdir(mode=0o700)
    transcript = project / "s-watch.jsonl"
    transcript.write_bytes(_assistant(10_000, 1))
    env = {
        "HOME": str(home),
        "XDG_RUNTIME_DIR": str(tmp_path / "run"),
        "XDG_STATE_HOME": str(tmp_path / "state"),
        "XDG_CONFIG_HOME": str(tmp_path / "config"),
    }
    daemon = Daemon(env)

    def tokens() -> int | None:
        state = daemon.registry.sessions.get(str(transcript))
        return None if state is None else state.tokens

    async with anyio.create_task_group() as tg:
        tg.start_soon(daemon.run)
        with anyio.fail_after(10):
            while tokens() != 10_000:
                await anyio.sleep(0.05)
            while tracker.IDLE_STEP_MS not in steps:  # quiet: slowed down
                await anyio.sleep(0.05)
            with transcript.open("ab") as f:
                f.write(_assistant(20_000, 2))
            started = time.monotonic()
            while tokens() != 20_000:
                await anyio.sleep(0.01)
            woke_after = time.monotonic() - started
            while steps[-1] != tracker.WATCH_STEP_MS:  # busy again: the fast step
                await anyio.sleep(0.05)
        daemon._stopping.set()
    assert steps[0] == tracker.WATCH_STEP_MS
    assert woke_after < 2 * tracker.IDLE_STEP_MS / 1000 + 0.5
