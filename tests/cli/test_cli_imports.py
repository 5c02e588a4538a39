"""`ctxd status` and `ctxd watch` are a look at the daemon's answer, run by hand and often: as
processes they import the client's round trip and the report's text, not the agent registry, the
daemon, the event loop or the file watcher (what a user would otherwise wait for at every look).
Checked on the real command, from what `python -X importtime` says it imported."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from conftest import World

DATA = Path(__file__).resolve().parents[1] / "data" / "transcripts"

#: Modules a look never needs: their top-level packages. (shutil: argparse's help formatter
#: imports it, with three compression modules, unless told the width.)
HEAVY = ("anyio", "watchfiles", "orjson", "shutil", "ctxd.daemon", "ctxd.agents", "ctxd.core")


def _imported(stderr: str) -> set[str]:
    """The modules named in `-X importtime`'s report."""
    return {
        line.rsplit("|", 1)[1].strip()
        for line in stderr.splitlines()
        if line.startswith("import time:") and "|" in line
    }


def _heavy(modules: set[str]) -> list[str]:
    return sorted(m for m in modules if m.split(".")[0] in HEAVY or m.startswith(HEAVY))


def _look(world: World, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "ctxd", *args],
        env=world.env,
        cwd=world.root,
        capture_output=True,
        text=True,
        timeout=20,
        check=False,
    )


def test_status_imports_neither_the_agents_nor_the_daemon(ctxd: World) -> None:
    t = ctxd.claude()
    t.assistant(120_000)
    ctxd.hook_out("claude", t.payload("PostToolUse"))

    table = _look(ctxd, "status")
    one = _look(ctxd, "status", t.session_id[:8])

    assert table.returncode == 0, table.stderr
    assert t.session_id[:8] in table.stdout and "120,000" in table.stdout
    assert one.returncode == 0, one.stderr
    assert "120,000" in one.stdout
    for result in (table, one):
        assert _heavy(_imported(result.stderr)) == []


def test_status_without_a_daemon_says_so_as_cheaply(world: World) -> None:
    result = _look(world, "status")

    assert result.returncode == 3
    assert "ctxd is not running" in result.stderr
    assert _heavy(_imported(result.stderr)) == []


#: All a poller's `ctxd status` may import beyond what the console script's wrapper does
#: (`import re, sys`, and the interpreter's start-up): the front door the `ctxd` entry point is
#: and its round trip to the daemon, which renders what is printed. Not ctxd's package, json
#: (its import compiles regular expressions), the report, orjson or argparse
#: (docs/benchmarks.md §29).
STATUS_BUDGET = {"_socket", "ctxd_status", "ctxd_wire"}


def _console_script_imports(world: World, *args: str) -> tuple[str, set[str]]:
    """What the `ctxd` console script pip wrote prints, and the modules it imports that its
    wrapper and the interpreter's start-up do not."""
    python = Path(sys.executable)
    wrapper = subprocess.run(
        [python, "-X", "importtime", "-c", "import re, sys"],
        env=world.env,
        capture_output=True,
        text=True,
        timeout=20,
        check=True,
    )
    done = subprocess.run(
        [python, "-X", "importtime", python.parent / "ctxd", *args],
        env=world.env,
        cwd=world.root,
        capture_output=True,
        text=True,
        timeout=20,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout, _imported(done.stderr) - _imported(wrapper.stderr)


@pytest.mark.parametrize("words", [[], ["--json"], ["SESSION"], ["--json", "SESSION"]])
def test_polled_status_imports_no_more_than_its_round_trip(ctxd: World, words: list[str]) -> None:
    t = ctxd.claude()
    t.assistant(120_000)
    ctxd.hook_out("claude", t.payload("PostToolUse"))
    words = [t.session_id[:8] if w == "SESSION" else w for w in words]

    out, modules = _console_script_imports(ctxd, "status", *words)

    assert "120,000" in out or '"tokens":120000' in out
    assert sorted(modules - STATUS_BUDGET) == []


def test_status_help_and_a_misspelt_option_still_go_to_argparse(world: World) -> None:
    helped = _look(world, "status", "--help")
    wrong = _look(world, "status", "--jsn")

    assert helped.returncode == 0 and "usage: ctxd status" in helped.stdout
    assert "--json" in helped.stdout
    assert wrong.returncode == 2 and "unrecognized arguments: --jsn" in wrong.stderr


def test_watch_imports_neither_the_agents_nor_the_daemon(ctxd: World) -> None:
    t = ctxd.claude()
    t.assistant(90_000)
    ctxd.hook_out("claude", t.payload("PostToolUse"))

    screen = ctxd.root / "watch.out"
    with screen.open("w") as out:
        proc = subprocess.Popen(
            [sys.executable, "-X", "importtime", "-m", "ctxd", "watch", "--interval", "0.1"],
            env=ctxd.env,
            cwd=ctxd.root,
            stdout=out,
            stderr=subprocess.PIPE,
            text=True,
        )
    try:
        ctxd.wait_for(lambda: screen.read_text().count("90,000") >= 2 or None, 10, "two redraws")
    finally:
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=10)

    assert proc.returncode == 0, err
    assert _heavy(_imported(err)) == []


#: What `ctxd handoff --transcript` never needs: the daemon and its event loop, and the network
#: (urllib.request alone loads http.client and email: ~15-35 ms of a process whose budget is
#: 1.5x the CPU of decoding the file, docs/benchmarks.md §10).
HANDOFF_NEVER = ("anyio", "watchfiles", "ctxd.daemon", "urllib.request", "http", "email")


def test_handoff_of_a_transcript_imports_neither_the_daemon_nor_the_network(
    world: World,
) -> None:
    sample = DATA / "gemini-cli-0.61.0" / "transcript.exitcodes.1.jsonl"
    result = _look(world, "handoff", "--agent", "gemini", "--transcript", str(sample))

    assert result.returncode == 0, result.stderr
    assert "Run four echos" in result.stdout
    modules = _imported(result.stderr)
    assert "ctxd.agents.gemini.digest" in modules
    assert (
        sorted(
            m for m in modules if m.split(".")[0] in HANDOFF_NEVER or m.startswith(HANDOFF_NEVER)
        )
        == []
    )


def test_handoff_of_a_named_agents_transcript_imports_no_other_agent(world: World) -> None:
    # Every agent's package costs its imports (~20 ms of start-up, bench/handoff_budget.py).
    from ctxd.agents import AGENTS

    sample = DATA / "gemini-cli-0.61.0" / "transcript.exitcodes.1.jsonl"
    result = _look(world, "handoff", "--agent", "gemini", "--transcript", str(sample))

    assert result.returncode == 0, result.stderr
    assert "Run four echos" in result.stdout
    modules = _imported(result.stderr)
    others = tuple(f"ctxd.agents.{name}" for name in AGENTS if name != "gemini")
    assert sorted(m for m in modules if m.startswith(others)) == []
