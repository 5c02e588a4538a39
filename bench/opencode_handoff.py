"""The answer to OpenCode's idle hook at the handoff point, on a session with a long history:
how long the daemon's centre takes to answer it (ctxd's plugin waits 1 s for it), and what
reading the history costs the daemon beforehand (in its background steps).

A database with OpenCode 1.18.33's schema (a copy of the captured
tests/data/transcripts/opencode-1.18.33/opencode.db, WAL mode) gets a session whose history is
`--mb` MB of user requests of 1 MB each, a message each (written in one transaction), then a
step past the handoff point (70 % of 168,000 on a 200,000 window). The daemon's centre
(`Centre.open`, in this process, with the checkout's code) reads it all as the daemon does, in
steps of STEP_BUDGET, and then answers the idle hook the plugin sends; the answer is timed
`--runs` times, each on a fresh centre (a handoff is asked once per session).

    .venv/bin/python bench/opencode_handoff.py              # --mb 400 --runs 3

This is a script, not a test: the figures depend on the machine.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sqlite3
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

from opencode_db import CAPTURED, Writer, copy_capture  # noqa: E402

from ctxd.agents.opencode import database_path  # noqa: E402
from ctxd.daemon.centre import Centre  # noqa: E402
from ctxd.daemon.config import parse_settings  # noqa: E402
from ctxd.daemon.transcripts import STEP_BUDGET  # noqa: E402

CONFIG = '[windows]\n"mock-model" = 200000\n'
PART = 1_000_000


def build(env: dict[str, str], mb: int) -> Path:
    path = database_path(env)
    path.parent.mkdir(parents=True)
    copy_capture(path.parent)
    body = "Please keep this whole log in mind. " * (PART // 36)
    user = json.dumps({"role": "user", "agent": "build", "summary": {"diffs": []}})
    db = sqlite3.connect(path)
    with db:  # one message per request, as OpenCode writes them
        db.executemany(
            "insert into message values (?, ?, 1, 1, ?)",
            [(f"msg_history{i:06d}", CAPTURED, user) for i in range(mb)],
        )
        db.executemany(
            "insert into part values (?, ?, ?, 1, 1, ?)",
            [
                (
                    f"prt_history{i:06d}",
                    f"msg_history{i:06d}",
                    CAPTURED,
                    json.dumps({"type": "text", "text": f"request {i}: {body}"}),
                )
                for i in range(mb)
            ],
        )
    db.close()
    w = Writer(path)
    w.step(CAPTURED, 125_000)
    w.close()
    return path


def answer_once(env: dict[str, str], path: Path) -> tuple[float, float, int, bool]:
    """(seconds to read it all, seconds to answer the idle hook, steps, whether it blocked)."""
    centre = Centre.open(env, {}, settings=parse_settings(CONFIG))
    transcripts = centre.transcripts
    began, steps = time.perf_counter(), 0
    while not transcripts.catch_up(str(path), transcripts.deadline(STEP_BUDGET)):
        steps += 1
    read = time.perf_counter() - began
    payload = {"hook_event_name": "session_idle", "session_id": CAPTURED, "cwd": "/w"}
    began = time.perf_counter()
    answer = centre.answers.handle_hook("opencode", None, json.dumps(payload).encode())
    took = time.perf_counter() - began
    assert isinstance(answer, bytes)
    return read, took, steps + 1, b'"block"' in answer


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--mb", type=int, default=400)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="ctxd-bench-"))
    try:
        env = {
            "HOME": str(root / "home"),
            "XDG_STATE_HOME": str(root / "state"),
            "XDG_CONFIG_HOME": str(root / "config"),
            "PATH": os.environ.get("PATH", ""),
        }
        began = time.perf_counter()
        path = build(env, args.mb)
        size = sum(p.stat().st_size for p in path.parent.glob("opencode.db*")) / 1e6
        print(f"built {size:,.0f} MB in {time.perf_counter() - began:.1f} s")
        runs = [answer_once(env, path) for _ in range(args.runs)]
        reads = [r[0] for r in runs]
        answers = [r[1] * 1000 for r in runs]
        print(
            f"read in the daemon's steps: {statistics.median(reads):.2f} s "
            f"({runs[0][2]:,} steps); the idle hook answered in {statistics.median(answers):.1f} ms"
            f" (median of {args.runs}; {', '.join(f'{a:.1f}' for a in answers)}); "
            f"a block each time: {all(r[3] for r in runs)}"
        )
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
