"""Benchmark: the handoff budget, `ctxd handoff --transcript FILE` against decoding FILE.

For each agent, on ~100 MB session files built by repeating real sessions, two whole processes
of the same real interpreter (the venv's python, never a `python3` found on PATH, which may be
a pyenv shim), started with posix_spawn and reaped with wait4, back to back:

  (a) `<python> -m ctxd handoff --agent AGENT --transcript FILE`, stdout to /dev/null: start-up,
      imports, the agent's reader over the whole file in 1 MiB reads, opened for the digest's
      facts alone (`usage=False`: no usage work), the note rendered;
  (b) the reference: `<python> -c REFERENCE FILE`, a tiny script that reads the file in 1 MiB
      reads, splits the lines and `orjson.loads` every non-empty one (nothing else).

The CPU time of each (user + sys of the child, from wait4) is taken; the ratio (a)/(b) of each
round's pair is the figure, its median over --rounds rounds (a, b, a, b, ...) is checked
against the budget: ratio <= 1.5 (aim 1.25). Wall times are shown beside. With --replay, a third
process per round, `<python> -m ctxd replay --agent AGENT FILE` (usage alone: no digest, the
core's rows printed to /dev/null), is timed too, for context.

Files, per agent (--source):
  captures: every session in tests/data/transcripts/<agent>-* (the real CLIs' sessions against
            the mock model: Claude Code 2.1.197 and 2.1.332, Codex CLI 0.171.0, Gemini CLI
            0.61.0), one after the other, ids made unique per round;
  public:   the real sessions digest_bench.py measures its target on (every public transcript of
            the agent in tests/data/public, Claude Code 1.0.51-2.1.114, Codex CLI 0.39-0.104;
            the public Gemini CLI recording replay_bench.py uses), ids made unique per round.
They are written once to bench/out/handoff_budget/ (gitignored) and reused while their sources
and size stay the same. Every process runs in a throw-away sandbox (HOME, XDG_*, CTXD_CONFIG,
CLAUDE_CONFIG_DIR, CODEX_HOME): nothing of the user's is read. ctxd's bytecode is compiled
first: a shell with PYTHONDONTWRITEBYTECODE=1 would otherwise have every handoff process compile
the modules changed since their .pyc was written (+0.05 s a process, measured).

    .venv/bin/python bench/handoff_budget.py                      # 100 MB, 5 rounds, both sources
    .venv/bin/python bench/handoff_budget.py --mb 10 --rounds 3 --agent claude --replay
"""

from __future__ import annotations

import argparse
import compileall
import hashlib
import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import common as c
import digest_bench as db
import replay_bench as rb

BUDGET = 1.5
AIM = 1.25
AGENTS = ("claude", "codex", "gemini")
SOURCES = ("captures", "public")
#: The folders of tests/data/transcripts each agent's captures are taken from.
CAPTURE_GLOBS = {
    "claude": "claude-code-*/*.jsonl",
    "codex": "codex-cli-*/*.jsonl",
    "gemini": "gemini-cli-*/*.jsonl",
}
#: Bumped whenever the way a file is built changes (a cached file is rebuilt then).
BUILD_VERSION = 1
OUT = c.OUT / "handoff_budget"

#: The reference process: read in 1 MiB chunks, split lines, orjson.loads each non-empty one.
#: It prints its counts (one short line), which the benchmark checks.
REFERENCE = """\
import os, sys, orjson
loads = orjson.loads
fd = os.open(sys.argv[1], os.O_RDONLY)
tail = b""
lines = bad = 0
while data := os.read(fd, 1 << 20):
    parts = (tail + data).split(b"\\n")
    tail = parts.pop()
    for line in parts:
        if line:
            lines += 1
            try:
                loads(line)
            except orjson.JSONDecodeError:
                bad += 1
if tail:
    lines += 1
    try:
        loads(tail)
    except orjson.JSONDecodeError:
        bad += 1
os.close(fd)
print(lines, bad)
"""


# --------------------------------------------------------------------------- the files


def _capture_files(agent: str) -> list[Path]:
    return sorted(rb.DATA.glob(CAPTURE_GLOBS[agent]))


def _capture_rounds(agent: str) -> Callable[[], Iterator[list[bytes]]]:
    """Rounds of every capture of `agent` in tests/data/transcripts, one after the other, the
    ids made unique per round as digest_bench does for the public sessions."""

    def rounds() -> Iterator[list[bytes]]:
        lines = [line for f in _capture_files(agent) for line in f.read_bytes().splitlines()]
        n = 0
        while True:
            out = []
            for line in lines:
                for key in db.ID_KEYS:
                    line = line.replace(key, key + f"r{n}-".encode())
                out.append(line)
            yield out
            n += 1

    return rounds


