"""`ctxd status` against the interpreter's floor: what a poller (a tmux line, a menu bar) pays
per call, as a whole process.

A real daemon tracking SESSIONS Claude sessions. Each command runs as the agents and the
pollers run theirs, through `sh -c`, RUNS times, interleaved (one of each in turn, so that the
machine's load falls on all alike), as a fresh process:
  - `sh -c true` (the shell alone);
  - the floor: the real interpreter doing nothing (`python3 -S -I -c pass`);
  - the console script's floor: the venv's interpreter with its site start-up (`.pth` files of
    an editable install included) and the `import re` pip's wrapper does, nothing else; and
    the same without `import re` (the wrapper pip >= 25.2 and uv write);
  - `ctxd status`, `ctxd status --json` (the console script pip writes);
  - the front door as a stdlib client, run as the hook command runs the hook client:
    `python3 -S -I -c 'import sys; sys.path[:0] = [DIR]; import ctxd_status as s; ...'`;
  - `ctxd status` with no daemon running (the one-line next step);
  - with `--before VENV`: `ctxd status` and `--json` of another install (another checkout's
    venv, e.g. main's) against the same daemon, interleaved with the rest.
`--venv VENV` measures the `ctxd` (and the console floors) of another venv than the one running
this script, e.g. one where ctxd is installed as the README says, not editable; the daemon is
always this checkout's.
Every checkout's bytecode is compiled first and PYTHONDONTWRITEBYTECODE is dropped from the
environment: what an installed ctxd runs (pip compiles on install).
Measured per run: wall time, and the CPU time of the shell and everything it waited for (the
rusage `wait4` returns). Then the instructions each one executes (user space, the shell and its
children), counted by `perf stat -e instructions:u` where the kernel lets us, else by valgrind's
callgrind (`--trace-children=yes`, every process's total summed) over INSTRUCTION_RUNS runs.

    .venv/bin/python bench/status_floor.py [--runs 40] [--sessions 40] [--instruction-runs 3]
        [--before OTHER/.venv] [--venv VENV]
"""

from __future__ import annotations

import argparse
import os
import re
import shlex
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

import common as c
from line_cost import track_sessions

BIN = Path(c.PYTHON).parent
SHELL = "/bin/sh"


