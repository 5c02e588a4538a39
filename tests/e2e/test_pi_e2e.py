"""pi, the real CLI, offline against mock_openai_chat.py in a loopback-only network namespace,
wired to a real ctxd daemon by `ctxd install pi` (its extension, listed in settings.json).

pi runs the mock's model as a custom provider (`~/.pi/agent/models.json`) with a 200,000 window
and compacts when an answer's totalTokens (prompt + output) is over window - 16,384: from
183,617. On ctxd's default "compaction" basis (prompt + output, as pi counts), WARNING comes
from 119,352 (35 % of the room left), CRITICAL from 137,713 (25 %), the handoff from 128,532
(70 % used). Every answer reports 40 output tokens.
"""

from __future__ import annotations

import json
import shlex
import subprocess
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path

import pytest
from e2e_support import (
    PYTHON,
    AgentRig,
    Ctxd,
    Json,
    Mock,
    Result,
    RunDir,
    at_calls,
    base_env,
    chat_usage,
    cli_version,
    last_turn_text_chat,
    marks,
    run,
    wait_for,
    write_json,
)
from plugin_support import StandIn

pytestmark = pytest.mark.e2e

MODEL = "mock-model"
WINDOW = 200_000
WARNING = "CONTEXT WARNING:"
CRITICAL = "CONTEXT CRITICAL:"
HANDOFF = "CONTEXT HANDOFF:"


#: A bash command whose output is about 2,500 tokens by pi's estimate (4 characters a token).
BULKY = "echo step {i}; head -c 10000 /dev/zero | tr '\\0' x"


def tool_steps(
    prompts: Sequence[int], final: int, text: str = "Done.", command: str = "echo step {i}"
) -> list[Json]:
    """A bash call per figure in `prompts` (`command`, `{i}` its index), then a text answer
    reporting `final`."""
    steps: list[Json] = [
        {
            "tool": {"name": "bash", "arguments": {"command": command.format(i=i)}},
            "usage": chat_usage(p),
        }
        for i, p in enumerate(prompts)
    ]
    steps.append({"text": text, "usage": chat_usage(final)})
    return steps


@dataclass
class Rig(AgentRig):
    def pi(self, *args: str, **extra_env: str) -> Result:
        argv = self.mock.wrap([str(self.bin), "-p", *args, "--provider", "mock", "--model", MODEL])
        env = base_env(self.rd, {**self.ctxd.env, **extra_env})
        res = run(argv, cwd=self.rd.work, env=env, timeout=60)
        assert res.returncode == 0, res.describe()
        return res

    def session_id(self) -> str:
        rows = [s for s in self.ctxd.status()["sessions"] if s.get("transcript_path")]
        assert len(rows) == 1, rows
        return str(rows[0]["session_id"])


def pi_prepare(rd: RunDir, mock: Mock) -> Path:
    """`~/.pi/agent/models.json` (the mock as an OpenAI-compatible provider) and an empty
    settings.json (returned), which `ctxd install pi` edits."""
    agent = rd.home / ".pi" / "agent"
    provider: Json = {
        "baseUrl": f"{mock.url}/v1",
        "api": "openai-completions",
        "apiKey": "sk-dummy-key-0000000000",
        "compat": {"supportsDeveloperRole": False, "supportsReasoningEffort": False},
        "models": [{"id": MODEL, "contextWindow": WINDOW, "maxTokens": 8000}],
    }
    write_json(agent / "models.json", {"providers": {"mock": provider}})
    settings = agent / "settings.json"
    write_json(settings, {})
    return settings


@pytest.fixture
def make_rig(pi_bin: Path, netns: bool, tmp_path: Path) -> Iterator[Callable[..., Rig]]:
    with ExitStack() as cleanup:

        def make(steps: list[Json], config: str = "", cli: Path = pi_bin) -> Rig:
            rd = RunDir.create(tmp_path)
            # counter: a compaction rewrites the history the step index is read from
            script: Json = {"steps": steps, "step_mode": "counter"}
            mock = Mock("mock_openai_chat", rd.root, script, netns=netns)
            cleanup.callback(mock.stop)
            mock.start()
            ctxd = Ctxd(rd, config, {})
            ctxd.install("pi", pi_prepare(rd, mock))
            cleanup.callback(ctxd.stop)
            ctxd.start(mock.wrap)
            return Rig(cli, rd, ctxd, mock)

        yield make