def _public_files(agent: str) -> list[Path]:
    if agent == "gemini":  # replay_bench's generator: one public recording
        return [rb.PUBLIC / "gemini" / "chats" / "session-2026-04-23-jsonl.jsonl"]
    return sorted((rb.PUBLIC / agent).rglob("*.jsonl"))


def _generator(agent: str, source: str) -> tuple[str, list[Path]]:
    """The replay_bench generator's name for (agent, source), registered here if need be, and
    the files it repeats."""
    if source == "public":
        return ("gemini" if agent == "gemini" else f"{agent}-public"), _public_files(agent)
    name = f"{agent}-captures"
    rb.GENERATORS.setdefault(name, _capture_rounds(agent))
    return name, _capture_files(agent)


@dataclass(frozen=True)
class BenchFile:
    agent: str
    source: str
    path: Path
    size: int
    sources: list[str]


def bench_file(agent: str, source: str, mb: int) -> BenchFile:
    """The bench file of `agent` from `source`, `mb` MB or just over: built once, reused while
    its sources, its size and the way it is built stay the same."""
    name, files = _generator(agent, source)
    key = hashlib.sha256(f"{BUILD_VERSION} {name} {mb}".encode())
    for f in files:
        key.update(f.read_bytes())
    OUT.mkdir(parents=True, exist_ok=True)
    path = OUT / f"{agent}-{source}-{mb}mb.jsonl"
    meta_path = path.with_suffix(".meta.json")
    sources = [str(f.relative_to(c.REPO)) for f in files]
    meta = {"key": key.hexdigest(), "sources": sources}
    try:
        fresh = json.loads(meta_path.read_text()) == meta and path.exists()
    except (OSError, ValueError):
        fresh = False
    if not fresh:
        started = time.perf_counter()
        tmp = path.with_suffix(".tmp")
        rb.build(name, tmp, mb * rb.MB)
        tmp.replace(path)
        meta_path.write_text(json.dumps(meta, indent=1) + "\n")
        print(
            f"built {path.relative_to(c.REPO)} ({path.stat().st_size / rb.MB:.1f} MB) "
            f"in {time.perf_counter() - started:.1f} s",
            flush=True,
        )
    return BenchFile(agent, source, path, path.stat().st_size, sources)


# --------------------------------------------------------------------------- the processes


def compile_sources() -> None:
    """Write the bytecode of ctxd (and of the client module it imports) now, once, so that no
    timed process compiles a source changed since its .pyc (`py_compile` writes it whatever
    PYTHONDONTWRITEBYTECODE says)."""
    for folder in ("ctxd", "clients"):
        if not compileall.compile_dir(str(c.REPO / folder), quiet=1):
            raise SystemExit(f"{folder}/ does not compile")


def real_python() -> str:
    """The interpreter to spawn: this one, by the path it was started with (the venv's, whose
    site-packages hold ctxd and orjson), once checked to be a binary and not a shim script."""
    exe = sys.executable
    with open(os.path.realpath(exe), "rb") as f:
        if f.read(4) != b"\x7fELF":
            raise SystemExit(f"{exe} -> {os.path.realpath(exe)} is not a binary (a shim?)")
    return exe


@dataclass(frozen=True)
class Run:
    cpu: float  # seconds, user + sys
    user: float
    sys: float
    wall: float


def spawn(argv: list[str], env: dict[str, str], stdout: str, stderr: str) -> Run:
    """One process, posix_spawn and wait4, no shell: its CPU (user + sys) and wall seconds."""
    actions = [
        (os.POSIX_SPAWN_OPEN, 0, os.devnull, os.O_RDONLY, 0),
        (os.POSIX_SPAWN_OPEN, 1, stdout, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644),
        (os.POSIX_SPAWN_OPEN, 2, stderr, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644),
    ]
    started = time.perf_counter()
    pid = os.posix_spawn(argv[0], argv, env, file_actions=actions)
    _, status, usage = os.wait4(pid, 0)
    wall = time.perf_counter() - started
    code = os.waitstatus_to_exitcode(status)
    if code != 0:
        tail = Path(stderr).read_text(errors="replace")[-2000:]
        raise RuntimeError(f"{' '.join(argv[:6])} ... exited with {code}:\n{tail}")
    return Run(usage.ru_utime + usage.ru_stime, usage.ru_utime, usage.ru_stime, wall)


