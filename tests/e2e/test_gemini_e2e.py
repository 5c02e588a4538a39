"""Gemini CLI, the real CLI, offline against mock_gemini.py in a loopback-only network
namespace, wired to a real ctxd daemon.

Gemini CLI compresses its history once a reported prompt reaches half the window
(1,048,576 -> 524,288), so the thresholds stay on ctxd's default "compaction" basis: WARNING
from 340,788 prompt tokens (35 % of the room before compression left), CRITICAL from 393,216
(25 %), the handoff from 367,002 (70 % used).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path

import pytest
from e2e_support import (
    AgentRig,
    Ctxd,
    Json,
    Mock,
    Result,
    RunDir,
    gemini_capture_hooks,
    gemini_env,
    gemini_prepare,
    gemini_tool_steps,
    gemini_usage,
    last_turn_text_gemini,
    marks,
    run,
)

pytestmark = pytest.mark.e2e

#: Instant tools: unlike Claude Code, this CLI has the usage on disk before its hook runs.
TOOL_SECONDS = 0
WARNING = "CONTEXT WARNING:"
CRITICAL = "CONTEXT CRITICAL:"
HANDOFF = "CONTEXT HANDOFF:"


def test_smoke_scripted_tool_calls_with_hooks(
    gemini_bin: Path, netns: bool, tmp_path: Path
) -> None:
    """The harness itself: a -p session of three shell calls completes, every hook fires, and
    an AfterTool hook's additionalContext reaches the model right after its own call."""
    rd = RunDir.create(tmp_path)
    gemini_prepare(rd, gemini_capture_hooks())
    mock = Mock("mock_gemini", rd.root, {"steps": gemini_tool_steps(3)}, netns=netns).start()
    try:
        res = run(
            mock.wrap(
                [str(gemini_bin), "-p", "Run the steps", "--yolo", "--output-format", "json"]
            ),
            cwd=rd.work,
            env=gemini_env(rd, mock),
        )
    finally:
        mock.stop()
    assert res.returncode == 0, res.describe()
    assert json.loads(res.stdout)["response"].strip() == "Done.", res.describe()

    labels = [h["label"] for h in rd.hooks()]
    assert labels.count("AfterTool") == 3, labels
    for ev in ("SessionStart", "BeforeAgent", "BeforeTool", "AfterAgent", "SessionEnd"):
        assert ev in labels, labels
    assert not mock.requests_of_kind("proxy"), "the CLI tried to reach an outside host"

    main = mock.main_requests()
    assert len(main) == 4
    for n in (1, 2, 3):
        arrived = marks(main, f"E2E-SMOKE-MARKER-{n}", last_turn_text_gemini)
        assert arrived == [i == n for i in range(4)], (n, arrived)


# ------------------------------------------------------------------------------------ the rig
@dataclass
class Rig(AgentRig):
    def gemini(self, *args: str, **extra_env: str) -> Result:
        argv = self.mock.wrap([str(self.bin), "-p", *args, "--yolo", "--output-format", "json"])
        res = run(
            argv,
            cwd=self.rd.work,
            env=gemini_env(self.rd, self.mock, {**self.ctxd.env, **extra_env}),
        )
        assert res.returncode == 0, res.describe()
        return res

    def session_id(self) -> str:
        """The session id of the run (the one row in status that follows a transcript)."""
        rows = [s for s in self.ctxd.status()["sessions"] if s.get("transcript_path")]
        assert len(rows) == 1, rows
        return str(rows[0]["session_id"])


@pytest.fixture
def make_rig(gemini_bin: Path, netns: bool, tmp_path: Path) -> Iterator[Callable[..., Rig]]:
    cleanup = ExitStack()  # registered before each start: a failed start leaks nothing

    def make(steps: list[Json], config: str = "", *, counter: bool = False) -> Rig:
        rd = RunDir.create(tmp_path)
        settings = gemini_prepare(rd)
        ctxd = Ctxd(rd, config, {})
        ctxd.install("gemini", settings)
        cleanup.callback(ctxd.stop)
        ctxd.start()
        script: Json = {"steps": steps}
        if counter:
            script["step_mode"] = "counter"  # compression rewrites the history
        mock = Mock("mock_gemini", rd.root, script, netns=netns)
        cleanup.callback(mock.stop)
        mock.start()
        rig = Rig(gemini_bin, rd, ctxd, mock)
        return rig

    with cleanup:
        yield make


