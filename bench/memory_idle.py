"""Benchmark 4: the daemon's memory with 1,000 tracked sessions, and its CPU use when idle.

A real `ctxd serve` starts with nothing to track; its RSS and its CPU over --baseline seconds of
idleness are taken. Then 1,000 small transcripts (a real Claude Code 2.1.332 transcript without
its large blob lines) are written under $CLAUDE_CONFIG_DIR/projects/<slug>/<uuid>.jsonl and the
watcher discovers them (the project dirs are made first and given a moment, so that the
new-directory race that benchmark 3 reports does not leave sessions out). Once all are tracked
and the state snapshot is written, RSS is read from /proc/<pid>/status and CPU (utime + stime
of all threads, /proc/<pid>/stat) over --idle seconds with no activity at all.

Targets: RSS ≤ 60 MB with 1,000 sessions; no measurable CPU when idle (the figure is reported).

    .venv/bin/python bench/memory_idle.py [--sessions 1000] [--idle 30] [--settle 35]
"""

from __future__ import annotations

import argparse
import os
import sys
import time
import uuid
from dataclasses import asdict, dataclass
from pathlib import Path

import common as c

TARGET_RSS_MB = 60.0
# One clock tick of /proc/<pid>/stat accounting (what top and ps show): "no measurable CPU"
# means less than one tick over the whole idle window, measured at nanoseconds (schedstat).
TICK_MS = 1000 / os.sysconf("SC_CLK_TCK")


@dataclass(frozen=True)
class ThreadUse:
    cpu_ns: int  # time on a CPU, /proc/<pid>/task/<tid>/schedstat (nanoseconds)
    wakeups: int  # voluntary context switches: each is a sleep that something ended


def threads_use(pid: int) -> dict[str, ThreadUse]:
    """CPU time and wake-ups per thread name: "main" (the event loop), "python" (the worker
    thread that runs the watcher's Rust loop), "notify-rs inotify" (its inotify reader)."""
    found: dict[str, ThreadUse] = {}
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            cpu_ns = int((task / "schedstat").read_text().split()[0])
            status = (task / "status").read_text()
        except (OSError, ValueError, IndexError):
            continue  # the thread ended meanwhile
        fields = dict(line.split(":\t", 1) for line in status.splitlines() if ":\t" in line)
        name = "main" if task.name == str(pid) else fields.get("Name", "?").strip()
        wakeups = int(fields.get("voluntary_ctxt_switches", "0"))
        seen = found.get(name, ThreadUse(0, 0))
        found[name] = ThreadUse(seen.cpu_ns + cpu_ns, seen.wakeups + wakeups)
    return found


@dataclass(frozen=True)
class Idle:
    seconds: float
    ticks_s: float  # utime + stime of the whole process (exited threads too), 10 ms ticks
    threads: dict[str, ThreadUse]  # per thread name, over the window

    @property
    def cpu_ms(self) -> float:
        return sum(t.cpu_ns for t in self.threads.values()) / 1e6

    @property
    def wakeups_per_s(self) -> float:
        return sum(t.wakeups for t in self.threads.values()) / self.seconds

    def by_thread(self) -> str:
        return ", ".join(
            f"{name} {use.cpu_ns / 1e6:.1f} ms / {use.wakeups / self.seconds:.1f} wake-ups/s"
            for name, use in sorted(self.threads.items())
        )


