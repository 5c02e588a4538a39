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
from pathlib import Path

import common as c

TARGET_RSS_MB = 60.0
# One clock tick of /proc accounting; "no measurable CPU" means below what a tick per 30 s is.
TICK_S = 1 / os.sysconf("SC_CLK_TCK")


def threads_cpu(pid: int) -> dict[str, float]:
    """CPU seconds per thread name (the asyncio loop, the watcher's Rust thread, ...)."""
    found: dict[str, float] = {}
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            text = (task / "stat").read_text()
        except OSError:
            continue
        name = text[text.index("(") + 1 : text.rindex(")")]
        fields = text.rsplit(")", 1)[1].split()
        found[name] = found.get(name, 0.0) + (int(fields[11]) + int(fields[12])) * TICK_S
    return found


def idle_cpu(pid: int, seconds: float) -> tuple[float, dict[str, float]]:
    before_total = c.proc_cpu_seconds(pid)
    before = threads_cpu(pid)
    time.sleep(seconds)
    after = threads_cpu(pid)
    per_thread = {name: after[name] - before.get(name, 0.0) for name in after}
    return c.proc_cpu_seconds(pid) - before_total, per_thread


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
        empty_cpu, empty_threads = idle_cpu(pid, args.baseline)

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
        loaded_cpu, loaded_threads = idle_cpu(pid, args.idle)
        after = c.proc_memory_kib(pid)
        snapshot_kib = state_file.stat().st_size / 1024 if state_file.exists() else 0.0

    mib = 1 / 1024
    rss_mb = loaded["VmRSS"] * 1024 / 1e6
    print(
        c.table(
            [
                "phase",
                "sessions",
                "VmRSS MiB",
                "RssAnon MiB",
                "RssFile MiB",
                "VmHWM MiB",
                "idle s",
                "CPU s",
                "CPU % of a core",
            ],
            [
                [
                    "started, nothing tracked",
                    0,
                    empty["VmRSS"] * mib,
                    empty["RssAnon"] * mib,
                    empty["RssFile"] * mib,
                    empty["VmHWM"] * mib,
                    args.baseline,
                    empty_cpu,
                    f"{empty_cpu / args.baseline * 100:.2f}",
                ],
                [
                    f"{found:,} sessions tracked",
                    found,
                    loaded["VmRSS"] * mib,
                    loaded["RssAnon"] * mib,
                    loaded["RssFile"] * mib,
                    loaded["VmHWM"] * mib,
                    args.idle,
                    loaded_cpu,
                    f"{loaded_cpu / args.idle * 100:.2f}",
                ],
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
            f"no measurable CPU over {args.idle:g} s idle",
            f"{loaded_cpu:.2f} s ({loaded_cpu / args.idle * 1000:.1f} ms/s)",
            c.verdict(loaded_cpu <= TICK_S),
        ],
    ]
    print(c.table(["target", "measured", "verdict"], checks))
    print(
        f"\n{found:,} of {args.sessions:,} discovered in {discovery:.1f} s; "
        f"≈ {per_session:.1f} KiB RSS per session; snapshot {snapshot_kib:,.0f} KiB; "
        f"RSS after the idle window {after['VmRSS'] * mib:.1f} MiB"
    )
    print(
        "idle CPU by thread, nothing tracked: "
        + ", ".join(f"{n} {s:.2f} s" for n, s in sorted(empty_threads.items()))
    )
    print(
        f"idle CPU by thread, {found:,} tracked: "
        + ", ".join(f"{n} {s:.2f} s" for n, s in sorted(loaded_threads.items()))
    )
    c.save_json(
        "memory_idle",
        {
            "machine": c.machine(),
            "args": vars(args),
            "empty": empty,
            "loaded": loaded,
            "empty_cpu_s": empty_cpu,
            "loaded_cpu_s": loaded_cpu,
            "found": found,
            "threads_empty": empty_threads,
            "threads_loaded": loaded_threads,
        },
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