def at_calls(main: list[Json], needle: str) -> list[int]:
    """The tool calls (0-based) after which `needle` reached the model."""
    return [i - 1 for i, hit in enumerate(marks(main, needle, last_turn_text_gemini)) if hit]


def hook_lines(res: Result) -> list[str]:
    return [line for line in res.stderr.splitlines() if "hook" in line.lower()]


# ------------------------------------------------------------------------------------ tests
def test_warnings_follow_the_debounce_escalate_and_hand_off_once(
    make_rig: Callable[..., Rig],
) -> None:
    # call:    0        1        2(W)     3-6 (quiet, debounced)              7(W: 5th)
    prompt = [
        100_000,
        300_000,
        345_000,
        350_000,
        352_000,
        354_000,
        356_000,
        358_000,
        # 8(C: escalation) 9       final answer (AfterAgent: 77 % used -> handoff)
        400_000,
        402_000,
        405_000,
    ]
    rig = make_rig(gemini_tool_steps(10, prompt, TOOL_SECONDS))
    res = rig.gemini("Run the steps")

    main = rig.main()
    assert len(main) == 11
    # also proves PreCompress (which Gemini fires before every model turn) resets nothing
    assert at_calls(main, WARNING) == [2, 7]
    assert at_calls(main, CRITICAL) == [8]
    handoffs = [line for line in res.stderr.splitlines() if HANDOFF in line]
    assert len(handoffs) == 1, res.describe()  # "Hook system message: CONTEXT HANDOFF: ..."
    assert not any(HANDOFF in json.dumps(r["body"]) for r in main)

    row = rig.ctxd.session(rig.session_id())
    assert row["agent"] == "gemini"
    assert row["tokens"] == 405_000  # the last promptTokenCount the model reported
    assert row["window"] == 1_048_576  # the inputTokenLimit Gemini CLI works with


def test_compression_restarts_the_debounce_and_block_handoff_runs_once(
    make_rig: Callable[..., Rig],
) -> None:
    """With `action = "block"` the handoff denies AfterAgent: Gemini starts a new turn with
    ctxd's reason as the user's text. The reported 600,000 makes Gemini compress before that
    turn, and the first below-threshold call after it warns at once (without the reset it would
    be the 2nd call after a warning, inside the debounce)."""
    config = '[handoff]\naction = "block"\n'
    steps = [
        *gemini_tool_steps(2, [345_000, 350_000], TOOL_SECONDS)[:2],  # W at call 0
        {"text": "Paused.", "usage": gemini_usage(600_000)},  # >= 524,288: compress next turn
        # the continuation turn that ctxd's block started
        *gemini_tool_steps(1, [345_000, 350_000], TOOL_SECONDS),
    ]
    rig = make_rig(steps, config, counter=True)
    res = rig.gemini("Run the steps")

    assert rig.mock.requests_of_kind("compress"), "Gemini CLI did not compress"
    main = rig.main()
    assert len(main) == 5, res.describe()
    # the reason arrives once, as the text of the turn the block started
    assert marks(main, HANDOFF, last_turn_text_gemini) == [False, False, False, True, False]
    warned = at_calls(main, WARNING)
    assert warned[0] == 0 and warned[-1] == 3, warned
    assert rig.ctxd.session(rig.session_id())["compactions"] >= 1
    assert json.loads(res.stdout)["response"].strip() == "Done."


def test_without_a_daemon_the_session_completes_quietly(make_rig: Callable[..., Rig]) -> None:
    rig = make_rig(gemini_tool_steps(3, [345_000, 400_000, 402_000, 405_000], TOOL_SECONDS))
    rig.ctxd.stop_with_cli()
    res = rig.gemini("Run the steps", CTXD_NO_SPAWN="1")
    assert json.loads(res.stdout)["response"].strip() == "Done."
    assert hook_lines(res) == [], res.stderr
    assert "CONTEXT " not in json.dumps([r["body"] for r in rig.main()])
    assert not Path(rig.ctxd.env["CTXD_SOCKET"]).exists(), "a daemon was spawned"
