"""OpenCode's database, as the daemon reads it (`ctxd/agents/opencode_family/store.py`): the
first read of a large database, and each later read (the cost of one new step), with RSS.

For each size, a database is built in a temporary directory with OpenCode 1.18.33's schema,
copied from the captured tests/data/transcripts/opencode-1.18.33/opencode.db (every table and
index, as the real CLI created them), in WAL mode. Its sessions (one in ten a subagent of the
one before), and one long session with a tenth as many parts again, hold turns shaped as the
captured ones: a user message with its text part, then steps, each an assistant message with a
step-start, a bash tool part (its command and an output of 0.2-4 KB, kept twice as OpenCode
keeps it) and a step-finish with the step's tokens. Then, in a fresh child process (so that RSS
is the reader's alone), with a writer connection open as OpenCode's is:

- first read: a new reader reads the whole database (no deadline), as the daemon does on its
  first start or after its snapshot is gone; then the same in the daemon's steps of
  STEP_BUDGET, each step timed (how long a hook may wait behind one);
- later read: one step more (its message and three parts) is written by the other connection,
  as OpenCode writes it, and the reader reads it; repeated `--steps` times. Its cost must not
  grow with the database: the sizes differ tenfold;
- empty read: nothing new (what a change of the WAL by another table costs);
- a session's digest read whole (`session_digest`, for the note after a compaction): a typical
  session and the long one.

    .venv/bin/python bench/opencode_store.py                       # 10,000 and 100,000 parts
    .venv/bin/python bench/opencode_store.py --sizes 100000 --steps 500

This is a script, not a test: the figures depend on the machine.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

CAPTURE = ROOT / "tests" / "data" / "transcripts" / "opencode-1.18.33" / "opencode.db"
#: Parts per session: a turn (user text) every STEPS_PER_TURN steps of three parts each.
STEPS_PER_TURN = 4


def _schema() -> list[str]:
    """The captured database's CREATE statements, tables before indexes."""
    db = sqlite3.connect(f"file:{CAPTURE}?mode=ro", uri=True)
    rows = db.execute(
        "SELECT type, sql FROM sqlite_master WHERE sql IS NOT NULL ORDER BY type = 'index'"
    ).fetchall()
    db.close()
    return [sql for _, sql in rows]


