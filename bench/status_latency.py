"""Benchmark 3: from a transcript append to `ctxd status` showing it, with 500 live transcripts.

A real `ctxd serve` watches $CLAUDE_CONFIG_DIR/projects. The benchmark creates 500 transcripts
there (a real Claude Code 2.1.332 transcript without its large blob lines, one file per session,
`projects/<slug>/<uuid>.jsonl`) and lets the daemon's watcher discover them: no hooks at all.
Then a writer appends a real assistant line with a new, unique usage figure to a random
transcript, --rate times a second, and for every append a poller asks the daemon (op "status"
for that session, over the socket, no new process) every --poll-ms until the row's `tokens`
reaches the figure. Latency = first status showing it − end of the append's write().

Each project dir is created together with its first transcripts, as Claude Code does for a new
cwd; the benchmark reports how many the watcher discovered (a file the watcher missed is found at
its first append, so the append phase still covers all 500).

Targets: p50 ≤ 50 ms, p99 ≤ 250 ms.

    .venv/bin/python bench/status_latency.py [--transcripts 500] [--rate 50] [--duration 20]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import sys
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

import common as c

TARGET_P50_MS = 50.0
TARGET_P99_MS = 250.0
GIVE_UP_S = 10.0
BASE_TOKENS = 100_000  # far above the sample's own figures, so each append is recognisable


@dataclass
class Tally:
    latencies_ms: list[float]
    polls: int = 0
    missed: int = 0
    late_writes: int = 0  # appends the writer could not make on schedule (> 5 ms late)


async def _status(loop: asyncio.AbstractEventLoop, path: str, frame: bytes) -> int | None:
    """The `tokens` of the one session `frame` asks about."""
    body = await c.exchange(loop, path, frame)
    _, _, result = body.partition(b"\n")
    rows = json.loads(result)["sessions"]
    return rows[0]["tokens"] if rows else None


async def _watch_for(
    path: str, session_id: str, tokens: int, written: float, poll: float, tally: Tally
) -> None:
    loop = asyncio.get_running_loop()
    frame = c.frame("status", session=session_id)
    while True:
        seen = await _status(loop, path, frame)
        tally.polls += 1
        now = time.perf_counter()
        # Figures only grow, so a later append to the same file also proves this one was read.
        if seen is not None and seen >= tokens:
            tally.latencies_ms.append((now - written) * 1000)
            return
        if now - written > GIVE_UP_S:
            tally.missed += 1
            return
        await asyncio.sleep(poll)


async def _drive(
    box: c.Sandbox,
    transcripts: list[tuple[str, Path]],
    rate: float,
    duration: float,
    poll: float,
    seed: int,
) -> Tally:
    tally = Tally([])
    template = c.assistant_line()
    chooser = random.Random(seed)
    watchers: list[asyncio.Task[None]] = []
    start = time.perf_counter()
    count = int(rate * duration)
    for k in range(count):
        due = start + k / rate
        delay = due - time.perf_counter()
        if delay > 0:
            await asyncio.sleep(delay)
        elif delay < -0.005:
            tally.late_writes += 1
        session_id, path = chooser.choice(transcripts)
        tokens = BASE_TOKENS + k
        line = c.assistant_append(template, session_id, tokens)
        fd = os.open(path, os.O_WRONLY | os.O_APPEND)
        try:
            os.write(fd, line)  # one write(2), as an agent appends a line
        finally:
            os.close(fd)
        written = time.perf_counter()
        watchers.append(
            asyncio.create_task(
                _watch_for(str(box.socket), session_id, tokens, written, poll, tally)
            )
        )
    await asyncio.gather(*watchers)
    return tally


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--transcripts", type=int, default=500)
    parser.add_argument("--projects", type=int, default=50, help="project dirs to spread over")
    parser.add_argument("--rate", type=float, default=50.0, help="appends per second")
    parser.add_argument("--duration", type=float, default=20.0, help="seconds of appends")
    parser.add_argument("--poll-ms", type=float, default=5.0)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument(
        "--discovery-timeout", type=float, default=10.0, help="seconds to wait for discovery"
    )
    args = parser.parse_args()

    c.header(
        "Append → status latency",
        " ".join([".venv/bin/python bench/status_latency.py", *sys.argv[1:]]),
    )
    content = c.small_transcript()
    print(
        f"{args.transcripts} transcripts of {len(content):,} bytes in {args.projects} project "
        f"dirs, discovered by the watcher; {args.rate:g} appends/s for {args.duration:g} s; "
        f"status polled per pending append every {args.poll_ms:g} ms\n"
    )
    with c.sandbox("status") as box, c.running_daemon(box) as daemon:
        transcripts: list[tuple[str, Path]] = []
        created = time.monotonic()
        for i in range(args.transcripts):
            session_id = str(uuid.uuid4())
            cwd = f"/home/user/src/project-{i % args.projects:03d}"
            transcripts.append(
                (session_id, c.place_claude_transcript(box, content, session_id, cwd))
            )
        found, _ = c.wait_sessions(box, args.transcripts, timeout=args.discovery_timeout)
        discovery = time.monotonic() - created
        requests_before = c.status(box)["daemon"]["requests"]
        cpu_before = c.proc_cpu_seconds(daemon.pid)
        tally = asyncio.run(
            _drive(box, transcripts, args.rate, args.duration, args.poll_ms / 1000, args.seed)
        )
        cpu = c.proc_cpu_seconds(daemon.pid) - cpu_before
        served = c.status(box)["daemon"]["requests"] - requests_before
        memory = c.proc_memory_kib(daemon.pid)
        tracked = c.status(box)["daemon"]["sessions"]

    s = c.summarize(tally.latencies_ms)
    appends = len(tally.latencies_ms) + tally.missed
    print(
        c.table(
            [
                "appends",
                "seen",
                "missed (> 10 s)",
                "p50 ms",
                "p95 ms",
                "p99 ms",
                "max ms",
                "mean ms",
            ],
            [[appends, s.n, tally.missed, s.p50, s.p95, s.p99, s.max, s.mean]],
        )
    )
    print()
    checks = [
        [
            f"watcher discovers all {args.transcripts} new transcripts",
            f"{found} within {discovery:.1f} s",
            c.verdict(found >= args.transcripts),
        ],
        ["p50 ≤ 50 ms", f"{s.p50:.1f} ms", c.verdict(s.p50 <= TARGET_P50_MS)],
        ["p99 ≤ 250 ms", f"{s.p99:.1f} ms", c.verdict(s.p99 <= TARGET_P99_MS and not tally.missed)],
    ]
    print(c.table(["target", "measured", "verdict"], checks))
    elapsed = max(args.duration, 1e-9)
    print(
        f"\n{tracked} sessions tracked after the appends; {tally.polls:,} status polls "
        f"({tally.polls / elapsed:,.0f}/s, {served:,} requests served in all); daemon CPU "
        f"{cpu:.2f} s over the run ({cpu / elapsed * 100:.0f} % of a core, polls included); "
        f"RSS {memory.get('VmRSS', 0) / 1024:.1f} MiB; late writes: {tally.late_writes}"
    )
    c.save_json(
        "status_latency",
        {
            "machine": c.machine(),
            "args": vars(args),
            "latencies_ms": tally.latencies_ms,
            "missed": tally.missed,
            "polls": tally.polls,
            "daemon_cpu_s": cpu,
        },
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
