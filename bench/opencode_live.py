"""OpenCode's database at a first start: every session read (what the daemon did), against only
those active in the live window (what it does).

A database with the real 1.18.33 schema (a copy of the capture in tests/data) and a month of
history: SESSIONS sessions, their last activity spread evenly over 30 days, each STEPS model
calls of a user text and an assistant step with a tool output of OUTPUT bytes. Then, alternately,
ROUNDS times each, a fresh reader (`OpenCodeStore`) reads it from its first row: with no live
window (every session), and with the daemon's (`sessions.idle_seconds`, 6 hours, from now).
Measured per read: wall time, the parts fetched, the sessions it yields, and the bytes the
process read (`rchar` in /proc/self/io: SQLite's reads, from the page cache or the disk).

    .venv/bin/python bench/opencode_live.py [--sessions 200] [--steps 20] [--output 4000]
        [--rounds 5]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import common as c

sys.path.insert(0, str(c.REPO / "tests"))

from opencode_db import Writer, copy_capture

from ctxd.agents.opencode_family.store import OpenCodeStore
from ctxd.core.settings import SessionSettings

MONTH = 30 * 86400.0


def build(path: Path, sessions: int, steps: int, output: int, now: float) -> None:
    w = Writer(path)
    w.db.execute("pragma synchronous=off")
    for n in range(sessions):
        sid = f"ses_hist_{n:04d}"
        w.clock = int((now - 600 - n * MONTH / sessions - 60) * 1000)
        w.session(sid, cwd=f"/w/project-{n}")
        for i in range(steps):
            ask = w.message(sid, "user")
            w.part(sid, ask, type="text", text=f"request {i}")
            msg = w.message(sid, "assistant")
            w.part(sid, msg, type="step-start")
            state = {"status": "completed", "input": {"command": "make"}, "output": "x" * output}
            w.part(sid, msg, type="tool", tool="bash", callID=f"c{i}", state=state)
            tokens = {"input": 20_000 + i, "output": 40, "reasoning": 0, "cache": {}}
            w.part(sid, msg, type="step-finish", reason="stop", tokens=tokens, cost=0)
        w.db.execute("update session set time_updated = ? where id = ?", (w.clock, sid))
    w.db.commit()
    w.close()


def rchar() -> int:
    for line in Path("/proc/self/io").read_text().splitlines():
        if line.startswith("rchar:"):
            return int(line.split()[1])
    return 0


def first_read(path: Path, since: float | None) -> tuple[float, int, int, int]:
    """(ms, parts fetched, sessions yielded, bytes read) of a fresh reader's first read."""
    reader = OpenCodeStore(str(path))
    bytes_before = rchar()
    begin = time.perf_counter()
    updates = reader.read(since=since)
    took = (time.perf_counter() - begin) * 1000
    read = rchar() - bytes_before
    reader.close()
    return took, reader.rows_read, len({u.session_id for u in updates}), read


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sessions", type=int, default=200)
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--output", type=int, default=4000)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    c.header(
        "OpenCode's database at a first start: the whole history, or the live window",
        f".venv/bin/python bench/opencode_live.py --sessions {args.sessions} --steps "
        f"{args.steps} --output {args.output} --rounds {args.rounds}",
    )
    now = time.time()
    window = SessionSettings().idle_seconds
    with tempfile.TemporaryDirectory(prefix="ctxd-bench-opencode-live-") as tmp:
        path = copy_capture(Path(tmp), live=False)
        build(path, args.sessions, args.steps, args.output, now)
        size = sum(os.path.getsize(p) for p in (path, Path(f"{path}-wal")) if p.exists())
        results: dict[str, list[tuple[float, int, int, int]]] = {"every session": [], "live": []}
        for _ in range(args.rounds):
            results["every session"].append(first_read(path, None))
            results["live"].append(first_read(path, now - window))
    rows = []
    for name, runs in results.items():
        rows.append(
            [
                name,
                f"{statistics.median(r[0] for r in runs):.1f}",
                f"{min(r[0] for r in runs):.1f}–{max(r[0] for r in runs):.1f}",
                runs[0][1],
                runs[0][2],
                f"{runs[0][3] / 1e6:.1f} MB",
            ]
        )
    print(
        c.table(
            ["first read", "ms p50", "ms range", "parts fetched", "sessions", "bytes read"], rows
        )
    )
    print(
        f"\n{args.sessions} sessions over 30 days (+ the capture's), database "
        f"{size / 1e6:.1f} MB; live window {window / 3600:g} h; "
        f"load average {os.getloadavg()[0]:.2f}"
    )


if __name__ == "__main__":
    main()
