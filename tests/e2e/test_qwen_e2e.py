"""Qwen Code, the real CLI, offline against mock_openai_chat.py in a loopback-only network
namespace, wired to a real ctxd daemon.

Qwen Code runs qwen3-coder-plus with a 1,000,000 window (it says so in every recorded answer)
and compresses at min(85 %, window - 33,000) of it: 850,000. On ctxd's default "compaction"
basis, which counts the prompt plus the answer's output (40 tokens here), as Qwen Code does, that
puts WARNING from 552,500 (35 % of the room before compression left), CRITICAL from 637,500
(25 %), the handoff from 595,000 (70 % used).
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from e2e_support import (
    AgentRig,
    Ctxd,
    Json,
    Mock,
    Result,
    RunDir,
    at_calls,
    base_env,
    capture_hook_command,
    chat_usage,
    last_turn_text_chat,
    marks,
    run,
    shell_command,
    write_json,
)

pytestmark = pytest.mark.e2e

MODEL = "qwen3-coder-plus"
API_KEY = "sk-dummy-key-0000000000"
WARNING = "CONTEXT WARNING:"
CRITICAL = "CONTEXT CRITICAL:"
HANDOFF = "CONTEXT HANDOFF:"
EVENTS = ("SessionStart", "UserPromptSubmit", "PreToolUse", "PostToolUse", "Stop", "PostCompact")


# ------------------------------------------------------------------------------------ Qwen Code
def qwen_prepare(rd: RunDir, hooks: Json | None = None) -> Path:
    """Write `~/.qwen/settings.json` (returned): the OpenAI-compatible provider, the model, and
    no update checks, usage statistics or telemetry (which would reach outside hosts)."""
    settings: Json = {
        "security": {"auth": {"selectedType": "openai"}},
        "model": {"name": MODEL},
        "general": {"enableAutoUpdate": False},
        "privacy": {"usageStatisticsEnabled": False},
        "telemetry": {"enabled": False},
    }
    if hooks is not None:
        settings["hooks"] = hooks
    path = rd.home / ".qwen" / "settings.json"
    write_json(path, settings)
    return path


def qwen_capture_hooks() -> Json:
    hooks: Json = {}
    for event in EVENTS:
        group: Json = {"hooks": [{"type": "command", "command": capture_hook_command(event)}]}
        if event.endswith("ToolUse"):
            group["matcher"] = "*"
        hooks[event] = [group]
    return hooks


def qwen_env(rd: RunDir, mock: Mock, extra: Mapping[str, str] | None = None) -> dict[str, str]:
    return base_env(
        rd,
        {
            "OPENAI_API_KEY": API_KEY,
            "OPENAI_BASE_URL": f"{mock.url}/v1",
            "OPENAI_MODEL": MODEL,
            "QWEN_CODE_SUPPRESS_YOLO_WARNING": "1",
            # besides the namespace: anything not for loopback goes to the mock, which refuses it
            "HTTPS_PROXY": mock.url,
            "HTTP_PROXY": mock.url,
            "NO_PROXY": "127.0.0.1,localhost",
            **(extra or {}),
        },
    )


def tool_steps(n: int, prompts: Sequence[int] | None = None, final: str = "Done.") -> list[Json]:
    """`n` shell calls, then a text answer; step i reports prompt_tokens prompts[i]."""
    steps: list[Json] = [{"shell": shell_command(i, 0)} for i in range(n)]
    steps.append({"text": final})
    if prompts is not None:
        for i, step in enumerate(steps):
            step["usage"] = chat_usage(prompts[min(i, len(prompts) - 1)])
    return steps


def test_smoke_scripted_tool_calls_with_hooks(qwen_bin: Path, netns: bool, tmp_path: Path) -> None:
    """The harness itself: a -p session of three shell calls completes, the hooks fire, and a
    PostToolUse hook's additionalContext reaches the model right after its own call."""
    rd = RunDir.create(tmp_path)
    qwen_prepare(rd, qwen_capture_hooks())
    mock = Mock("mock_openai_chat", rd.root, {"steps": tool_steps(3)}, netns=netns).start()
    try:
        res = run(
            mock.wrap([str(qwen_bin), "-p", "Run the steps", "--yolo"]),
            cwd=rd.work,
            env=qwen_env(rd, mock),
        )
    finally:
        mock.stop()
    assert res.returncode == 0, res.describe()
    assert res.stdout.strip() == "Done.", res.describe()

    labels = [h["label"] for h in rd.hooks()]
    assert labels.count("PostToolUse") == 3, labels
    for event in ("SessionStart", "UserPromptSubmit", "PreToolUse", "Stop"):
        assert event in labels, labels
    assert not mock.requests_of_kind("proxy"), "the CLI tried to reach an outside host"
    main = mock.main_requests()
    assert len(main) == 4
    assert all(r["body"]["stream_options"] == {"include_usage": True} for r in main)
    for n in (1, 2, 3):
        arrived = marks(main, f"E2E-SMOKE-MARKER-{n}", last_turn_text_chat)
        assert arrived == [i == n for i in range(4)], (n, arrived)


