"""Benchmark 1: what one PostToolUse hook costs the agent, side by side with the alternatives.

Runs, in one go and on the same machine state:
  - the floor: the real interpreter doing nothing (`python3 -S -I -c pass`), and the venv's
    interpreter (the one the installed hook names) doing the same;
  - the installed ctxd hook command (`ctxd.agents.hookcmd.hook_command("claude")`, verbatim)
    with a real PostToolUse payload on stdin, a real transcript behind it and a real daemon
    answering;
  - the same command with no daemon (fail-open path, CTXD_NO_SPAWN=1);
  - GSD's Node context monitor (`gsd-context-monitor.js` from npm `get-shit-done-cc`) with the same
    payload and a fresh statusline bridge file, as GSD users run it; and `node -e 0`.
Timing uses hyperfine when installed (shell start-up subtracted), else an interleaved loop.
Targets: ctxd hook ≤ 1.5× the floor, ≤ 0.2× GSD.

    .venv/bin/python bench/hook_roundtrip.py [--runs 100]
"""

from __future__ import annotations

import argparse
import atexit
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import common as c

SESSION_ID = "ce0bf2cd-2ea2-4b12-8b0f-a92dd2d7d425"  # the sample transcript's own session
GSD_PACKAGE = "get-shit-done-cc"
GSD_DIR = c.OUT / "gsd"
FLOOR_RATIO = 1.5
GSD_RATIO = 0.2
FLOOR = "floor: python3 -S -I -c pass (real binary)"
HOOK = "ctxd hook, daemon answering"


def gsd_script() -> Path | None:
    """`gsd-context-monitor.js`, installed with npm into bench/out/gsd on first use."""
    found = sorted(GSD_DIR.glob(f"node_modules/{GSD_PACKAGE}/**/gsd-context-monitor.js"))
    if not found and shutil.which("npm"):
        GSD_DIR.mkdir(parents=True, exist_ok=True)
        subprocess.run(
            ["npm", "install", "--no-audit", "--no-fund", "--ignore-scripts", GSD_PACKAGE],
            cwd=GSD_DIR,
            check=True,
            stdout=subprocess.DEVNULL,
            timeout=300,
        )
        found = sorted(GSD_DIR.glob(f"node_modules/{GSD_PACKAGE}/**/gsd-context-monitor.js"))
    # GSD's installer copies the built hooks/dist script into ~/.claude/hooks: run that one.
    candidates = [p for p in found if "dist" in p.parts] or found
    return candidates[0] if candidates else None


def gsd_version() -> str:
    try:
        doc = json.loads((GSD_DIR / "node_modules" / GSD_PACKAGE / "package.json").read_text())
        return str(doc.get("version", "?"))
    except OSError:
        return "?"


def write_gsd_bridge(tmpdir: Path, session_id: str, used_pct: float) -> None:
    """What GSD's statusline writes for the monitor: /tmp/claude-ctx-<session>.json."""
    remaining = round(100 - used_pct)
    bridge = {
        "session_id": session_id,
        "remaining_percentage": remaining,
        "used_pct": 100 - remaining,
        "timestamp": int(time.time()),
    }
    (tmpdir / f"claude-ctx-{session_id}.json").write_text(json.dumps(bridge))


@dataclass(frozen=True)
class Command:
    name: str
    argv: list[str]
    stdin: Path | None = None  # None: /dev/null
    env: dict[str, str] = field(default_factory=dict)  # on top of the sandbox's

    def shell(self) -> str:
        """The same command as one shell line (for hyperfine and for the record)."""
        prefix = "".join(f"{k}={shlex.quote(v)} " for k, v in self.env.items())
        source = shlex.quote(str(self.stdin)) if self.stdin else "/dev/null"
        return f"{prefix}{shlex.join(self.argv)} <{source}"


@dataclass(frozen=True)
class Timing:
    wall_ms: list[float]
    cpu_ms: list[float]  # user + system of the child, from wait4


def run_once(command: Command, env: dict[str, str]) -> tuple[float, float]:
    """(wall ms, cpu ms) of one run: posix_spawn and wait4, no shell in between."""
    actions = [
        (os.POSIX_SPAWN_OPEN, 0, str(command.stdin or os.devnull), os.O_RDONLY, 0),
        (os.POSIX_SPAWN_OPEN, 1, os.devnull, os.O_WRONLY, 0),
    ]
    start = time.perf_counter()
    pid = os.posix_spawnp(
        command.argv[0], command.argv, {**env, **command.env}, file_actions=actions
    )
    _, code, usage = os.wait4(pid, 0)
    wall = time.perf_counter() - start
    if code != 0:
        raise RuntimeError(f"{command.shell()} exited with status {code}")
    return wall * 1000, (usage.ru_utime + usage.ru_stime) * 1000


