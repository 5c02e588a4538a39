"""What one hook's answer costs the daemon when hooks come as agents send them, seconds apart
(cold caches), beside the same answer back to back (warm: the figure the load benchmarks give).

A real daemon tracks SESSIONS Claude sessions (real transcripts, as `bench/line_cost.py` places
them). Then, on that one daemon:
  - idle: nothing sent for IDLE seconds: the daemon's own wake-ups, subtracted below;
  - spaced: HOOKS PostToolUse hooks, one every 1-2 s (uniform), round robin over the sessions,
    nothing new in the transcript (the warm run's request, at an agent's pace);
  - spaced, a new line each: the same, each hook after a new assistant line is appended to its
    session's transcript (what an agent does before it fires PostToolUse);
  - warm: WARM hooks back to back over the same sessions, one connection at a time.
Each hook is sent over a fresh Unix-socket connection, as the hook client sends it. The
daemon's CPU is read from /proc/<pid>/stat (utime + stime, all threads, in clock ticks) and
from /proc/<pid>/task/*/schedstat (nanoseconds, all threads) before and after each run; a
run's whole-run figure is its CPU divided by its answers (everything the daemon did meanwhile:
its wake-ups, the watcher's events, the snapshots the changes cause). An answer's own cost is
the schedstat delta from just before its request to just after its answer (a wake-up of the
daemon's that falls inside is counted too: the p50 is the figure to read); the idle run gives
the daemon's CPU with nothing sent, for scale.

    .venv/bin/python bench/answer_cost.py [--sessions 40] [--hooks 60] [--warm 2000] [--idle 30]
"""

from __future__ import annotations

import argparse
import os
import random
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

import common as c

TICK = os.sysconf("SC_CLK_TCK")


@dataclass(frozen=True)
class Session:
    session_id: str
    transcript: Path
    payload: bytes


def track(box: c.Sandbox, count: int) -> list[Session]:
    template = c.assistant_line()
    sessions = []
    for n in range(count):
        sid = str(uuid.uuid4())
        cwd = str(box.root / "work" / f"proj-{n}")
        Path(cwd).mkdir(parents=True, exist_ok=True)
        path = c.place_claude_transcript(
            box, c.assistant_append(template, sid, 20_000 + 1000 * n), sid, cwd
        )
        payload = c.claude_payload(sid, path, cwd)
        c.request(box.socket, "hook", payload, agent="claude", event="PostToolUse")
        sessions.append(Session(sid, path, payload))
    c.wait_sessions(box, count, 30.0)
    return sessions


def stat_ticks(pid: int) -> int:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])


def schedstat_ns(pid: int) -> int:
    """CPU time of every thread of `pid`, in ns (a thread gone meanwhile is not counted)."""
    total = 0
    for task in os.listdir(f"/proc/{pid}/task"):
        try:
            total += int(Path(f"/proc/{pid}/task/{task}/schedstat").read_text().split()[0])
        except (FileNotFoundError, ProcessLookupError):
            continue
    return total


@dataclass
class Run:
    name: str
    answers: int
    seconds: float
    ticks: int
    ns: int
    each_ns: list[int]


def run(
    name: str,
    pid: int,
    box: c.Sandbox,
    sessions: list[Session],
    hooks: int,
    spacing: tuple[float, float] | None,
    append: bool,
) -> Run:
    template = c.assistant_line()
    tokens = {s.session_id: 100_000 for s in sessions}
    rng = random.Random(7)
    each: list[int] = []
    begin_wall, begin_ticks, begin_ns = time.monotonic(), stat_ticks(pid), schedstat_ns(pid)
    for i in range(hooks):
        session = sessions[i % len(sessions)]
        if spacing is not None:
            time.sleep(rng.uniform(*spacing))
        if append:
            tokens[session.session_id] += 1500
            line = c.assistant_append(template, session.session_id, tokens[session.session_id])
            with session.transcript.open("ab") as f:
                f.write(line)
        before = schedstat_ns(pid)
        c.request(box.socket, "hook", session.payload, agent="claude", event="PostToolUse")
        each.append(schedstat_ns(pid) - before)
    return Run(
        name,
        hooks,
        time.monotonic() - begin_wall,
        stat_ticks(pid) - begin_ticks,
        schedstat_ns(pid) - begin_ns,
        each,
    )


def idle(pid: int, seconds: float) -> Run:
    begin_wall, begin_ticks, begin_ns = time.monotonic(), stat_ticks(pid), schedstat_ns(pid)
    time.sleep(seconds)
    return Run(
        "idle",
        0,
        time.monotonic() - begin_wall,
        stat_ticks(pid) - begin_ticks,
        schedstat_ns(pid) - begin_ns,
        [],
    )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sessions", type=int, default=40)
    parser.add_argument("--hooks", type=int, default=60)
    parser.add_argument("--warm", type=int, default=2000)
    parser.add_argument("--idle", type=float, default=30.0)
    args = parser.parse_args()
    c.header(
        "One answer's cost to the daemon: hooks seconds apart, and back to back",
        f".venv/bin/python bench/answer_cost.py --sessions {args.sessions} --hooks {args.hooks} "
        f"--warm {args.warm} --idle {args.idle:g}",
    )
    with c.sandbox("answer-cost") as box, c.running_daemon(box) as daemon:
        sessions = track(box, args.sessions)
        time.sleep(5.0)  # the start-up's catching up and first snapshot done
        quiet = idle(daemon.pid, args.idle)
        runs = [
            run("spaced 1-2 s", daemon.pid, box, sessions, args.hooks, (1.0, 2.0), False),
            run(
                "spaced 1-2 s, a new line each",
                daemon.pid,
                box,
                sessions,
                args.hooks,
                (1.0, 2.0),
                True,
            ),
            run("warm: back to back", daemon.pid, box, sessions, args.warm, None, False),
        ]
    rows = []
    for r in runs:
        each = c.summarize([n / 1000 for n in r.each_ns])
        rows.append(
            [
                r.name,
                r.answers,
                f"{r.seconds:.1f}",
                f"{r.ticks / TICK / r.answers * 1e6:.0f}",
                f"{r.ns / r.answers / 1000:.0f}",
                f"{each.mean:.0f}",
                f"{each.p50:.0f}",
                f"{each.p95:.0f}",
            ]
        )
    print(
        c.table(
            [
                "run",
                "answers",
                "seconds",
                "whole run µs/answer (/proc stat)",
                "whole run µs/answer (schedstat)",
                "the answer's own µs: mean",
                "p50",
                "p95",
            ],
            rows,
        )
    )
    print(
        f"\nidle: {quiet.ns / 1e6:.1f} ms of CPU in {quiet.seconds:.1f} s "
        f"({quiet.ticks} ticks); {args.sessions} sessions; load average {os.getloadavg()[0]:.2f}"
    )
    c.save_json(
        "answer_cost",
        {"idle": vars(quiet), "runs": [vars(r) for r in runs]},
    )


if __name__ == "__main__":
    main()