def test_warnings_handoff_and_compaction(make_rig: Callable[..., Rig]) -> None:
    """Ten bash calls climbing past WARNING, CRITICAL and the handoff point; the last answer's
    190,040 makes pi compact. In the next run (`--continue`) the first call over
    the threshold warns at once (without the reset it would be inside the debounce)."""
    # call:     0       1        2(W)     3-6 (debounced)                      7(W: 5th)
    first = [50_000, 100_000, 120_000, 121_000, 122_000, 123_000, 124_000, 125_000]
    first += [140_000, 141_000]  # 8(C: escalation), 9
    second = [30_000, 120_000]  # 10, 11(W: CRITICAL at 8 would hold it back without a reset)
    # pi 1.x compacts only when there is history to summarise: more than the 20,000 tokens it
    # keeps (`keepRecentTokens`) by its own estimate of the messages, whatever the usage says
    steps = [*tool_steps(first, 190_000, command=BULKY), *tool_steps(second, 121_000)]
    rig = make_rig(steps)

    res = rig.pi("Run the steps")
    main = rig.main()
    assert len(main) == 11, res.describe()
    assert res.stdout.strip() == "Done.", res.describe()
    assert at_calls(main, WARNING) == [2, 7]
    assert at_calls(main, CRITICAL) == [8]
    # the handoff: agent_end's systemMessage, which the extension prints on stderr in -p mode
    assert res.stderr.count(HANDOFF) == 1, res.describe()
    assert not any(HANDOFF in json.dumps(r["body"]) for r in main)
    sid = rig.session_id()
    row = rig.ctxd.session(sid)
    assert row["agent"] == "pi"
    assert row["window"] == WINDOW
    assert row["window_source"] == "agent", row  # the extension's ctxd entry

    res = rig.pi("Go on", "--continue")
    main = rig.main()
    assert len(main) == 14, res.describe()
    # request 11 answers with call 10 (30,000), request 12 with call 11 (120,000), whose result
    # request 13 carries: at_calls counts requests, so the final answer of run 1 shifts it to 12
    assert at_calls(main, WARNING) == [2, 7, 12]
    assert res.stderr.count(HANDOFF) == 0, res.describe()
    # 190,040 is over 183,616: pi compacts once, as the first run's loop ends (its agent_end
    # handling; `pi -p` may exit before it is done) or else before the next prompt is sent
    assert len(rig.mock.requests_of_kind("aux")) == 1, "pi did not ask for one summary"
    row = rig.ctxd.session(sid)
    assert row["compactions"] == 1, row
    assert row["tokens"] == 121_000  # the mock's prompt_tokens
    assert row["estimated"] is False
    # the session ended with pi's session_shutdown: /metrics keeps its counters, not its gauges
    metrics = rig.ctxd.ctl("metrics").stdout
    assert 'ctxd_warnings_total{agent="pi",severity="warning"} 3' in metrics, metrics
    assert row["ended_at"] is not None


def test_without_a_daemon_the_session_completes_quietly(make_rig: Callable[..., Rig]) -> None:
    rig = make_rig(tool_steps([120_000, 140_000], 141_000))
    rig.ctxd.stop_with_cli()
    res = rig.pi("Run the steps", CTXD_NO_SPAWN="1")
    assert res.stdout.strip() == "Done.", res.describe()
    assert res.stderr.strip() == "", res.describe()
    assert "CONTEXT " not in json.dumps([r["body"] for r in rig.main()])
    assert not Path(rig.ctxd.env["CTXD_SOCKET"]).exists(), "a daemon was spawned"


def test_the_first_session_start_starts_the_daemon(make_rig: Callable[..., Rig]) -> None:
    """With no daemon (and spawning allowed) the extension starts one, with the command in the
    `ctxd-command` file beside the client; it finds the session from its transcript."""
    rig = make_rig(tool_steps([20_000], 21_000))
    rig.ctxd.stop_with_cli()
    rig.pi("Run the steps", CTXD_NO_SPAWN="0")
    try:
        assert wait_for(lambda: rig.ctxd.ctl("status", "--json").returncode == 0, 20)
        assert wait_for(
            lambda: any(s.get("tokens") == 21_000 for s in rig.ctxd.status()["sessions"]), 20
        ), rig.ctxd.status()
    finally:
        rig.ctxd.ctl("stop")