def run_interleaved(
    commands: list[Command], env: dict[str, str], runs: int, warmup: int
) -> dict[str, Timing]:
    """One run of each command per round: on a shared machine, load drift hits all alike."""
    times = {cmd.name: Timing([], []) for cmd in commands}
    for round_ in range(warmup + runs):
        for cmd in commands:
            wall, cpu = run_once(cmd, env)
            if round_ >= warmup:
                times[cmd.name].wall_ms.append(wall)
                times[cmd.name].cpu_ms.append(cpu)
    return times


def run_hyperfine(
    commands: list[Command], env: dict[str, str], runs: int, warmup: int, export: Path
) -> dict[str, Timing]:
    """hyperfine, commands one after another, shell start-up subtracted (no CPU split)."""
    argv = [
        "hyperfine",
        "--style",
        "none",
        "--warmup",
        str(warmup),
        "--runs",
        str(runs),
        "--shell",
        "sh",
        "--export-json",
        str(export),
    ]
    for cmd in commands:
        argv += ["--command-name", cmd.name, cmd.shell()]
    subprocess.run(argv, env=env, check=True, stdout=subprocess.DEVNULL)
    results = json.loads(export.read_text())["results"]
    return {r["command"]: Timing([t * 1000 for t in r["times"]], []) for r in results}


