"""Benchmark: a flood of distinct session ids, each named by one hook.

A real `ctxd serve`; --ids PostToolUse hooks over the Unix socket, one at a time, each with a new
session id and no transcript (a runaway script, an agent that makes one id per call). Measured:
the daemon's memory as the ids arrive (VmRSS over the start), the slowest hook, then `status`'s
latency and row count and the snapshot's size once the daemon is stopped.

    .venv/bin/python bench/session_flood.py [--ids 100000]
"""

from __future__ import annotations

import argparse
import json
import time

import common as c


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ids", type=int, default=100_000)
    args = parser.parse_args()
    c.header("session id flood", f".venv/bin/python bench/session_flood.py --ids {args.ids}")
    rows = []
    with c.sandbox("flood") as box, c.running_daemon(box) as proc:
        base = json.loads(c.claude_payload("x", box.root / "none.jsonl", str(box.root)))
        base.pop("transcript_path")
        start = c.proc_memory_kib(proc.pid)["VmRSS"]
        slowest = 0.0
        for n in range(args.ids):
            payload = json.dumps({**base, "session_id": f"flood-{n:07d}"}).encode()
            began = time.monotonic()
            c.request(box.socket, "hook", payload, agent="claude", event=None)
            slowest = max(slowest, time.monotonic() - began)
            if (n + 1) % (args.ids // 5) == 0:
                grown = c.proc_memory_kib(proc.pid)["VmRSS"] - start
                rows.append([f"{n + 1:,}", f"{grown / 1024:.1f}", f"{slowest * 1000:.0f}"])
        began = time.monotonic()
        try:
            said = f"{len(c.status(box)['sessions']):,} rows"
        except (OSError, RuntimeError, ValueError) as exc:  # a document past the wire's bound
            said = f"failed ({exc})"
        took = time.monotonic() - began
        c.stop_daemon(proc)  # writes the snapshot
        state = box.root / "state" / "ctxd" / "state.json"
        size = state.stat().st_size if state.exists() else 0
    print(c.table(["ids", "RSS grown MiB", "slowest hook ms"], rows))
    print(f"status: {said} in {took:.2f} s; snapshot {size / 1e6:.1f} MB")


if __name__ == "__main__":
    main()