@dataclass
class Row:
    file: BenchFile
    lines: int = 0
    bad_lines: int = 0
    tool_calls: int = 0
    handoff: list[Run] = field(default_factory=list)
    reference: list[Run] = field(default_factory=list)
    replay: list[Run] = field(default_factory=list)

    def ratios(self, runs: list[Run]) -> list[float]:
        return [a.cpu / b.cpu for a, b in zip(runs, self.reference, strict=True)]


class Commands:
    def __init__(self, python: str, env: dict[str, str], scratch: Path) -> None:
        self.python = python
        self.env = env
        self.scratch = scratch

    def handoff(self, f: BenchFile, stdout: str = os.devnull, json_: bool = False) -> Run:
        argv = [self.python, "-m", "ctxd", "handoff", "--agent", f.agent, "--transcript"]
        argv += [str(f.path), *(["--json"] if json_ else [])]
        return spawn(argv, self.env, stdout, str(self.scratch / "handoff.err"))

    def reference(self, f: BenchFile, stdout: str = os.devnull) -> Run:
        argv = [self.python, "-c", REFERENCE, str(f.path)]
        return spawn(argv, self.env, stdout, str(self.scratch / "reference.err"))

    def replay(self, f: BenchFile) -> Run:
        argv = [self.python, "-m", "ctxd", "replay", "--agent", f.agent, str(f.path)]
        return spawn(argv, self.env, os.devnull, str(self.scratch / "replay.err"))


def check(commands: Commands, row: Row, with_replay: bool) -> None:
    """One untimed run of each process (it also puts the file in the page cache): the handoff's
    digest must count tool calls, the reference must decode every line."""
    f = row.file
    out = commands.scratch / "out.json"
    commands.handoff(f, str(out), json_=True)
    doc = json.loads(out.read_bytes())
    row.tool_calls = int(doc["digest"]["tool_calls"])
    if not doc["markdown"].strip() or row.tool_calls == 0:
        raise RuntimeError(f"{f.path}: the handoff note is empty or counts no tool calls")
    commands.reference(f, str(out))
    row.lines, row.bad_lines = map(int, out.read_text().split())
    if with_replay:
        commands.replay(f)


def startup(commands: Commands, agent: str, rounds: int) -> tuple[float, float]:
    """Median CPU seconds of each process on an empty transcript: what the start-up costs
    (interpreter, imports; the note of an empty digest), part of both sides of the ratio."""
    empty = BenchFile(agent, "empty", commands.scratch / "empty.jsonl", 0, [])
    empty.path.write_bytes(b"")
    a, b = [], []
    for _ in range(rounds):
        a.append(commands.handoff(empty).cpu)
        b.append(commands.reference(empty).cpu)
    return statistics.median(a), statistics.median(b)


def measure(commands: Commands, rows: list[Row], rounds: int, with_replay: bool) -> None:
    for row in rows:
        check(commands, row, with_replay)
        for n in range(rounds):
            row.handoff.append(commands.handoff(row.file))
            row.reference.append(commands.reference(row.file))
            if with_replay:
                row.replay.append(commands.replay(row.file))
            last = row.ratios(row.handoff)[-1]
            print(
                f"  {row.file.agent}/{row.file.source} round {n + 1}/{rounds}: "
                f"handoff {row.handoff[-1].cpu:.2f} s, reference {row.reference[-1].cpu:.2f} s, "
                f"ratio {last:.3f}"
                + (f", replay {row.replay[-1].cpu:.2f} s" if with_replay else ""),
                flush=True,
            )


# --------------------------------------------------------------------------- the report


def _med(runs: list[Run], attr: str = "cpu") -> float:
    values: list[float] = [getattr(r, attr) for r in runs]
    return statistics.median(values)


def _load(avg: tuple[float, float, float]) -> str:
    return " ".join(f"{x:.2f}" for x in avg)