# ------------------------------------------------------------------------------------ the rig
@dataclass
class Rig(AgentRig):
    settings: Path
    #: Put before the CLI's command line (e.g. strace's).
    prefix: list[str] = field(default_factory=list)

    def qwen(self, *args: str, **extra_env: str) -> Result:
        argv = [*self.prefix, *self.mock.wrap([str(self.bin), "-p", *args, "--yolo"])]
        env = qwen_env(self.rd, self.mock, {**self.ctxd.env, **extra_env})
        res = run(argv, cwd=self.rd.work, env=env)
        assert res.returncode == 0, res.describe()
        return res

    def reported(self) -> list[int]:
        """The prompt_tokens the mock reported to the agent loop, in order."""
        return [r["answer"]["usage"]["prompt_tokens"] for r in self.main()]

    def session_id(self) -> str:
        rows = [s for s in self.ctxd.status()["sessions"] if s.get("transcript_path")]
        assert len(rows) == 1, rows
        return str(rows[0]["session_id"])


def rig_maker(
    qwen_bin: Path, netns: bool, tmp_path: Path, cleanup: ExitStack, *install: str
) -> Callable[..., Rig]:
    """`make(steps, config, counter=...)`: a run dir, ctxd installed with `ctxd install qwen
    INSTALL...` and a daemon, the mock. The daemon runs in the mock's network namespace, where
    the CLI runs: its HTTP hooks reach the daemon's loopback listener there (the Unix socket is
    a file, reached from anywhere)."""

    def make(steps: list[Json], config: str = "", *, counter: bool = False) -> Rig:
        rd = RunDir.create(tmp_path)
        settings = qwen_prepare(rd)
        ctxd = Ctxd(rd, config, {})
        ctxd.install("qwen", settings, *install)
        script: Json = {"steps": steps}
        if counter:
            script["step_mode"] = "counter"  # compression rewrites the history
        mock = Mock("mock_openai_chat", rd.root, script, netns=netns)
        cleanup.callback(mock.stop)  # registered before each start: a failed start leaks nothing
        mock.start()
        cleanup.callback(ctxd.stop)  # stopped before the mock, whose namespace it runs in
        ctxd.start(mock.wrap)
        return Rig(qwen_bin, rd, ctxd, mock, settings)

    return make


@pytest.fixture
def make_rig(qwen_bin: Path, netns: bool, tmp_path: Path) -> Iterator[Callable[..., Rig]]:
    with ExitStack() as cleanup:
        yield rig_maker(qwen_bin, netns, tmp_path, cleanup)


# ------------------------------------------------------------------------------------ tests
def test_warnings_follow_the_debounce_escalate_and_hand_off_once(
    make_rig: Callable[..., Rig],
) -> None:
    warnings_session(make_rig)


