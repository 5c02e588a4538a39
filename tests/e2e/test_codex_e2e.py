"""Codex CLI, the real CLI, offline against mock_openai.py in a loopback-only network namespace,
wired to a real ctxd daemon.

Codex 0.171.0 runs gpt-5.5 with a catalog window of 272,000, reports 95 % of it (258,400) as
`model_context_window`, and compacts at 90 % of it (244,800). The thresholds stay on ctxd's
default "compaction" basis: WARNING from 159,120 tokens (35 % of the room before compaction
left), CRITICAL from 183,600 (25 %), the handoff from 171,360 (70 % used). Context tokens are
input + output of the newest response; every scripted response has 100 output tokens.
"""

from __future__ import annotations

import re
import shlex
import shutil
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path

import pytest
from e2e_support import (
    CODEX_FLAGS,
    AgentRig,
    Ctxd,
    Json,
    Mock,
    Result,
    RunDir,
    Tmux,
    codex_capture_hooks,
    codex_env,
    codex_prepare,
    codex_tool_steps,
    codex_usage,
    last_turn_text_codex,
    marks,
    run,
    wait_for,
)

pytestmark = pytest.mark.e2e

#: Instant tools: unlike Claude Code, this CLI has the usage on disk before its hook runs.
TOOL_SECONDS = 0
WARNING = "CONTEXT WARNING:"
CRITICAL = "CONTEXT CRITICAL:"
HANDOFF = "CONTEXT HANDOFF:"


def test_smoke_scripted_tool_calls_with_hooks(codex_bin: Path, netns: bool, tmp_path: Path) -> None:
    """The harness itself: an exec session of three shell calls completes, every hook fires,
    and a PostToolUse hook's additionalContext reaches the model right after its own call."""
    rd = RunDir.create(tmp_path)
    mock = Mock("mock_openai", rd.root, {"steps": codex_tool_steps(3)}, netns=netns).start()
    try:
        codex_prepare(rd, mock, codex_capture_hooks())
        last = rd.root / "last_message.txt"
        res = run(
            mock.wrap([str(codex_bin), "exec", *CODEX_FLAGS, "-o", str(last), "Run the steps"]),
            cwd=rd.work,
            env=codex_env(rd),
        )
    finally:
        mock.stop()
    assert res.returncode == 0, res.describe()
    assert last.read_text().strip() == "Done.", res.describe()

    labels = [h["label"] for h in rd.hooks()]
    assert labels.count("PostToolUse") == 3, labels
    for ev in ("SessionStart", "UserPromptSubmit", "PreToolUse", "Stop"):
        assert ev in labels, labels

    main = mock.main_requests()
    assert len(main) == 4
    for n in (1, 2, 3):
        arrived = marks(main, f"E2E-SMOKE-MARKER-{n}", last_turn_text_codex)
        assert arrived == [i == n for i in range(4)], (n, arrived)


# ------------------------------------------------------------------------------------ the rig
@dataclass
class Rig(AgentRig):
    def codex(self, prompt: str, **extra_env: str) -> Result:
        last = self.rd.root / "last_message.txt"
        argv = self.mock.wrap([str(self.bin), "exec", *CODEX_FLAGS, "-o", str(last), prompt])
        res = run(argv, cwd=self.rd.work, env=codex_env(self.rd, {**self.ctxd.env, **extra_env}))
        assert res.returncode == 0, res.describe()
        assert last.read_text().strip() == "Done.", res.describe()
        return res

    def session_row(self) -> Json:
        rows = [s for s in self.ctxd.status()["sessions"] if s.get("transcript_path")]
        assert len(rows) == 1, rows
        return self.ctxd.session(str(rows[0]["session_id"]))


@pytest.fixture
def make_rig(codex_bin: Path, netns: bool, tmp_path: Path) -> Iterator[Callable[..., Rig]]:
    cleanup = ExitStack()  # registered before each start: a failed start leaks nothing

    def make(steps: list[Json], config: str = "", *, counter: bool = False) -> Rig:
        rd = RunDir.create(tmp_path)
        script: Json = {"steps": steps}
        if counter:
            script["step_mode"] = "counter"  # compaction rewrites the history
        mock = Mock("mock_openai", rd.root, script, netns=netns)
        cleanup.callback(mock.stop)
        mock.start()
        hooks_json = codex_prepare(rd, mock)
        ctxd = Ctxd(rd, config, {"CODEX_HOME": str(rd.config)})
        ctxd.install("codex", hooks_json)
        cleanup.callback(ctxd.stop)
        ctxd.start()
        rig = Rig(codex_bin, rd, ctxd, mock)
        return rig

    with cleanup:
        yield make


def at_calls(main: list[Json], needle: str) -> list[int]:
    """The tool calls (0-based) after which `needle` reached the model."""
    return [i - 1 for i, hit in enumerate(marks(main, needle, last_turn_text_codex)) if hit]


def inputs(tokens: list[int]) -> list[int]:
    """Scripted input_tokens for the given context sizes (100 output tokens each)."""
    return [t - 100 for t in tokens]