def _json(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"))


class Builder:
    """Rows written as OpenCode writes them (ids that sort by time, JSON in `data`)."""

    def __init__(self, db: sqlite3.Connection, rng: random.Random) -> None:
        self.db = db
        self.rng = rng
        self.n = 0
        self.clock = 1_796_164_235_000

    def _id(self, prefix: str) -> tuple[str, int]:
        self.n += 1
        self.clock += 37
        return f"{prefix}_{self.n:012x}bench", self.clock

    def session(self, parent: str | None) -> str:
        sid, at = self._id("ses")
        self.db.execute(
            "INSERT INTO session (id, project_id, parent_id, slug, directory, title, version,"
            " time_created, time_updated) VALUES (?, 'prj', ?, 's', '/w', 't', '1.18.33', ?, ?)",
            (sid, parent, at, at),
        )
        return sid

    def _message(self, sid: str, data: dict[str, Any]) -> str:
        mid, at = self._id("msg")
        data["time"] = {"created": at}
        self.db.execute(
            "INSERT INTO message VALUES (?, ?, ?, ?, ?)", (mid, sid, at, at, _json(data))
        )
        return mid

    def _part(self, sid: str, mid: str, data: dict[str, Any]) -> None:
        pid, at = self._id("prt")
        self.db.execute(
            "INSERT INTO part VALUES (?, ?, ?, ?, ?, ?)", (pid, mid, sid, at, at, _json(data))
        )

    def turn(self, sid: str) -> int:
        mid = self._message(sid, {"role": "user", "agent": "build"})
        self._part(sid, mid, {"type": "text", "text": "Run the steps " * self.rng.randint(1, 20)})
        return 1

    def step(self, sid: str, context: int) -> int:
        mid = self._message(
            sid,
            {
                "role": "assistant",
                "mode": "build",
                "agent": "build",
                "path": {"cwd": "/w", "root": "/"},
                "modelID": "mock-model",
                "providerID": "mock",
            },
        )
        self._part(sid, mid, {"type": "step-start"})
        output = "x" * self.rng.randint(200, 4000) + "\n"
        self._part(
            sid,
            mid,
            {
                "type": "tool",
                "tool": "bash",
                "callID": f"call_{self.n}",
                "state": {
                    "status": "completed",
                    "input": {"command": f"echo {self.n}", "description": "echo"},
                    "output": output,
                    "metadata": {"output": output, "exit": 0, "truncated": False},
                    "title": f"echo {self.n}",
                },
            },
        )
        tokens = {
            "total": context + 40,
            "input": context - 4000,
            "output": 40,
            "reasoning": 0,
            "cache": {"write": 0, "read": 4000},
        }
        self._part(sid, mid, {"reason": "tool-calls", "type": "step-finish", "tokens": tokens})
        return 3


def build(path: Path, sessions: int, parts: int, big: int) -> None:
    db = sqlite3.connect(path)
    db.execute("PRAGMA journal_mode=wal")
    for sql in _schema():
        db.execute(sql)
    b = Builder(db, random.Random(1))
    per_session = parts // sessions
    parent: str | None = None
    for i in range(sessions):
        sid = b.session(parent if i % 10 else None)
        parent = sid if i % 10 == 0 else parent
        written, steps = 0, 0
        while written < per_session:
            if steps % STEPS_PER_TURN == 0:
                written += b.turn(sid)
            written += b.step(sid, 10_000 + 1_000 * steps)
            steps += 1
        if i % 100 == 99:
            db.commit()
    # One long session more, whose digest is read for the note after its compaction.
    sid, written, steps = b.session(None), 0, 0
    while written < big:
        if steps % STEPS_PER_TURN == 0:
            written += b.turn(sid)
        written += b.step(sid, 10_000 + steps)
        steps += 1
    db.commit()
    db.close()


# ------------------------------------------------------------------------------- the child


def _rss_kib() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def child(path: str, steps: int) -> dict[str, Any]:
    from ctxd.agents.opencode_family.digest import session_digest
    from ctxd.agents.opencode_family.store import OpenCodeStore

    # OpenCode holds the database open (its WAL there) while the daemon reads it.
    writer = sqlite3.connect(path)
    writer.execute("PRAGMA journal_mode=wal")
    rss_start = _rss_kib()
    reader = OpenCodeStore(path)
    t0 = time.perf_counter()
    first = reader.read()
    first_s = time.perf_counter() - t0
    rss_first = _rss_kib()
    # The same first read as the daemon makes it: steps of STEP_BUDGET, the loop free between.
    from ctxd.daemon.transcripts import STEP_BUDGET

    stepwise = OpenCodeStore(path)
    step_s: list[float] = []
    while True:
        t0 = time.perf_counter()
        stepwise.read(time.monotonic() + STEP_BUDGET)
        step_s.append(time.perf_counter() - t0)
        if not stepwise.behind:
            break
    stepwise.close()
    b = Builder(writer, random.Random(2))
    b.n = 10**9  # ids after the built ones
    (sid,) = writer.execute("SELECT id FROM session ORDER BY rowid DESC LIMIT 1").fetchone()
    later: list[float] = []
    got = 0
    for i in range(steps):
        b.step(sid, 500_000 + i)
        writer.commit()
        t0 = time.perf_counter()
        got += len(reader.read())
        later.append(time.perf_counter() - t0)
    empty: list[float] = []
    for _ in range(steps):
        t0 = time.perf_counter()
        reader.read()
        empty.append(time.perf_counter() - t0)
    writer.close()
    # A session's digest, read whole from its parts (the note after a compaction): a typical
    # session, and the long one (the last written).
    db = sqlite3.connect(path)
    sessions = db.execute("SELECT session_id, count(*) FROM part GROUP BY session_id").fetchall()
    db.close()
    digests = {}
    for sid, n in (sessions[len(sessions) // 2], max(sessions, key=lambda row: row[1])):
        t0 = time.perf_counter()
        session_digest(path, sid)
        digests[n] = time.perf_counter() - t0
    return {
        "digest_s": digests,
        "first_s": first_s,
        "first_updates": len(first),
        "first_steps_s": step_s,
        "later_s": later,
        "later_updates": got,
        "empty_s": empty,
        "rss_start_kib": rss_start,
        "rss_first_kib": rss_first,
        "rss_end_kib": _rss_kib(),
    }


# ------------------------------------------------------------------------------- the parent


def _ms(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return 1000 * ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000], help="parts")
    parser.add_argument("--sessions-per-100-parts", type=float, default=1.0)
    parser.add_argument("--steps", type=int, default=200, help="later reads per size")
    parser.add_argument(
        "--big-session", type=float, default=0.1, help="the long session's parts, per part"
    )
    parser.add_argument("--child", nargs=2, metavar=("DB", "STEPS"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(child(args.child[0], int(args.child[1]))))
        return
    rows = []
    with tempfile.TemporaryDirectory(prefix="ctxd-opencode-bench-") as tmp:
        for parts in args.sizes:
            sessions = max(1, round(parts * args.sessions_per_100_parts / 100))
            path = Path(tmp) / f"opencode-{parts}.db"
            t0 = time.perf_counter()
            build(path, sessions, parts, round(parts * args.big_session))
            built = time.perf_counter() - t0
            size = path.stat().st_size
            out = subprocess.run(
                [sys.executable, __file__, "--child", str(path), str(args.steps)],
                capture_output=True,
                text=True,
                check=True,
            ).stdout
            r = json.loads(out)
            (n_parts,) = sqlite3.connect(path).execute("SELECT count(*) FROM part").fetchone()
            rows.append((parts, sessions, n_parts, size, built, r))
    print(
        f"python {sys.version.split()[0]}, sqlite {sqlite3.sqlite_version}, {os.cpu_count()} CPUs"
    )
    print()
    print(
        "| parts | sessions | file (MB) | first read | steps read | RSS after import → after"
        " first read | in the daemon's steps: how many, the longest | later read p50 / p95 / max"
        " | empty read p50 |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for _parts, sessions, n_parts, size, _built, r in rows:
        print(
            f"| {n_parts:,} | {sessions:,} | {size / 1e6:.1f} | {r['first_s'] * 1000:.0f} ms"
            f" | {r['first_updates']:,} | {r['rss_start_kib'] / 1024:.1f} → "
            f"{r['rss_first_kib'] / 1024:.1f} MB | {len(r['first_steps_s'])},"
            f" {max(r['first_steps_s']) * 1000:.1f} ms | {_ms(r['later_s'], 0.5):.3f} / "
            f"{_ms(r['later_s'], 0.95):.3f} / {max(r['later_s']) * 1000:.3f} ms"
            f" | {statistics.median(r['empty_s']) * 1000:.3f} ms |"
        )
    for parts, _, _, _, built, r in rows:
        assert r["later_updates"] == args.steps, (parts, r["later_updates"])
        digests = ", ".join(
            f"{float(t) * 1000:.1f} ms for {int(n):,} parts" for n, t in r["digest_s"].items()
        )
        print(
            f"\n{parts:,} parts: built in {built:.1f} s; a session's digest: {digests}; "
            f"RSS at the end {r['rss_end_kib'] / 1024:.1f} MB"
        )


if __name__ == "__main__":
    main()
