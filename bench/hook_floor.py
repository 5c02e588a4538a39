"""What a command hook costs against the floors: the native client (clients/ctxd_hook.c, as
`ctxd install` builds it), the Python client, and the plugin's command, each run the way the
agents run a hook (`sh -c COMMAND`, the payload on stdin), interleaved round by round with

  - `sh -c true`: the shell alone, the least any command hook costs;
  - `sh -c ./empty`: an empty C program (`int main(void){return 0;}`, built by the same compiler
    and flags): what starting any program from the shell costs;
  - `sh -c 'python3 -S -I -c pass'`: the Python start-up floor;
  - one Unix-socket round trip: the same hook request sent to the same daemon from this process
    (connect, send, the daemon's answer), no process started. `sh -c true` plus this is the
    physical limit of a command hook.

A real daemon answers every hook (counted). Wall time from posix_spawn to wait4; CPU is user +
system from wait4 (the shell and what it execs); instructions from `perf stat -e instructions`
where the machine exposes the counter (every process), else `valgrind --tool=callgrind` on the
hook's program without its shell (callgrind drops the count of an image replaced by `exec`; the
shell's share is the `sh -c true` row; a shell line that ends in `exec` counts its last
program); a few runs each, median. The load average is printed before and after.

    .venv/bin/python bench/hook_floor.py [--runs 200] [--instruction-runs 3]
"""

from __future__ import annotations

import argparse
import os
import shlex
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import common as c
import ctxd_wire
from hook_roundtrip import SESSION_ID, Command, Timing, run_once

SH_TRUE = "sh -c true"
EMPTY_C = "sh -c ./empty (a C program that returns at once)"
PYTHON_FLOOR = "sh -c 'python3 -S -I -c pass' (the Python floor)"
ROUND_TRIP = "one Unix-socket round trip (in process)"
NATIVE = "ctxd install's command, native client"
PYTHON = "ctxd install's command, Python client"
PLUGIN_NATIVE = "plugin command, per-user native client"
PLUGIN_PYTHON = "plugin command, per-user Python client"
CONSOLE = "ctxd-hook claude (console script, the plugin before)"


def round_trip(path: str, request: bytes) -> float:
    """Wall ms of one hook request and its whole answer over the socket."""
    start = time.perf_counter()
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.connect(path)
        sock.sendall(request)
        ctxd_wire.read_frame(sock, ctxd_wire.MAX_RESPONSE)
    return (time.perf_counter() - start) * 1000


def perf_works() -> bool:
    """Whether `perf stat` counts instructions here (many VMs expose no hardware counters)."""
    if shutil.which("perf") is None:
        return False
    done = subprocess.run(
        ["perf", "stat", "-x,", "-e", "instructions", "--", "true"],
        capture_output=True,
        check=False,
    )
    return any(line.split(",")[0].isdigit() for line in done.stderr.decode().splitlines())


def perf_instructions(command: Command, env: dict[str, str]) -> int | None:
    """Instructions of one run by `perf stat` (user and kernel, every process)."""
    argv = ["perf", "stat", "-x,", "-e", "instructions", "--", *command.argv]
    with open(command.stdin or os.devnull, "rb") as stdin:
        done = subprocess.run(
            argv, stdin=stdin, env={**env, **command.env}, capture_output=True, check=False
        )
    for line in done.stderr.decode(errors="replace").splitlines():
        fields = line.split(",")
        if len(fields) > 2 and fields[2].startswith("instructions"):
            return int(fields[0]) if fields[0].isdigit() else None
    return None


def program(command: Command) -> Command:
    """The command without its `sh -c` when it is one plain program: callgrind loses the count
    of a process image replaced by `exec`, and the shell's share is the `sh -c true` row."""
    line = command.argv[2] if command.argv[1:2] == ["-c"] else ""
    if not line or any(ch in line for ch in ";&|$<>`") or line == "true":
        return command
    return Command(command.name, shlex.split(line), command.stdin, command.env)


