"""The hook that starts the daemon is answered, and the first look at a
transcript the daemon has never seen costs a hook no more than a few tens of milliseconds at
any size: the rest is read in the background, and the answer says so meanwhile."""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path

from daemon_proc import ClaudeSession, Home, exchange, hook_frame, wait_for

MB = 1_000_000


def end_spawned_daemon(home: Home) -> None:
    """SIGTERM the daemon a hook started (not ours to wait for), and wait until it is gone."""
    answer = home.ping(timeout=1.0)
    if answer is None:
        return
    pid = int(answer["pid"])
    os.kill(pid, signal.SIGTERM)
    wait_for(lambda: not Path(f"/proc/{pid}").exists(), 10, "the spawned daemon to end")


def test_the_hook_that_starts_the_daemon_is_answered(home: Home) -> None:
    """With no daemon running, the hook that started one printed nothing and its
    event was lost: its session was not updated until the next event. It now waits for the
    daemon it started and prints its answer."""
    env = {k: v for k, v in home.env.items() if k != "CTXD_NO_SPAWN"}
    session = home.claude()
    session.assistant(650_000)  # the first call above the line warns
    assert home.ping(timeout=0.5) is None
    try:
        started = time.monotonic()
        result = home.hook(session.payload("PostToolUse"), env=env)
        took = time.monotonic() - started
        assert result.returncode == 0 and result.stderr == b"", result
        assert b"CONTEXT WARNING" in result.stdout, (
            f"the hook that started the daemon printed {result.stdout!r} after {took:.2f} s"
        )
        row = home.row(session)
        assert row is not None and row["tokens"] == 650_000 and row["warned"] == "warning", row
        # The next hook finds the daemon at once (and is not warned again: debounce).
        again = home.hook(session.payload("PostToolUse"), env=env)
        assert again.returncode == 0 and b"CONTEXT WARNING" not in again.stdout, again
    finally:
        end_spawned_daemon(home)
    log = (home.state_dir / "ctxd.log").read_text()
    assert "serving on" in log, log


def write_big_transcript(session: ClaudeSession, size: int, last_tokens: int) -> None:
    """About `size` bytes of real assistant lines (padded to ~8 KB, 100,000 tokens each), then
    one line with `last_tokens`."""
    block = b"".join(session.assistant_line(100_000, pad="x" * 8000) for _ in range(64))
    with session.path.open("wb") as f:
        for _ in range(size // len(block) + 1):
            f.write(block)
        f.write(session.assistant_line(last_tokens))


def test_first_hook_on_a_huge_unseen_transcript_answers_at_once_and_says_so(home: Home) -> None:
    """The first hook of a transcript a fresh daemon had never seen read the
    whole file inside the request (428 ms at 200 MB). It must answer within a hook's budget,
    say that the transcript is still being read, and judge once it is."""
    session = home.claude()
    write_big_transcript(session, 150 * MB, 700_000)
    size = session.path.stat().st_size
    home.start()
    # The watcher may already be reading it; the hook must not wait for that either.
    started = time.monotonic()
    header, result = exchange(home.socket, hook_frame(session.payload("Stop")))
    took = time.monotonic() - started

    assert header.get("ok") is True, header
    assert took < 0.15, f"the first hook took {took * 1000:.0f} ms on a {size / MB:.0f} MB file"
    out = json.loads(result)
    assert out["systemMessage"].startswith("ctxd is still reading this session's transcript"), out
    row = home.row(session)
    assert row is not None and row["catching_up"] is not None, row
    assert 0 < row["catching_up"]["read"] < row["catching_up"]["size"] == size, row

    caught_up = wait_for(
        lambda: r if (r := home.row(session)) is not None and r["catching_up"] is None else None,
        30,
        "the background read to finish",
    )
    assert caught_up["tokens"] == 700_000, caught_up
    # Now judged: above 70 % of the room before compaction, the handoff is asked, once.
    header, result = exchange(home.socket, hook_frame(session.payload("Stop")))
    assert json.loads(result)["systemMessage"].startswith("CONTEXT HANDOFF"), result
