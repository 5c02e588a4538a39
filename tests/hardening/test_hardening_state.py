"""State that must not repeat survives a crash, and a save that cannot
complete leaves the last good snapshot alone.

Claude Code figures: no statusline, so the window is the 1,000,000 default and the room before
auto-compaction 937,500 tokens; the handoff is asked at 70 % of it (656,250 tokens).
"""

from __future__ import annotations

import json
import os

from daemon_proc import Home, fill_disk, tmpfs, wait_for


def test_handoff_is_not_asked_again_after_sigkill_right_after_the_answer(home: Home) -> None:
    """`handoff_asked` reached disk only in the periodic snapshot (first one ≥ 5 s
    after start), so a daemon killed right after answering asked again after its restart.
    State that must not repeat has to be durable before the answer that depends on it leaves."""
    home.start()
    session = home.claude()
    session.assistant(700_000)  # 74.7 % of the room before compaction
    first = home.hook_out(session.payload("Stop"))
    assert first is not None and first["systemMessage"].startswith("CONTEXT HANDOFF"), first
    home.kill()  # at the worst moment: the user has seen the handoff, nothing else happened

    home.start()
    again = home.hook_out(session.payload("Stop"))

    assert again is None, f"the handoff was asked a second time after a crash: {again}"
    row = home.row(session)
    assert row is not None and row["handoff_asked"] is True


def test_full_disk_keeps_the_last_good_snapshot_and_says_so(home: Home) -> None:
    """With one page free, the save wrote a truncated 4,096-byte state.json over
    the good one (short `os.write` ignored, then fsync and rename), logged nothing, and left a
    `.state.json.<pid>.tmp` behind. A save is complete or does not happen, and a failure is
    logged."""
    with tmpfs(home.root / "statefs", "1m") as state_home:
        home.env["XDG_STATE_HOME"] = str(state_home)
        home.start()
        sessions = [home.claude() for _ in range(40)]
        for n, session in enumerate(sessions):
            session.assistant(100_000 + n)
        wait_for(lambda: len(home.status()["sessions"]) == len(sessions), 10, "40 tracked sessions")
        assert home.stop() == 0
        good = home.state_file.read_bytes()
        assert len(json.loads(good)["sessions"]) == len(sessions)
        assert len(good) > 3 * 4096, "the snapshot must not fit in the one free page"

        home.start()
        fill_disk(state_home, leave=4096)  # one page free
        home.stop()  # SIGTERM: the daemon saves its state on the way out

        after = home.state_file.read_bytes()
        leftovers = sorted(
            name
            for name in os.listdir(home.state_dir)
            if name.endswith(".tmp") or name.startswith(".state.json")
        )
        log = home.log()

    assert len(after) == len(good) and after == good, (
        f"state.json was replaced by {len(after)} bytes (was {len(good)}): {after[:80]!r}..."
    )
    assert leftovers == [], f"temporary files left in the state dir: {leftovers}"
    failures = [
        line
        for line in log.splitlines()
        if ("ERROR" in line or "WARNING" in line) and "state" in line.lower()
    ]
    assert failures, f"no log line says the state could not be saved:\n{log}"
