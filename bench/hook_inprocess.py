"""What one hook costs inside the daemon: the centre's `handle_hook`, in process, no socket.

A sandbox (HOME, XDG_*, CLAUDE_CONFIG_DIR, CODEX_HOME under one temporary directory) holds
`--sessions` copies of the real Claude Code 2.1.332 transcript where Claude Code puts them; the
daemon's centre is built over it as the daemon builds it, and the real PostToolUse payload of
the same capture (pointed at each copy, as bench/daemon_load.py sends it, with no `env`) is
answered `--hooks` times, round-robin over the sessions, after a warm-up that reads every
transcript. The transcripts do not change while hooks are timed: each hook is the daemon's
steady state (find the session, check the transcript is caught up and holds the tool call's turn,
judge, render nothing).

`--mix` answers, instead of PostToolUse alone, one turn's hooks of the same capture in order
(UserPromptSubmit, PreToolUse, PostToolUse, Stop).

Two ways to measure, both per hook:

- CPU time (`time.process_time`) of each block of `--hooks` hooks, best of `--repeats`;
- with `--callgrind`, instructions executed (valgrind's callgrind, Ir): the script runs itself
  under valgrind twice, with `--base` hooks and with `--base` + `--hooks`, and divides the
  difference, so start-up and warm-up cancel out. Instruction counts do not depend on what else
  the machine is doing, which makes them the figure to compare on a shared machine.

`--against TREE` measures a second checkout the same way, in alternating rounds, with that
checkout's own virtualenv (`TREE/.venv/bin/python`, which imports TREE's ctxd): an A/B of two
versions of the code. The script works with both the centre (`ctxd.daemon.centre.Centre`) and
the registry it replaced (`ctxd.daemon.registry.Registry`, before 2026-12-01).

    .venv/bin/python bench/hook_inprocess.py [--hooks 2000] [--repeats 5] [--rounds 2]
        [--sessions 8] [--mix] [--against ../old-checkout] [--callgrind [--base 200]]
"""

from __future__ import annotations

import argparse
import gc
import importlib
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve()
REPO = HERE.parent.parent
DATA = REPO / "tests" / "data"


class Capture:
    """One run of the real Claude Code 2.1.332 in the capture harness: its transcript and the
    payloads of its hooks, in `tests/data`."""

    def __init__(self, name: str, post_tool_use: str, turn: tuple[str, ...]) -> None:
        self.payloads = DATA / "payloads" / "claude" / "2.1.332" / name
        self.transcript = DATA / "transcripts" / "claude-code-2.1.332" / f"transcript.{name}.jsonl"
        self.post_tool_use = (post_tool_use,)
        self.turn = turn


CAPTURES = {
    # A short session, nowhere near compaction (what bench/daemon_load.py sends).
    "interactive": Capture(
        "interactive",
        "05-PostToolUse.json",
        ("02-UserPromptSubmit.json", "03-PreToolUse.json", "05-PostToolUse.json", "06-Stop.json"),
    ),
    # A session past an automatic compaction: every hook also infers the window from it.
    "compact": Capture(
        "compact",
        "04-PostToolUse.json",
        ("02-UserPromptSubmit.json", "03-PreToolUse.json", "04-PostToolUse.json", "19-Stop.json"),
    ),
}

Hook = Callable[[str, str | None, bytes, object], object]


# ---------------------------------------------------------------------------- one measurement


def _sandbox_env(root: Path) -> dict[str, str]:
    env = {
        "HOME": str(root / "home"),
        "XDG_RUNTIME_DIR": str(root / "run"),
        "XDG_STATE_HOME": str(root / "state"),
        "XDG_CONFIG_HOME": str(root / "config"),
        "XDG_DATA_HOME": str(root / "data"),
        "CTXD_CONFIG": str(root / "config" / "ctxd" / "config.toml"),
        "CLAUDE_CONFIG_DIR": str(root / "claude"),
        "CODEX_HOME": str(root / "codex"),
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
    }
    for name in ("home", "run", "state", "config", "data", "claude/projects", "codex"):
        (root / name).mkdir(parents=True, exist_ok=True, mode=0o700)
    return env