def test_a_daemon_stopped_mid_run_is_started_again(make_rig: Callable[..., Rig]) -> None:
    """The model's own bash call runs `ctxd stop`: the tool result after it finds no daemon and
    the extension starts one, without waiting; the next call's CRITICAL and the handoff at the
    loop's end come from the new daemon."""
    # call:  0(W)     1(ctxd stop)  2(C; `sleep 3`: the new daemon comes up meanwhile)
    steps = tool_steps([120_000, 121_000, 140_000], 141_000)
    steps[1]["tool"]["arguments"]["command"] = f"{shlex.quote(PYTHON)} -m ctxd stop"
    steps[2]["tool"]["arguments"]["command"] = "sleep 3"
    rig = make_rig(steps)
    first = rig.ctxd.status()["daemon"]["pid"]
    try:
        res = rig.pi("Run the steps", CTXD_NO_SPAWN="0")
        main = rig.main()
        assert len(main) == 4, res.describe()
        assert at_calls(main, WARNING) == [0]
        assert at_calls(main, CRITICAL) == [2]
        assert res.stderr.count(HANDOFF) == 1, res.describe()
        assert rig.ctxd.status()["daemon"]["pid"] != first
    finally:
        rig.ctxd.ctl("stop")


def test_a_block_handoff_starts_one_more_turn(make_rig: Callable[..., Rig]) -> None:
    """With `action = "block"` the extension sends the handoff request as a follow-up user
    message: pi runs one more turn with it, and the next agent_end is not blocked again."""
    steps = [
        *tool_steps([130_000], 131_000, "Paused."),
        {"text": "Noted.", "usage": chat_usage(132_000)},
    ]
    rig = make_rig(steps, '[handoff]\naction = "block"\n')
    res = rig.pi("Run the steps")
    main = rig.main()
    assert len(main) == 3, res.describe()
    assert marks(main, HANDOFF, last_turn_text_chat) == [False, False, True]
    assert HANDOFF not in res.stderr, res.describe()


def test_pi_0_73_still_warns_and_blocks_for_a_handoff(
    make_rig: Callable[..., Rig], pi0_bin: Path
) -> None:
    """A smoke test of the last `@mariozechner/pi-coding-agent` (0.73.1, Node 20): a warning
    reaches the model and a block handoff starts one more turn, as on 1.x."""
    steps = [
        *tool_steps([120_000, 130_000], 131_000, "Paused."),
        {"text": "Noted.", "usage": chat_usage(132_000)},
    ]
    rig = make_rig(steps, '[handoff]\naction = "block"\n', cli=pi0_bin)
    res = rig.pi("Run the steps")
    assert "0.73.1" in cli_version(pi0_bin)
    main = rig.main()
    assert len(main) == 4, res.describe()
    assert at_calls(main, WARNING) == [0]
    assert marks(main, HANDOFF, last_turn_text_chat) == [False, False, False, True]


@pytest.mark.parametrize("version", ["pi_bin", "pi0_bin"], ids=["pi-1.x", "pi-0.73"])
def test_a_daemon_that_blocks_every_agent_end_gets_one_handoff_turn(
    make_rig: Callable[..., Rig], version: str, request: pytest.FixtureRequest
) -> None:
    """A broken daemon (a stand-in on the extension's socket) answers every hook with a handoff
    block. pi, held open in RPC mode (`pi -p` exits after the handoff turn anyway), runs that
    turn once; the agent_end it causes is told so (`stop_hook_active`) and, blocked again,
    starts none: the session stays idle."""
    steps = [
        *tool_steps([130_000], 131_000, "Paused."),
        {"text": "Noted.", "usage": chat_usage(132_000)},  # every turn after
    ]
    rig = make_rig(steps, cli=request.getfixturevalue(version))
    block = {"decision": "block", "reason": f"{HANDOFF} write the handoff note"}
    standin = StandIn(rig.rd.root / "standin.sock", (json.dumps(block).encode(),))
    extra = {**rig.ctxd.env, "CTXD_SOCKET": str(standin.path), "CTXD_NO_SPAWN": "1"}
    argv = rig.mock.wrap([str(rig.bin), "--mode", "rpc", "--provider", "mock", "--model", MODEL])

    def ends() -> list[bool]:
        return [p["stop_hook_active"] for p in standin.payloads if "stop_hook_active" in p]

    with (
        (rig.rd.root / "pi-rpc.log").open("wb") as log,
        subprocess.Popen(
            argv,
            cwd=rig.rd.work,
            env=base_env(rig.rd, extra),
            stdin=subprocess.PIPE,
            stdout=log,
            stderr=log,
        ) as proc,
    ):
        assert proc.stdin is not None
        try:
            proc.stdin.write(b'{"type": "prompt", "message": "Run the steps"}\n')
            proc.stdin.flush()
            # the call, the answer, the handoff turn's answer; without the guard, a turn per
            # agent_end
            assert wait_for(lambda: ends()[-1:] == [True], 60), rig.main()
            time.sleep(5)  # a model turn with the mock takes well under a second
            main = rig.main()
            assert len(main) == 3, main
            assert marks(main, HANDOFF, last_turn_text_chat) == [False, False, True]
        finally:
            proc.kill()
            standin.close()
    assert ends() == [False, True]