def callgrind_instructions(command: Command, env: dict[str, str]) -> int | None:
    """Instructions executed in user space under callgrind by the hook's program alone (see
    `program`); for a shell line that ends in `exec`, by the program it execs last."""
    if shutil.which("valgrind") is None:
        return None
    command = program(command)
    with tempfile.TemporaryDirectory(prefix="ctxd-cg-") as out:
        argv = [
            "valgrind",
            "--tool=callgrind",
            "--trace-children=yes",
            f"--callgrind-out-file={out}/cg.%p",
            "--log-file=/dev/null",
            *command.argv,
        ]
        with open(command.stdin or os.devnull, "rb") as stdin:
            subprocess.run(
                argv,
                stdin=stdin,
                stdout=subprocess.DEVNULL,
                env={**env, **command.env},
                check=False,
            )
        total = 0
        for name in os.listdir(out):
            for line in Path(out, name).read_text(errors="replace").splitlines():
                if line.startswith("summary:") or line.startswith("totals:"):
                    total += int(line.split()[1])
                    break
        return total or None


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--warmup", type=int, default=10)
    parser.add_argument("--instruction-runs", type=int, default=3)
    args = parser.parse_args()

    from ctxd.agents.hookcmd import hook_command, install_client, plugin_command
    from ctxd.agents.nativeclient import FLAGS, client_choice, find_compiler

    sh = shutil.which("sh") or "/bin/sh"
    bin_dir = Path(c.PYTHON).parent
    c.header("A command hook against its floors (PostToolUse)", shlex.join([c.PYTHON, *sys.argv]))
    load_before = os.getloadavg()

    with c.sandbox("floor") as box:
        native_data = str(box.root / "data-native")
        python_data = str(box.root / "data-python")
        native_env = {**box.env, "XDG_DATA_HOME": native_data, "CTXD_HOOK_CLIENT": "native"}
        python_env = {**box.env, "XDG_DATA_HOME": python_data, "CTXD_HOOK_CLIENT": "python"}
        install_client(native_env)
        install_client(python_env)
        native_command = hook_command("claude", env=native_env)
        python_command = hook_command("claude", env=python_env)
        choice = client_choice(Path(native_data) / "ctxd" / "client", native_env)
        box.env["PATH"] = f"{bin_dir}{os.pathsep}{box.env.get('PATH', '/usr/bin:/bin')}"
        cwd = str(box.root / "work")
        transcript = c.place_claude_transcript(
            box, c.CLAUDE_TRANSCRIPT.read_bytes(), SESSION_ID, cwd
        )
        payload = box.root / "post-tool-use.json"
        payload.write_bytes(c.claude_payload(SESSION_ID, transcript, cwd))
        request = ctxd_wire.hook_request("claude", None, payload.read_bytes(), b"{}")
        python3 = shlex.quote(c.REAL_PYTHON)
        empty = box.root / "empty"
        compiler = find_compiler(box.env) or "cc"
        (box.root / "empty.c").write_text("int main(void) { return 0; }\n")
        subprocess.run([compiler, *FLAGS, "-o", str(empty), str(box.root / "empty.c")], check=True)
        commands = [
            Command(SH_TRUE, [sh, "-c", "true"]),
            Command(EMPTY_C, [sh, "-c", shlex.quote(str(empty))]),
            Command(PYTHON_FLOOR, [sh, "-c", f"{python3} -S -I -c pass"]),
            Command(NATIVE, [sh, "-c", native_command], payload),
            Command(PYTHON, [sh, "-c", python_command], payload),
            Command(
                PLUGIN_NATIVE,
                [sh, "-c", plugin_command("claude")],
                payload,
                {"XDG_DATA_HOME": native_data},
            ),
            Command(
                PLUGIN_PYTHON,
                [sh, "-c", plugin_command("claude")],
                payload,
                {"XDG_DATA_HOME": python_data},
            ),
            Command(CONSOLE, [sh, "-c", "ctxd-hook claude"], payload),
        ]
        hooks = sum(cmd.stdin is not None for cmd in commands)
        times = {cmd.name: Timing([], []) for cmd in commands}
        trips: list[float] = []
        instructions: dict[str, list[int]] = {cmd.name: [] for cmd in commands}
        with c.running_daemon(box):
            path = str(box.socket)
            before = c.status(box)["hooks_answered"]
            for round_ in range(args.warmup + args.runs):
                for cmd in commands:
                    wall, cpu = run_once(cmd, box.env)
                    if round_ >= args.warmup:
                        times[cmd.name].wall_ms.append(wall)
                        times[cmd.name].cpu_ms.append(cpu)
                trip = round_trip(path, request)
                if round_ >= args.warmup:
                    trips.append(trip)
            perf = perf_works()
            counter = "perf stat (user + kernel, every process)"
            if not perf:
                counter = "callgrind (user space, the hook's program without the shell)"
            for _ in range(args.instruction_runs):
                for cmd in commands:
                    count = (perf_instructions if perf else callgrind_instructions)(cmd, box.env)
                    if count:
                        instructions[cmd.name].append(count)
            answered = c.status(box)["hooks_answered"] - before
    load_after = os.getloadavg()

    walls = {name: c.summarize(t.wall_ms) for name, t in times.items()}
    cpus = {name: c.summarize(t.cpu_ms) for name, t in times.items()}
    trip_stats = c.summarize(trips)
    floor = cpus[PYTHON_FLOOR].p50
    floor_wall = walls[PYTHON_FLOOR].p50
    rows = []
    for cmd in commands:
        runs = instructions[cmd.name]
        rows.append(
            [
                cmd.name,
                walls[cmd.name].p50,
                walls[cmd.name].p95,
                cpus[cmd.name].p50,
                f"{walls[cmd.name].p50 / floor_wall:.2f}×",
                f"{cpus[cmd.name].p50 / floor:.2f}×",
                f"{statistics.median(runs) / 1e6:.2f} M" if runs else "–",
            ]
        )
    rows.insert(2, [ROUND_TRIP, trip_stats.p50, trip_stats.p95, float("nan"), "", "", "–"])
    print(
        c.table(
            [
                "command (via sh -c)",
                "wall p50 ms",
                "wall p95 ms",
                "CPU p50 ms",
                "wall × floor",
                "CPU × floor",
                "instructions",
            ],
            rows,
        )
    )
    limit = walls[SH_TRUE].p50 + trip_stats.p50
    native_wall = walls[NATIVE].p50
    ok_limit = native_wall <= 1.5 * limit
    counts = {name: statistics.median(n) if n else None for name, n in instructions.items()}
    native_count, floor_count = counts[NATIVE], counts[PYTHON_FLOOR]
    ok_floor = cpus[NATIVE].p50 <= 0.2 * floor and (
        native_count is None or floor_count is None or native_count <= 0.2 * floor_count
    )
    # The timed hooks, the round trips (the same request), the counted runs.
    expected = (args.runs + args.warmup) * (hooks + 1) + args.instruction_runs * hooks
    ok_answered = answered == expected
    print(f"\nhook client built: {choice.describe()}")
    print(f"instructions counted by: {counter}")
    print(
        f"native within 1.5× of `sh -c true` + one round trip ({limit:.2f} ms wall): "
        f"{native_wall:.2f} ms = {native_wall / limit:.2f}×, {c.verdict(ok_limit)}"
    )
    print(
        f"native at most 0.2× the Python floor: CPU {cpus[NATIVE].p50 / floor:.2f}×, "
        + (
            f"instructions {native_count / floor_count:.3f}×, "
            if native_count and floor_count
            else ""
        )
        + f"wall {native_wall / floor_wall:.2f}× (the wall includes the daemon's answer), "
        f"{c.verdict(ok_floor)}"
    )
    print(
        f"native over the empty C program: CPU +{cpus[NATIVE].p50 - cpus[EMPTY_C].p50:.2f} ms, "
        f"wall +{native_wall - walls[EMPTY_C].p50:.2f} ms (its own work and the daemon's answer)"
    )
    print(f"every hook answered by the daemon: {answered} of {expected}, {c.verdict(ok_answered)}")
    print(
        "load average (1, 5, 15 min) before: "
        + ", ".join(f"{x:.2f}" for x in load_before)
        + "; after: "
        + ", ".join(f"{x:.2f}" for x in load_after)
    )
    print("\ncommands:")
    for cmd in commands:
        print(f"  {cmd.name}: {cmd.shell()}")
    c.save_json(
        "hook_floor",
        {
            "machine": c.machine(),
            "runs": args.runs,
            "commands": {cmd.name: cmd.shell() for cmd in commands},
            "wall_ms": {n: t.wall_ms for n, t in times.items()},
            "cpu_ms": {n: t.cpu_ms for n, t in times.items()},
            "round_trip_ms": trips,
            "instructions": instructions,
            "load": [load_before, load_after],
            "answered": answered,
        },
    )
    return 0 if ok_limit and ok_floor and ok_answered else 1


if __name__ == "__main__":
    raise SystemExit(main())