def _open_hook(env: dict[str, str], roots: dict[str, Path]) -> Hook:
    """The running daemon's `handle_hook`, from whichever version of ctxd is installed."""
    try:
        from ctxd.daemon.centre import Centre
    except ImportError:  # before the registry was cut into rooms: it read os.environ itself
        os.environ.clear()
        os.environ.update(env)
        registry = importlib.import_module("ctxd.daemon.registry").Registry(None, roots)
        return registry.handle_hook  # type: ignore[no-any-return]
    return Centre.open(env, roots).answers.handle_hook


def _payloads(
    root: Path, env: dict[str, str], sessions: int, capture: Capture, mix: bool
) -> list[bytes]:
    """For each session, a copy of the real transcript where Claude Code writes it, and the
    capture's payloads pointed at it (the capture's paths are `$SCRATCH` placeholders)."""
    cwd = str(root / "work")
    project = Path(env["CLAUDE_CONFIG_DIR"]) / "projects" / re.sub(r"[^A-Za-z0-9]", "-", cwd)
    project.mkdir(parents=True, exist_ok=True)
    content = capture.transcript.read_bytes()
    frames: list[bytes] = []
    for n in range(sessions):
        session_id = f"00000000-0000-4000-8000-{n:012d}"
        transcript = project / f"{session_id}.jsonl"
        transcript.write_bytes(content)
        for name in capture.turn if mix else capture.post_tool_use:
            payload = json.loads((capture.payloads / name).read_bytes())
            payload.update(session_id=session_id, transcript_path=str(transcript), cwd=cwd)
            frames.append(json.dumps(payload, separators=(",", ":")).encode())
    return frames


