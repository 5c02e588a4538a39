"""The tmux line's cost: what tmux pays every `status-interval` for `ctxd-line`, against the
interpreter's floor and against `ctxd status`.

A real daemon tracking SESSIONS Claude sessions, each in a directory of its own; each command
is run RUNS times, interleaved (one of each in turn, so that the machine's load falls on all
alike), as a fresh process, asking about one session's directory:
  - the floor: the real interpreter doing nothing (`python3 -S -I -c pass`);
  - `python3 -S -I clients/ctxd_line.py --cwd DIR` (the stdlib client, no site-packages);
  - `ctxd-line --cwd DIR` (the entry point pip writes: the venv's site start-up on top);
  - `ctxd line --cwd DIR` (the CLI's fast path, straight to the same client);
  - `ctxd status` (the full CLI, the whole document rendered);
  - `ctxd-line` with no daemon (what tmux pays while ctxd is off).

    .venv/bin/python bench/line_cost.py [--runs 60] [--sessions 50]
"""

from __future__ import annotations

import argparse
import subprocess
import time
import uuid
from pathlib import Path

import common as c

BIN = Path(c.PYTHON).parent
CLIENT = c.REPO / "clients" / "ctxd_line.py"


def track_sessions(box: c.Sandbox, count: int) -> list[str]:
    """`count` live sessions, one per directory; their directories."""
    template = c.assistant_line()
    cwds = []
    for n in range(count):
        sid = str(uuid.uuid4())
        cwd = str(box.root / "work" / f"proj-{n}")
        Path(cwd).mkdir(parents=True, exist_ok=True)
        content = c.assistant_append(template, sid, 20_000 + 1000 * n)
        path = c.place_claude_transcript(box, content, sid, cwd)
        payload = c.claude_payload(sid, path, cwd)
        c.request(box.socket, "hook", payload, agent="claude", event="PostToolUse")
        cwds.append(cwd)
    c.wait_sessions(box, count, 30.0)
    return cwds


def timed(argv: list[str], env: dict[str, str]) -> tuple[float, bytes]:
    start = time.perf_counter()
    done = subprocess.run(argv, env=env, capture_output=True, check=False)
    return (time.perf_counter() - start) * 1000, done.stdout


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=60)
    parser.add_argument("--sessions", type=int, default=50)
    args = parser.parse_args()
    c.header(
        "The tmux line's cost",
        f".venv/bin/python bench/line_cost.py --runs {args.runs} --sessions {args.sessions}",
    )
    with c.sandbox("line") as box:
        env = {**box.env, "PATH": f"{BIN}:{box.env['PATH']}"}
        with c.running_daemon(box):
            cwd = track_sessions(box, args.sessions)[args.sessions // 2]
            commands = {
                "floor: python3 -S -I -c pass": [c.REAL_PYTHON, "-S", "-I", "-c", "pass"],
                "python3 -S -I ctxd_line.py": [
                    c.REAL_PYTHON,
                    "-S",
                    "-I",
                    str(CLIENT),
                    "--cwd",
                    cwd,
                ],
                "ctxd-line (entry point)": [str(BIN / "ctxd-line"), "--cwd", cwd],
                "ctxd line (CLI)": [str(BIN / "ctxd"), "line", "--cwd", cwd],
                "ctxd status (CLI)": [str(BIN / "ctxd"), "status"],
            }
            samples: dict[str, list[float]] = {name: [] for name in commands}
            shown = {name: timed(argv, env)[1] for name, argv in commands.items()}  # warm up
            for _ in range(args.runs):
                for name, argv in commands.items():
                    samples[name].append(timed(argv, env)[0])
        # The daemon is gone: what tmux pays while ctxd is off.
        off = "ctxd-line, no daemon"
        samples[off] = [
            timed([str(BIN / "ctxd-line"), "--cwd", cwd], env)[0] for _ in range(args.runs)
        ]
    floor = c.summarize(samples["floor: python3 -S -I -c pass"]).p50
    rows = []
    for name, values in samples.items():
        s = c.summarize(values)
        rows.append([name, s.p50, s.p95, s.max, s.p50 - floor])
    print(c.table(["command", "p50 ms", "p95 ms", "max ms", "p50 over the floor ms"], rows))
    print(f"\nthe line printed: {shown['python3 -S -I ctxd_line.py'].decode().strip()}")
    c.save_json("line_cost", {"samples": samples})


if __name__ == "__main__":
    main()