def idle_use(pid: int, seconds: float) -> Idle:
    before_ticks = c.proc_cpu_seconds(pid)
    before = threads_use(pid)
    time.sleep(seconds)
    after = threads_use(pid)
    ticks = c.proc_cpu_seconds(pid) - before_ticks
    zero = ThreadUse(0, 0)
    threads = {
        name: ThreadUse(
            use.cpu_ns - before.get(name, zero).cpu_ns, use.wakeups - before.get(name, zero).wakeups
        )
        for name, use in after.items()
    }
    return Idle(seconds, ticks, threads)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=1000)
    parser.add_argument("--projects", type=int, default=100)
    parser.add_argument("--idle", type=float, default=30.0, help="idle seconds with sessions")
    parser.add_argument("--baseline", type=float, default=10.0, help="idle seconds, no sessions")
    parser.add_argument(
        "--settle",
        type=float,
        default=35.0,
        help="quiet seconds before each idle window: the daemon slows its watcher after 30 s "
        "without a transcript change (ctxd.daemon.QUIET_AFTER), and idle means after that",
    )
    args = parser.parse_args()

    c.header(
        "Memory and idle CPU", " ".join([".venv/bin/python bench/memory_idle.py", *sys.argv[1:]])
    )
    content = c.small_transcript()
    with c.sandbox("memory") as box, c.running_daemon(box) as daemon:
        pid = daemon.pid
        time.sleep(args.settle)
        empty = c.proc_memory_kib(pid)
        empty_idle = idle_use(pid, args.baseline)

        cwds = [f"/home/user/src/project-{i:03d}" for i in range(args.projects)]
        for cwd in cwds:
            (box.claude_projects / c.claude_slug(cwd)).mkdir(parents=True, exist_ok=True)
        time.sleep(0.5)
        created = time.monotonic()
        for i in range(args.sessions):
            session_id = str(uuid.uuid4())
            c.place_claude_transcript(box, content, session_id, cwds[i % len(cwds)])
        found, _ = c.wait_sessions(box, args.sessions, timeout=60)
        discovery = time.monotonic() - created
        tracked_at = time.time()
        # The housekeeping task writes the snapshot a few seconds after the last change; wait
        # for it, so that the idle window below is really idle.
        state_file = Path(box.env["XDG_STATE_HOME"]) / "ctxd" / "state.json"
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline and not (
            state_file.exists() and state_file.stat().st_mtime >= tracked_at
        ):
            time.sleep(0.2)
        time.sleep(args.settle)
        loaded = c.proc_memory_kib(pid)
        loaded_idle = idle_use(pid, args.idle)
        after = c.proc_memory_kib(pid)
        snapshot_kib = state_file.stat().st_size / 1024 if state_file.exists() else 0.0

    mib = 1 / 1024
    rss_mb = loaded["VmRSS"] * 1024 / 1e6
    phases = [("started, nothing tracked", 0, empty, empty_idle)]
    phases.append((f"{found:,} sessions tracked", found, loaded, loaded_idle))
    print(
        c.table(
            ["phase", "sessions", "VmRSS MiB", "RssAnon MiB", "RssFile MiB", "VmHWM MiB"],
            [
                [
                    name,
                    count,
                    mem["VmRSS"] * mib,
                    mem["RssAnon"] * mib,
                    mem["RssFile"] * mib,
                    mem["VmHWM"] * mib,
                ]
                for name, count, mem, _ in phases
            ],
        )
    )
    print()
    print(
        c.table(
            ["phase", "idle s", "CPU ms", "CPU ms/s", "% of a core", "wake-ups/s", "ticks s"],
            [
                [
                    name,
                    idle.seconds,
                    f"{idle.cpu_ms:.1f}",
                    f"{idle.cpu_ms / idle.seconds:.2f}",
                    f"{idle.cpu_ms / idle.seconds / 10:.3f}",
                    f"{idle.wakeups_per_s:.1f}",
                    f"{idle.ticks_s:.2f}",
                ]
                for name, _, _, idle in phases
            ],
        )
    )
    print()
    per_session = (loaded["VmRSS"] - empty["VmRSS"]) / max(found, 1)
    checks = [
        [
            f"RSS ≤ 60 MB with {args.sessions:,} sessions",
            f"{rss_mb:.1f} MB ({loaded['VmRSS'] * mib:.1f} MiB)",
            c.verdict(rss_mb <= TARGET_RSS_MB and found >= args.sessions),
        ],
        [
            f"no measurable CPU over {args.idle:g} s idle (under one {TICK_MS:g} ms tick)",
            f"{loaded_idle.cpu_ms:.1f} ms ({loaded_idle.cpu_ms / args.idle:.2f} ms/s)",
            c.verdict(loaded_idle.cpu_ms < TICK_MS and loaded_idle.ticks_s < 2 * TICK_MS / 1000),
        ],
    ]
    print(c.table(["target", "measured", "verdict"], checks))
    print(
        f"\n{found:,} of {args.sessions:,} discovered in {discovery:.1f} s; "
        f"≈ {per_session:.1f} KiB RSS per session; snapshot {snapshot_kib:,.0f} KiB; "
        f"RSS after the idle window {after['VmRSS'] * mib:.1f} MiB"
    )
    print(f"idle by thread, nothing tracked: {empty_idle.by_thread()}")
    print(f"idle by thread, {found:,} tracked: {loaded_idle.by_thread()}")
    c.save_json(
        "memory_idle",
        {
            "machine": c.machine(),
            "args": vars(args),
            "empty": empty,
            "loaded": loaded,
            "empty_idle": asdict(empty_idle),
            "loaded_idle": asdict(loaded_idle),
            "found": found,
        },
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