def measure(hooks: int, repeats: int, sessions: int, capture: Capture, mix: bool) -> dict[str, Any]:
    """Run in the process whose ctxd is measured: CPU seconds per block of `hooks` hooks."""
    root = Path(tempfile.mkdtemp(prefix="ctxd-hook-inprocess-"))
    try:
        env = _sandbox_env(root)
        payloads = _payloads(root, env, sessions, capture, mix)
        handle = _open_hook(env, {"claude": Path(env["CLAUDE_CONFIG_DIR"]) / "projects"})
        for payload in payloads * 3:  # read every transcript, warm every cache
            answer = handle("claude", None, payload, None)
            if not isinstance(answer, bytes):
                raise RuntimeError("a hook had to wait: the transcript lacks the payload's turn")
        # As the daemon does once it is running (ctxd/daemon/lifecycle.py).
        gc.freeze()
        gc.set_threshold(50_000, 20, 100)
        work = (payloads * (hooks // len(payloads) + 1))[:hooks]
        blocks: list[float] = []
        for _ in range(repeats):
            start = time.process_time()
            for payload in work:
                handle("claude", None, payload, None)
            blocks.append(time.process_time() - start)
        import ctxd

        return {"cpu_s": blocks, "hooks": hooks, "ctxd": str(Path(ctxd.__file__).parent)}
    finally:
        shutil.rmtree(root, ignore_errors=True)


# ---------------------------------------------------------------------------- driving the trees


def _python_of(tree: Path | None) -> str:
    if tree is None:
        return sys.executable
    python = tree / ".venv" / "bin" / "python"
    if not python.exists():
        raise SystemExit(f"{tree}: no .venv/bin/python (make its virtualenv first)")
    return str(python)


def _child(tree: Path | None, hooks: int, repeats: int, args: argparse.Namespace) -> list[str]:
    argv = [_python_of(tree), str(HERE), "--child", "--hooks", str(hooks)]
    argv += ["--repeats", str(repeats), "--sessions", str(args.sessions)]
    argv += ["--transcript", args.transcript]
    return argv + (["--mix"] if args.mix else [])


def _cpu_run(tree: Path | None, args: argparse.Namespace) -> dict[str, Any]:
    out = subprocess.run(
        _child(tree, args.hooks, args.repeats, args), check=True, capture_output=True, text=True
    ).stdout
    doc: dict[str, Any] = json.loads(out)
    return doc


def _instructions(tree: Path | None, hooks: int, args: argparse.Namespace) -> int:
    """Instructions (Ir) of a whole child run of `hooks` hooks under callgrind."""
    with tempfile.TemporaryDirectory() as scratch:
        out = Path(scratch) / "callgrind.out"
        argv = ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}"]
        # The same hash seed on both sides: str hashing shows in the count otherwise.
        env = {**os.environ, "PYTHONHASHSEED": "0"}
        subprocess.run(
            argv + _child(tree, hooks, 1, args), check=True, capture_output=True, env=env
        )
        for line in out.read_text().splitlines():
            if line.startswith(("summary:", "totals:")):
                return int(line.split()[1])
    raise RuntimeError("callgrind wrote no totals")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--hooks", type=int, default=2000)
    parser.add_argument("--repeats", type=int, default=5, help="blocks of --hooks per run")
    parser.add_argument("--rounds", type=int, default=2, help="runs per tree, alternated")
    parser.add_argument("--sessions", type=int, default=8)
    parser.add_argument("--transcript", choices=sorted(CAPTURES), default="interactive")
    parser.add_argument("--mix", action="store_true", help="one turn's hooks, not PostToolUse")
    parser.add_argument("--against", type=Path, help="a second checkout, with its own .venv")
    parser.add_argument("--callgrind", action="store_true", help="count instructions instead")
    parser.add_argument("--base", type=int, default=200, help="hooks of the callgrind baseline")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        capture = CAPTURES[args.transcript]
        print(json.dumps(measure(args.hooks, args.repeats, args.sessions, capture, args.mix)))
        return

    trees: list[tuple[str, Path | None]] = [("this checkout", None)]
    if args.against is not None:
        trees.append((str(args.against), args.against.resolve()))
    what = (
        "one turn (UserPromptSubmit, PreToolUse, PostToolUse, Stop)" if args.mix else "PostToolUse"
    )
    print(
        f"## handle_hook in process: {what}, {args.sessions} sessions, "
        f"the real 2.1.332 transcript.{args.transcript}.jsonl\n"
    )
    print("    " + " ".join(["bench/hook_inprocess.py", *sys.argv[1:]]) + "\n")
    if args.callgrind:
        print("| checkout | instructions per hook |")
        print("|---|---|")
        counts: dict[str, float] = {}
        for name, tree in trees:
            low = _instructions(tree, args.base, args)
            high = _instructions(tree, args.base + args.hooks, args)
            counts[name] = (high - low) / args.hooks
            print(f"| {name} | {counts[name]:,.0f} |", flush=True)
        if len(counts) == 2:
            mine, theirs = counts.values()
            print(f"\nthis checkout / the other: {mine / theirs:.3f}")
        return

    best: dict[str, list[float]] = {name: [] for name, _ in trees}
    for _ in range(args.rounds):
        for name, tree in trees:
            doc = _cpu_run(tree, args)
            best[name].append(min(doc["cpu_s"]) / doc["hooks"] * 1e6)
    print("| checkout | CPU µs per hook, best block of each run | best |")
    print("|---|---|---|")
    for name, figures in best.items():
        runs = ", ".join(f"{f:.1f}" for f in figures)
        print(f"| {name} | {runs} | {min(figures):.1f} |")
    if len(best) == 2:
        mine, theirs = (min(f) for f in best.values())
        print(f"\nthis checkout / the other (best of each): {mine / theirs:.3f}")
    spread = [statistics.pstdev(f) for f in best.values() if len(f) > 1]
    if spread:
        print(f"spread between runs (pstdev, µs): {', '.join(f'{s:.1f}' for s in spread)}")


if __name__ == "__main__":
    main()