def import_times(argv: list[str], stdin: Path | None, env: dict[str, str]) -> list[tuple[str, int]]:
    """(module, cumulative µs) of a command's imports, largest first, from -X importtime.

    Nested imports keep their indentation. Each figure is the best of 5 runs (the first pays a
    cold cache)."""
    command = [argv[0], "-X", "importtime", *argv[1:]]
    best: dict[str, int] = {}
    for _ in range(5):
        with open(stdin or os.devnull, "rb") as source:
            done = subprocess.run(command, stdin=source, env=env, capture_output=True, check=False)
        for line in done.stderr.decode().splitlines():
            match = re.match(r"import time:\s+(\d+) \|\s+(\d+) \| (\s*)(\S+)", line)
            if match:
                name = match.group(3) + match.group(4)
                best[name] = min(int(match.group(2)), best.get(name, 1 << 62))
    return sorted(best.items(), key=lambda item: -item[1])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=100)
    parser.add_argument("--warmup", type=int, default=10)
    parser.add_argument(
        "--hyperfine",
        action="store_true",
        help="time with hyperfine (sequential) instead of the interleaved loop",
    )
    parser.add_argument(
        "--candidate",
        action="append",
        default=[],
        type=Path,
        metavar="CLIENT.py",
        help="also time this client file (.py or .pyc), run as `python -S -I FILE claude`",
    )
    args = parser.parse_args()

    from ctxd.agents.hookcmd import hook_command, install_client

    # The command `ctxd install` writes, running the client it copies (here into a scratch
    # data dir, so that the bench leaves the user's own copy alone).
    data_home = tempfile.mkdtemp(prefix="ctxd-bench-")
    atexit.register(shutil.rmtree, data_home, True)
    client_env = {**os.environ, "XDG_DATA_HOME": data_home}
    install_client(client_env)
    installed = hook_command("claude", env=client_env)
    hook_argv = shlex.split(installed)
    script = gsd_script()
    node = shutil.which("node")
    if args.hyperfine and not shutil.which("hyperfine"):
        parser.error("hyperfine is not installed")
    c.header(
        "Hook round trip (PostToolUse)",
        " ".join([".venv/bin/python bench/hook_roundtrip.py", *sys.argv[1:]]),
    )
    print(f"installed hook command: {installed}")
    how = (
        f"hyperfine {_hyperfine_version()}, commands in sequence"
        if args.hyperfine
        else "posix_spawn + wait4, commands interleaved round by round"
    )
    print(f"timing: {how}; {args.runs} runs after {args.warmup} warm-up runs per command\n")

    with c.sandbox("hook") as box:
        cwd = str(box.root / "work")
        transcript = c.place_claude_transcript(
            box, c.CLAUDE_TRANSCRIPT.read_bytes(), SESSION_ID, cwd
        )
        payload = box.root / "post-tool-use.json"
        payload.write_bytes(c.claude_payload(SESSION_ID, transcript, cwd))
        nowhere = {"CTXD_SOCKET": str(box.root / "nowhere" / "ctxd.sock"), "CTXD_NO_SPAWN": "1"}
        commands = [
            Command(FLOOR, [c.REAL_PYTHON, "-S", "-I", "-c", "pass"]),
            Command("floor: venv python -S -I -c pass", [c.PYTHON, "-S", "-I", "-c", "pass"]),
            Command(HOOK, hook_argv, payload),
            Command("ctxd hook, no daemon (fail-open)", hook_argv, payload, nowhere),
        ]
        for candidate in args.candidate:
            # Run as a script by the hook's interpreter, whatever form the installed command has.
            argv = [hook_argv[0], "-S", "-I", str(candidate.resolve()), "claude"]
            commands.append(Command(f"candidate {candidate.name}, daemon answering", argv, payload))
        if node:
            commands.append(Command("floor: node -e 0", [node, "-e", "0"]))
            if script is not None:
                commands.append(
                    Command(
                        f"GSD context monitor {gsd_version()} (node)", [node, str(script)], payload
                    )
                )

        with c.running_daemon(box) as daemon:
            # Check that the hook really reaches the daemon before timing it.
            with payload.open("rb") as stdin:
                first = subprocess.run(
                    hook_argv,
                    stdin=stdin,
                    env=box.env,
                    capture_output=True,
                    check=False,
                    timeout=10,
                )
            row = c.status(box, SESSION_ID)["sessions"][0]
            answered_before = c.status(box)["hooks_answered"]
            if first.returncode != 0 or answered_before != 1:
                raise RuntimeError(f"the hook did not reach the daemon: {first!r}")
            used = row["used_pct"] or 0.0
            write_gsd_bridge(Path(box.env["TMPDIR"]), SESSION_ID, used)
            print(
                f"session: {row['tokens']:,} tokens of {row['window']:,} ({used} % used, "
                f"severity {row['severity']}); GSD's bridge file says "
                f"{round(100 - used)} % remaining, fresh\n"
            )

            if args.hyperfine:
                times = run_hyperfine(
                    commands, box.env, args.runs, args.warmup, box.root / "hyperfine.json"
                )
            else:
                times = run_interleaved(commands, box.env, args.runs, args.warmup)
            answered = c.status(box)["hooks_answered"] - answered_before
            expected = (args.runs + args.warmup) * (1 + len(args.candidate))
            imports = import_times(hook_argv, payload, {**box.env, **nowhere})
            memory = c.proc_memory_kib(daemon.pid)

    walls = {name: c.summarize(t.wall_ms) for name, t in times.items()}
    cpus = {name: c.summarize(t.cpu_ms) for name, t in times.items()}
    floor = walls[FLOOR].mean
    hook = walls[HOOK]
    rows = [
        [
            cmd.name,
            walls[cmd.name].mean,
            walls[cmd.name].p50,
            walls[cmd.name].p95,
            walls[cmd.name].max,
            cpus[cmd.name].mean,
            f"{walls[cmd.name].mean / floor:.2f}×",
        ]
        for cmd in commands
    ]
    print(
        c.table(
            ["command", "mean ms", "median ms", "p95 ms", "max ms", "CPU ms (mean)", "× floor"],
            rows,
        )
    )
    print()
    checks = [
        [
            "ctxd hook ≤ 1.5× floor (mean wall)",
            f"{hook.mean / floor:.2f}×",
            c.verdict(hook.mean <= FLOOR_RATIO * floor),
        ]
    ]
    gsd = next((cmd.name for cmd in commands if cmd.name.startswith("GSD")), None)
    if gsd is not None:
        ratio = hook.mean / walls[gsd].mean
        checks.append(
            ["ctxd hook ≤ 0.2× GSD (mean wall)", f"{ratio:.2f}×", c.verdict(ratio <= GSD_RATIO)]
        )
    else:
        checks.append(["ctxd hook ≤ 0.2× GSD (mean wall)", "GSD not available (node/npm)", "–"])
    checks.append(
        [
            "every timed ctxd run was answered by the daemon",
            f"{answered} of {expected}",
            c.verdict(answered == expected),
        ]
    )
    print(c.table(["target", "measured", "verdict"], checks))
    print()
    floor_modules = {name.strip() for name, _ in import_times(commands[0].argv, None, box.env)}
    extra = [(name, us) for name, us in imports if name.strip() not in floor_modules]
    print("imports the client adds to the floor's (-X importtime, no daemon, best of 5):")
    print(c.table(["module", "cumulative µs"], [[name, us] for name, us in extra]))
    print(f"\ndaemon RSS after the run: {memory.get('VmRSS', 0) / 1024:.1f} MiB")
    print("commands:")
    for cmd in commands:
        print(f"  {cmd.name}: {cmd.shell()}")
    c.save_json(
        "hook_roundtrip",
        {
            "machine": c.machine(),
            "hook_command": installed,
            "runs": args.runs,
            "commands": {cmd.name: cmd.shell() for cmd in commands},
            "wall_ms": {n: t.wall_ms for n, t in times.items()},
            "cpu_ms": {n: t.cpu_ms for n, t in times.items()},
            "imports_us": imports,
            "answered": answered,
        },
    )
    return 0


def _hyperfine_version() -> str:
    done = subprocess.run(["hyperfine", "--version"], capture_output=True, text=True, check=False)
    return done.stdout.split()[-1] if done.stdout else "?"


if __name__ == "__main__":
    raise SystemExit(main())
