"""What reading the snapshot back costs at a restart: SESSIONS Claude Code sessions with every
field a session can hold set (a prompt cache, warnings given, the agent's configuration), saved
by `snapshot.save` and put back into fresh rooms by `snapshot.restore`: the CPU time of the
best of ROUNDS (CPU, not wall: the figure holds on a machine busy with other work).

    .venv/bin/python bench/snapshot_restore.py [--sessions 10000] [--rounds 7]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from dataclasses import replace
from pathlib import Path

from ctxd.core.events import PromptCache
from ctxd.core.measure import Severity
from ctxd.core.policy import PolicyState
from ctxd.core.session import SessionState, new_session
from ctxd.daemon import snapshot
from ctxd.daemon.centre import Centre


def session(n: int) -> SessionState:
    state = new_session("claude", f"s{n}", f"/p/{n}.jsonl", 1_800_000_000.0 + n, cwd="/w")
    return replace(
        state,
        model="claude-opus-5-5",
        tokens=100_000 + n,
        usage_at=1_800_000_000.0 + n,
        statusline_window=1_000_000,
        statusline_used_pct=10.0,
        agent_config=(("CLAUDE_CONFIG_DIR", "/c"), ("DISABLE_AUTO_COMPACT", "0")),
        agent_version="2.1.332",
        prompt_cache=PromptCache(ttl=3600, expires_at=1_800_003_600.0, warm=True),
        turns=12,
        last_turn_id=f"msg_{n}",
        policy=PolicyState(warned=Severity.WARNING, recent=(1, 2, 3), warned_at=5.0),
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=10_000)
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        (root / "state").mkdir(mode=0o700)
        path = root / "state" / "state.json"
        saved = Centre.open({"HOME": str(root)}, {})
        saved.sessions.restore([session(n) for n in range(args.sessions)], {})
        snapshot.save(saved.sessions, saved.transcripts, path)
        best = float("inf")
        for _ in range(args.rounds):
            fresh = Centre.open({"HOME": str(root)}, {})
            began = time.process_time()
            snapshot.restore(fresh.sessions, fresh.transcripts, path)
            best = min(best, time.process_time() - began)
        size = path.stat().st_size
    print(
        f"{args.sessions:,} sessions, snapshot {size / 1e6:.1f} MB:"
        f" restore {best * 1000:.0f} ms of CPU (best of {args.rounds})"
    )


if __name__ == "__main__":
    main()