def table_rows(rows: list[Row], with_replay: bool) -> list[list[object]]:
    out: list[list[object]] = []
    for row in rows:
        ratios = row.ratios(row.handoff)
        ratio = statistics.median(ratios)
        cells: list[object] = [
            row.file.agent,
            row.file.source,
            f"{row.file.size / rb.MB:.1f}",
            f"{row.lines:,}",
            f"{row.tool_calls:,}",
            f"{_med(row.handoff):.2f}",
            f"{_med(row.reference):.2f}",
            f"**{ratio:.3f}**",
            f"{min(ratios):.3f}-{max(ratios):.3f}",
            f"{_med(row.handoff, 'wall'):.2f} / {_med(row.reference, 'wall'):.2f}",
        ]
        if with_replay:
            replay = statistics.median(row.ratios(row.replay))
            cells += [f"{_med(row.replay):.2f}", f"{replay:.3f}"]
        verdict = c.verdict(ratio <= BUDGET)
        cells.append(verdict + (" (aim met)" if ratio <= AIM else ""))
        out.append(cells)
    return out


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--mb", type=int, default=100, help="MB per file (default 100)")
    parser.add_argument("--rounds", type=int, default=5, help="alternating rounds (default 5)")
    parser.add_argument("--agent", choices=AGENTS, help="one agent only (default: all three)")
    parser.add_argument(
        "--source", choices=[*SOURCES, "both"], default="both", help="which sessions to repeat"
    )
    parser.add_argument(
        "--replay", action="store_true", help="also time `ctxd replay` (usage alone)"
    )
    parser.add_argument(
        "--cpu", type=int, help="pin the timed processes to this CPU (default: not pinned)"
    )
    args = parser.parse_args()
    if args.rounds < 1 or args.mb < 1:
        parser.error("--rounds and --mb must be at least 1")

    python = real_python()
    compile_sources()
    c.header(
        "Handoff budget", " ".join([".venv/bin/python bench/handoff_budget.py", *sys.argv[1:]])
    )
    commit = subprocess.run(
        ["git", "-C", str(c.REPO), "describe", "--always", "--dirty"],
        capture_output=True,
        text=True,
        check=False,
    ).stdout.strip()
    print(f"code: {commit or 'unknown'}; interpreter: {python} -> {os.path.realpath(python)}")
    print(
        f"budget: handoff CPU / reference CPU <= {BUDGET} (aim {AIM}), median of "
        f"{args.rounds} alternating rounds\n",
        flush=True,
    )
    agents = [args.agent] if args.agent else list(AGENTS)
    sources = list(SOURCES) if args.source == "both" else [args.source]
    rows = [Row(bench_file(a, s, args.mb)) for s in sources for a in agents]
    load_before = os.getloadavg()
    if args.cpu is not None:  # the children inherit it; the files are built by then
        os.sched_setaffinity(0, {args.cpu})
        print(f"timed processes pinned to CPU {args.cpu}", flush=True)
    with c.sandbox("handoff") as box:
        commands = Commands(python, box.env, box.root)
        floor = startup(commands, agents[0], max(3, args.rounds))
        print(
            f"start-up (an empty {agents[0]} transcript, median CPU): handoff {floor[0]:.3f} s, "
            f"reference {floor[1]:.3f} s",
            flush=True,
        )
        measure(commands, rows, args.rounds, args.replay)

    load_after = os.getloadavg()
    heads = [
        "agent",
        "source",
        "MB",
        "lines",
        "tool calls",
        "handoff CPU s",
        "reference CPU s",
        "ratio (median)",
        "ratio range",
        "wall s handoff / ref",
    ]
    if args.replay:
        heads += ["replay CPU s", "replay / ref"]
    heads.append(f"≤ {BUDGET}")
    print()
    print(c.table(heads, table_rows(rows, args.replay)))
    print(
        f"\nload average (1, 5, 15 min) before {_load(load_before)}, after {_load(load_after)}; "
        "wall well above CPU means other processes shared the CPUs"
    )
    for row in rows:
        if row.bad_lines:
            print(f"\nnote: {row.file.path.name}: {row.bad_lines} lines orjson refuses")
    c.save_json(
        "handoff_budget",
        {
            "machine": c.machine(),
            "commit": commit,
            "args": vars(args),
            "loadavg": {"before": load_before, "after": load_after},
            "startup_cpu": {"handoff": floor[0], "reference": floor[1]},
            "rows": [
                {
                    "agent": r.file.agent,
                    "source": r.file.source,
                    "path": str(r.file.path),
                    "bytes": r.file.size,
                    "sources": r.file.sources,
                    "lines": r.lines,
                    "bad_lines": r.bad_lines,
                    "tool_calls": r.tool_calls,
                    "handoff": [vars(x) for x in r.handoff],
                    "reference": [vars(x) for x in r.reference],
                    "replay": [vars(x) for x in r.replay],
                    "ratios": r.ratios(r.handoff),
                }
                for r in rows
            ],
        },
    )
    return 0 if all(statistics.median(r.ratios(r.handoff)) <= BUDGET for r in rows) else 1


if __name__ == "__main__":
    raise SystemExit(main())