# ------------------------------------------------------------------------------------ tests
def test_warnings_follow_the_debounce_escalate_and_hand_off_once(
    make_rig: Callable[..., Rig],
) -> None:
    # call:    0       1        2(W)     3-6 (quiet, debounced)              7(W: 5th)
    tokens = [
        50_000,
        120_000,
        160_000,
        161_000,
        162_000,
        163_000,
        164_000,
        165_000,
        # 8(C: escalation) 9       final answer (Stop: 80 % used -> handoff)
        185_000,
        186_000,
        195_000,
    ]
    rig = make_rig(codex_tool_steps(10, inputs(tokens), TOOL_SECONDS))
    rig.codex("Run the steps")

    main = rig.main()
    assert len(main) == 11
    assert at_calls(main, WARNING) == [2, 7]
    assert at_calls(main, CRITICAL) == [8]
    # the default handoff is a message for the user (which `codex exec` does not print): it
    # was asked for, and it never reached the model
    assert not any(HANDOFF in str(r["body"]) for r in main)

    row = rig.session_row()
    assert row["handoff_asked"] is True
    assert row["agent"] == "codex"
    assert row["tokens"] == 195_000  # input + output of the last response
    assert row["window"] == 258_400  # the window Codex itself reports for gpt-5.5


def test_auto_compaction_restarts_the_debounce(make_rig: Callable[..., Rig]) -> None:
    """A response above 90 % of the catalog window makes Codex compact mid-turn; the first
    below-threshold call after it warns at once (without the reset it would be the 1st call
    after a CRITICAL, inside the debounce)."""
    steps = [
        *codex_tool_steps(1, inputs([160_000]), TOOL_SECONDS)[:1],  # call 0: W
        {
            "shell": f"sleep {TOOL_SECONDS}; echo big",
            "usage": codex_usage(250_000),
        },  # call 1: CRITICAL, then compaction (> 244,800)
        *codex_tool_steps(1, inputs([160_000, 161_000]), TOOL_SECONDS),  # call 2: W again
    ]
    rig = make_rig(steps, counter=True)
    rig.codex("Run the steps")

    assert rig.mock.requests_of_kind("compact"), "Codex CLI did not compact"
    main = rig.main()
    assert len(main) == 4
    warned = at_calls(main, WARNING)
    assert warned[0] == 0 and warned[-1] == 2, warned
    assert rig.session_row()["compactions"] >= 1


def test_handoff_block_continues_the_turn_once(make_rig: Callable[..., Rig]) -> None:
    config = '[handoff]\naction = "block"\n'
    rig = make_rig(codex_tool_steps(1, inputs([175_000, 180_000]), TOOL_SECONDS), config)
    rig.codex("Run the step")

    main = rig.main()
    # call 0, the answer that stops (blocked: 74 % used), and the continuation it caused
    assert len(main) == 3
    assert marks(main, HANDOFF, last_turn_text_codex) == [False, False, True]


def test_without_a_daemon_the_session_completes_quietly(make_rig: Callable[..., Rig]) -> None:
    rig = make_rig(codex_tool_steps(3, inputs([160_000, 185_000, 186_000, 195_000]), TOOL_SECONDS))
    rig.ctxd.stop_with_cli()
    res = rig.codex("Run the steps", CTXD_NO_SPAWN="1")
    # `codex exec` reports every hook run as "hook: <Event>" then "hook: <Event> Completed"
    hook_lines = [line for line in res.stderr.splitlines() if line.startswith("hook:")]
    assert hook_lines, res.stderr
    odd = [line for line in hook_lines if not re.fullmatch(r"hook: \w+( Completed)?", line)]
    assert odd == [], res.stderr
    assert "CONTEXT " not in str([r["body"] for r in rig.main()])
    assert not Path(rig.ctxd.env["CTXD_SOCKET"]).exists(), "a daemon was spawned"


def test_interactive_shows_the_handoff_message_once(
    make_rig: Callable[..., Rig], tmp_path: Path
) -> None:
    """`codex exec` prints no system message, the TUI does ("↳ Hook · ..."): the default
    handoff is shown after the turn that crossed the line, and not after the next one."""
    if shutil.which("tmux") is None:
        pytest.skip("tmux not installed (apt-get install tmux)")
    rig = make_rig(codex_tool_steps(1, inputs([175_000, 180_000]), TOOL_SECONDS))
    env = codex_env(rig.rd, rig.ctxd.env)
    codex = rig.mock.wrap(
        [
            str(rig.bin),
            "--dangerously-bypass-approvals-and-sandbox",
            "--dangerously-bypass-hook-trust",
        ]
    )
    tmux = Tmux(tmp_path / "tmux.sock", "cx")
    tmux.start(
        f"cd {shlex.quote(str(rig.rd.work))} && env -i "
        + " ".join(shlex.quote(f"{k}={v}") for k, v in env.items())
        + " "
        + shlex.join(codex)
        + "; echo CODEX-EXITED; sleep 30"
    )
    try:
        assert tmux.wait("Ask Codex to do anything", 40), tmux.pane()
        tmux.send("Run the step")
        assert tmux.wait(f"Hook · {HANDOFF}", 40), tmux.pane()
        tmux.send("Anything else?")  # stops again, still at 74 % used
        assert wait_for(lambda: tmux.pane().count("Worked for") >= 2, 30), tmux.pane()
        assert len(rig.main()) == 3, tmux.pane()
        pane = tmux.pane()
        assert pane.count(f"Hook · {HANDOFF}") == 1, pane
        assert not any(HANDOFF in str(r["body"]) for r in rig.main())
        tmux.send("/exit")
        tmux.wait("CODEX-EXITED", 20)
    finally:
        tmux.kill()