def warnings_session(
    make_rig: Callable[..., Rig], rig_ready: Callable[[Rig], object] | None = None
) -> tuple[Rig, Result]:
    """Ten shell calls climbing past WARNING, CRITICAL and the handoff point (also run with
    HTTP hooks by test_qwen_http_e2e); `rig_ready` sees the rig before the CLI runs."""
    # call:    0        1        2(W)     3-6 (quiet, debounced)              7(W: 5th)
    prompt = [
        100_000,
        300_000,
        555_000,
        560_000,
        565_000,
        570_000,
        575_000,
        580_000,
        # 8(C: escalation) 9       final answer (Stop: 76 % used -> handoff)
        640_000,
        645_000,
        650_000,
    ]
    rig = make_rig(tool_steps(10, prompt))
    if rig_ready is not None:
        rig_ready(rig)
    res = rig.qwen("Run the steps")

    main = rig.main()
    assert len(main) == 11
    # UserPromptSubmit fires before every continuation too: it adds nothing the calls did not
    assert at_calls(main, WARNING) == [2, 7]
    assert at_calls(main, CRITICAL) == [8]
    # the handoff is Stop's systemMessage, which Qwen Code prints on stderr, once (call 9's
    # 645,000 is past the handoff point too: see the next test on when Stop sees what)
    assert res.stderr.count(HANDOFF) == 1, res.describe()
    assert not any(HANDOFF in json.dumps(r["body"]) for r in main)

    row = rig.ctxd.session(rig.session_id())
    assert row["agent"] == "qwen"
    assert row["tokens"] == rig.reported()[-1] == 650_000  # exactly what the mock reported
    assert row["window"] == 1_000_000  # the contextWindowSize Qwen Code recorded
    return rig, res


def test_compression_restarts_the_debounce_and_block_handoff_runs_once(
    make_rig: Callable[..., Rig],
) -> None:
    block_handoff_session(make_rig)


def block_handoff_session(make_rig: Callable[..., Rig]) -> tuple[Rig, Result]:
    """With `action = "block"` the handoff blocks Stop: Qwen Code starts a new turn with ctxd's
    reason as the user's text. The reported 900,000 makes it compress before that turn, and the
    first call after it warns at once (without the reset it would be the 3rd call after a
    warning, inside the debounce).

    Call 1 is past the handoff point already: Qwen Code queues its transcript writes, and its
    Stop hook may run before the answer it follows is on disk (seen once in two runs), when
    ctxd still has call 1's figure."""
    config = '[handoff]\naction = "block"\n'
    steps = [
        *tool_steps(2, [560_000, 600_000])[:2],  # W at call 0, call 1 debounced
        {"text": "Paused.", "usage": chat_usage(900_000)},  # >= 850,000: compress next request
        # the continuation turn that ctxd's block started
        *tool_steps(1, [560_000, 565_000]),
    ]
    rig = make_rig(steps, config, counter=True)
    res = rig.qwen("Run the steps")

    assert rig.mock.requests_of_kind("compress"), "Qwen Code did not compress"
    main = rig.main()
    assert len(main) == 5, res.describe()
    # the reason arrives once, as the text of the turn the block started
    assert marks(main, HANDOFF, last_turn_text_chat) == [False, False, False, True, False]
    warned = at_calls(main, WARNING)
    assert warned[0] == 0 and warned[-1] == 3, warned
    row = rig.ctxd.session(rig.session_id())
    assert row["compactions"] >= 1
    assert row["tokens"] == rig.reported()[-1] == 565_000
    assert res.stdout.strip().endswith("Done."), res.describe()
    return rig, res


def test_without_a_daemon_the_session_completes_quietly(make_rig: Callable[..., Rig]) -> None:
    rig = make_rig(tool_steps(3, [560_000, 640_000, 645_000, 650_000]))
    rig.ctxd.stop_with_cli()
    res = rig.qwen("Run the steps", CTXD_NO_SPAWN="1")
    assert res.stdout.strip() == "Done.", res.describe()
    assert [line for line in res.stderr.splitlines() if "hook" in line.lower()] == []
    assert "CONTEXT " not in json.dumps([r["body"] for r in rig.main()]) + res.stderr
    assert not Path(rig.ctxd.env["CTXD_SOCKET"]).exists(), "a daemon was spawned"
    assert not os.path.exists(rig.ctxd.env["CTXD_SOCKET"])