def commands(bin_dir: Path, before: Path | None) -> dict[str, str]:
    """Each measured command, as the shell line `sh -c` runs (`bin_dir`: the venv's bin)."""
    ctxd = shlex.quote(str(bin_dir / "ctxd"))
    python = shlex.quote(str(bin_dir / "python3"))
    client = subprocess.run(
        [bin_dir / "python3", "-c", "import ctxd_status; print(ctxd_status.__file__)"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    other = {}
    if before is not None:
        old = shlex.quote(str(before / "bin" / "ctxd"))
        other = {
            "before: ctxd status": f"{old} status",
            "before: ctxd status --json": f"{old} status --json",
        }
    return {
        **other,
        "sh -c true": "true",
        "floor: python3 -S -I -c pass": f"{shlex.quote(c.REAL_PYTHON)} -S -I -c pass",
        CONSOLE: f"{python} -c 'import re'",
        NO_RE: f"{python} -c pass",
        "ctxd status": f"{ctxd} status",
        "ctxd status --json": f"{ctxd} status --json",
        STDLIB: (
            f"{shlex.quote(c.REAL_PYTHON)} -S -I -c "
            + shlex.quote(
                f"import sys; sys.path[:0] = [{os.path.dirname(client)!r}]; "
                "import ctxd_status as s; raise SystemExit(s.status_main())"
            )
        ),
    }


CONSOLE = "console-script floor: venv python3 -c 'import re'"
STDLIB = "stdlib client: python3 -S -I -c 'import ctxd_status ...'"
NO_RE = "console-script floor, no `import re`: venv python3 -c pass"


def compile_bytecode(venv: Path) -> None:
    """Bytecode for the ctxd `venv` runs (an editable install's sources; pip compiled an
    installed copy already, compiling again changes nothing)."""
    python = venv / "bin" / "python"
    source = subprocess.run(
        [python, "-c", "import ctxd, os; print(os.path.dirname(os.path.dirname(ctxd.__file__)))"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    for part in ("ctxd", "clients"):
        subprocess.run(
            [python, "-m", "compileall", "-q", os.path.join(source, part)],
            env=env,
            capture_output=True,
            check=True,
        )


def run_once(line: str, env: dict[str, str]) -> tuple[float, float, int]:
    """(wall ms, CPU ms of the shell and its children, exit status) of one `sh -c line`."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        start = time.perf_counter()
        pid = os.posix_spawn(
            SHELL,
            [SHELL, "-c", line],
            env,
            file_actions=[
                (os.POSIX_SPAWN_DUP2, devnull, 1),
                (os.POSIX_SPAWN_DUP2, devnull, 2),
            ],
        )
        _, status, usage = os.wait4(pid, 0)
        wall = (time.perf_counter() - start) * 1000
    finally:
        os.close(devnull)
    return wall, (usage.ru_utime + usage.ru_stime) * 1000, os.waitstatus_to_exitcode(status)


def perf_supported() -> bool:
    if shutil.which("perf") is None:
        return False
    done = subprocess.run(
        ["perf", "stat", "-x,", "-e", "instructions:u", "true"], capture_output=True, text=True
    )
    return done.returncode == 0 and "not supported" not in done.stderr


def instructions_perf(line: str, env: dict[str, str]) -> int:
    done = subprocess.run(
        ["perf", "stat", "-x,", "-e", "instructions:u", SHELL, "-c", line],
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    for row in done.stderr.splitlines():
        fields = row.split(",")
        if len(fields) > 2 and fields[2].startswith("instructions"):
            return int(fields[0])
    raise RuntimeError(f"perf stat printed no count: {done.stderr.strip()}")


def instructions_callgrind(line: str, env: dict[str, str]) -> int:
    """Instructions of `sh -c line` and every process it starts, under callgrind."""
    with tempfile.TemporaryDirectory(prefix="ctxd-bench-cg-", dir=env.get("TMPDIR")) as out:
        subprocess.run(
            [
                "valgrind",
                "--tool=callgrind",
                "--trace-children=yes",
                f"--callgrind-out-file={out}/cg.%p",
                SHELL,
                "-c",
                line,
            ],
            env=env,
            capture_output=True,
            check=False,
        )
        total = 0
        for path in Path(out).iterdir():
            found = re.search(rb"^(?:summary|totals): (\d+)", path.read_bytes(), re.MULTILINE)
            if found:
                total += int(found.group(1))
        return total


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=40)
    parser.add_argument("--sessions", type=int, default=40)
    parser.add_argument("--instruction-runs", type=int, default=3)
    parser.add_argument("--before", type=Path, help="another checkout's venv, measured too")
    parser.add_argument("--venv", type=Path, help="the venv whose ctxd is measured (default: ours)")
    args = parser.parse_args()
    venv = args.venv.absolute() if args.venv else BIN.parent
    c.header(
        "`ctxd status` against the interpreter's floor",
        f".venv/bin/python bench/status_floor.py --runs {args.runs} --sessions {args.sessions} "
        f"--instruction-runs {args.instruction_runs}"
        + (" --before OTHER/.venv" if args.before else "")
        + (f" --venv {args.venv}" if args.venv else ""),
    )
    for measured in (venv, *([args.before] if args.before else [])):
        compile_bytecode(measured)
    use_perf = perf_supported()
    count = instructions_perf if use_perf else instructions_callgrind
    counter = "perf stat -e instructions:u" if use_perf else "valgrind --tool=callgrind"
    lines = commands(venv / "bin", args.before)
    wall: dict[str, list[float]] = {name: [] for name in lines}
    cpu: dict[str, list[float]] = {name: [] for name in lines}
    instructions: dict[str, list[int]] = {name: [] for name in lines}
    with c.sandbox("status-floor") as box:
        env = {**box.env, "PATH": f"{BIN}:{box.env['PATH']}"}
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        with c.running_daemon(box) as daemon:
            track_sessions(box, args.sessions)
            for name, line in lines.items():  # warm up, and every command must succeed
                if run_once(line, env)[2] != 0:
                    raise RuntimeError(f"{name!r} failed")
            for _ in range(args.runs):
                for name, line in lines.items():
                    took, used, _ = run_once(line, env)
                    wall[name].append(took)
                    cpu[name].append(used)
            for _ in range(args.instruction_runs):
                for name, line in lines.items():
                    instructions[name].append(count(line, env))
            daemon_cpu = c.proc_cpu_seconds(daemon.pid)
        off = "ctxd status, no daemon"
        wall[off], cpu[off], instructions[off] = [], [], []
        for _ in range(args.runs):
            took, used, _ = run_once(lines["ctxd status"], env)
            wall[off].append(took)
            cpu[off].append(used)
        for _ in range(args.instruction_runs):
            instructions[off].append(count(lines["ctxd status"], env))
    floor = "floor: python3 -S -I -c pass"
    # The floor of the wrapper pip wrote here: with `import re` (pip < 25.2) or without.
    console = CONSOLE if b"import re" in (venv / "bin" / "ctxd").read_bytes() else NO_RE
    floor_cpu = c.summarize(cpu[floor]).p50
    console_cpu = c.summarize(cpu[console]).p50
    floor_ins = min(instructions[floor])
    console_ins = min(instructions[console])
    rows = []
    for name in wall:
        w, u = c.summarize(wall[name]), c.summarize(cpu[name])
        ins = min(instructions[name])
        rows.append(
            [
                name,
                w.p50,
                w.p95,
                u.p50,
                f"{ins / 1e6:.1f} M",
                f"{u.p50 / floor_cpu:.2f}× / {u.p50 / console_cpu:.2f}×",
                f"{ins / floor_ins:.2f}× / {ins / console_ins:.2f}×",
            ]
        )
    print(
        c.table(
            [
                "command (through sh -c)",
                "wall p50 ms",
                "wall p95 ms",
                "CPU p50 ms",
                "instructions (min)",
                "CPU / floor / console floor",
                "instructions / floor / console floor",
            ],
            rows,
        )
    )
    print(
        f"\n{args.sessions} live sessions; ctxd of {venv}; instructions by {counter}; "
        f"load average {os.getloadavg()[0]:.2f}; the daemon's CPU {daemon_cpu:.2f} s in all"
    )
    c.save_json("status_floor", {"wall": wall, "cpu": cpu, "instructions": instructions})


if __name__ == "__main__":
    main()
