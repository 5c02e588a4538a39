"""OpenCode, the real CLI (`opencode run`), offline against mock_openai_chat.py in a loopback-only
network namespace, with ctxd's plugin installed and a real ctxd daemon reading its database.

The mock model ("mock/mock-model") has a 200,000 window (ctxd's `[windows]`, and the provider's
`limit.context` for OpenCode); OpenCode compacts at 200,000 - 32,000 = 168,000 of the prompt plus
the answer's output (40 here). WARNING from 35 % of that room left (prompt 109,160), CRITICAL
from 25 % (126,000 - 40).

OpenCode writes a step's `step-finish` part (its figures) after the step's tools ran, so the
plugin's `tool.execute.after` for call i is judged on step i - 1's figure: ctxd's text for a
figure first reported at step i reaches the model in the request after call i + 1. The handoff
is asked when the session goes idle at 70 % of the room used (117,600 - 40): the plugin sends
it as the user's next message, and `opencode run` answers it before it exits.
"""

from __future__ import annotations

import json
import shlex
import shutil
import sqlite3
import time
from collections.abc import Iterator, Mapping, Sequence
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
    Tmux,
    at_calls,
    base_env,
    last_turn_text_chat,
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
#: In OpenCode's request for a compaction's summary (1.18.33), which offers no tools.
SUMMARY_PROMPT = "Do not mention the summary process"


def opencode_config(rd: RunDir, ctxd: Ctxd, mock: Mock) -> Path:
    """OpenCode's config (where ctxd's XDG_CONFIG_HOME puts it): the mock as an
    OpenAI-compatible provider, no autoupdate, no sharing."""
    path = Path(ctxd.env["XDG_CONFIG_HOME"]) / "opencode" / "opencode.json"
    write_json(
        path,
        {
            "$schema": "https://opencode.ai/config.json",
            "autoupdate": False,
            "share": "disabled",
            "model": f"mock/{MODEL}",
            "provider": {
                "mock": {
                    "npm": "@ai-sdk/openai-compatible",
                    "name": "Mock",
                    "options": {"baseURL": f"{mock.url}/v1", "apiKey": "sk-dummy"},
                    "models": {
                        MODEL: {"name": "Mock", "limit": {"context": WINDOW, "output": 32_000}}
                    },
                }
            },
        },
    )
    return path


def env(rd: RunDir, mock: Mock, extra: Mapping[str, str]) -> dict[str, str]:
    return base_env(
        rd,
        {
            "OPENCODE_DISABLE_MODELS_FETCH": "1",
            "OPENCODE_DISABLE_AUTOUPDATE": "1",
            "HTTPS_PROXY": mock.url,
            "HTTP_PROXY": mock.url,
            "NO_PROXY": "127.0.0.1,localhost",
            **extra,
        },
    )


def bash_steps(prompts: Sequence[int]) -> list[Json]:
    """One `bash` call per figure but the last, then a text answer; step i reports prompts[i]."""
    steps: list[Json] = []
    for i, prompt in enumerate(prompts):
        step: Json = (
            {"text": "Done."}
            if i == len(prompts) - 1
            else {
                "tool": {
                    "name": "bash",
                    "arguments": {"command": f"echo E2E-STEP-{i}", "description": f"step {i}"},
                }
            }
        )
        step["usage"] = usage(prompt)
        steps.append(step)
    return steps


def usage(prompt: int) -> Json:
    return {"prompt_tokens": prompt, "completion_tokens": 40, "cached_tokens": 0}


@dataclass
class Rig(AgentRig):
    def opencode(self, prompt: str, **extra: str) -> Result:
        argv = self.mock.wrap([str(self.bin), "run", prompt])
        res = run(argv, cwd=self.rd.work, env=env(self.rd, self.mock, {**self.ctxd.env, **extra}))
        assert res.returncode == 0, res.describe()
        return res

    def database(self) -> Path:
        return self.rd.home / ".local" / "share" / "opencode" / "opencode.db"


@pytest.fixture
def rig(opencode_bin: Path, netns: bool, tmp_path: Path) -> Iterator[Rig]:
    with ExitStack() as cleanup:
        rd = RunDir.create(tmp_path)
        ctxd = Ctxd(rd, f'[windows]\n"{MODEL}" = {WINDOW}\n', {})
        mock = Mock("mock_openai_chat", rd.root, {"steps": [{"text": "idle"}]}, netns=netns)
        cleanup.callback(mock.stop)
        mock.start()
        cleanup.callback(ctxd.stop)
        yield Rig(opencode_bin, rd, ctxd, mock)


def start(rig: Rig, steps: list[Json], **script: object) -> None:
    rig.mock.stop()
    rig.mock.script = {"steps": steps, **script}
    rig.mock.start()
    rig.ctxd.install("opencode", opencode_config(rig.rd, rig.ctxd, rig.mock))  # the new port


def handoffs(main: list[Json]) -> list[int]:
    """The requests whose new user message is ctxd's handoff request."""
    return [
        i
        for i, r in enumerate(main)
        if any(
            m.get("role") == "user" and HANDOFF in json.dumps(m)
            for m in json.loads(last_turn_text_chat(r["body"]))
        )
    ]


def test_warnings_and_the_handoff_reach_the_model_and_status_has_the_mock_figures(
    rig: Rig,
) -> None:
    # step:  0       1        2(W)     3        4        5        6        7(W 5th)  8(C)
    prompts = [50_000, 60_000, 110_000, 111_000, 112_000, 113_000, 114_000, 115_000, 127_000]
    # ... step 9 one more call, so that step 8's CRITICAL is judged; the answer at 76 % used
    start(rig, bash_steps([*prompts, 127_500, 128_000]))
    rig.ctxd.start(rig.mock.wrap)
    res = rig.opencode("Run the steps")
    assert "Done." in res.stdout, res.describe()
    assert not rig.mock.requests_of_kind("proxy") or all(
        "registry.npmjs.org" in json.dumps(r) for r in rig.mock.requests_of_kind("proxy")
    )

    main = rig.main()
    # 10 tool calls, the answer, and the answer to the handoff request
    assert len(main) == len(prompts) + 3
    # one call late (see the module docstring): step 2's figure warns at call 3, ...
    assert at_calls(main, WARNING) == [3, 8]
    assert at_calls(main, CRITICAL) == [9]
    # asked once, when the session went idle, as the user's message; its answer's idle is
    # not asked again
    assert handoffs(main) == [len(main) - 1]

    rows = [s for s in rig.ctxd.status()["sessions"] if s["agent"] == "opencode"]
    assert len(rows) == 1, rows
    assert rows[0]["tokens"] == 128_000  # the mock's last prompt_tokens, exactly
    assert rows[0]["window"] == WINDOW
    assert rows[0]["handoff_asked"] is True


def test_a_real_compaction_resets_the_warnings(rig: Rig) -> None:
    # step 3 reports 170,000 + 40 (over 168,000): OpenCode compacts after its call, asks the
    # model for a summary and goes on with a synthetic "Continue" message
    # step:  0       1(W)     2        3(over)  4       5(W)     6        7
    prompts = [50_000, 115_000, 116_000, 170_000, 60_000, 115_000, 116_000, 117_000]
    start(rig, bash_steps(prompts), step_mode="counter")
    rig.ctxd.start(rig.mock.wrap)
    res = rig.opencode("Run the steps")
    assert "Done." in res.stdout, res.describe()

    main = rig.main()
    assert len(main) == len(prompts)
    summaries = [
        r for r in rig.mock.requests() if SUMMARY_PROMPT in json.dumps(r.get("body") or {})
    ]
    assert len(summaries) == 1, [r.get("answer") for r in rig.mock.requests()]
    assert main[3]["ts"] < summaries[0]["ts"] < main[4]["ts"]
    # step 5's WARNING is given at once: without the reset, call 1's would hold it back
    # (the debounce repeats it only 5 calls later, at call 7)
    assert at_calls(main, WARNING) == [2, 6]
    assert handoffs(main) == []  # 117,040 is under 70 % of 168,000

    rows = [s for s in rig.ctxd.status()["sessions"] if s["agent"] == "opencode"]
    assert len(rows) == 1, rows
    assert rows[0]["compactions"] == 1
    assert rows[0]["tokens"] == 117_000


def test_a_stopped_daemon_leaves_the_session_working_quietly(rig: Rig) -> None:
    start(rig, bash_steps([120_000, 130_000, 140_000]))
    rig.ctxd.start(rig.mock.wrap)
    rig.ctxd.stop_with_cli()
    res = rig.opencode("Run the steps", CTXD_NO_SPAWN="1")
    assert "Done." in res.stdout, res.describe()
    assert "ctxd" not in res.stderr.lower(), res.describe()
    assert "CONTEXT " not in json.dumps([r["body"] for r in rig.main()])
    assert len(rig.main()) == 3  # no handoff turn either
    assert not Path(rig.ctxd.env["CTXD_SOCKET"]).exists(), "a daemon was spawned"


def test_with_no_daemon_the_first_tool_call_starts_one(rig: Rig) -> None:
    """No daemon and spawning allowed: the plugin's first tool call starts one, with the command
    in the `ctxd-command` file beside the client, and goes on; the daemon finds the session in
    the database, and its WARNING reaches the model a few calls later."""
    # step:  0        1(slow)  2(W)     3        4        5
    steps = bash_steps([50_000, 60_000, 110_000, 111_000, 112_000, 113_000])
    # the second call gives the new daemon time to come up (it is not waited for)
    steps[1]["tool"]["arguments"] = {"command": "sleep 4", "description": "slow"}
    start(rig, steps)
    assert not Path(rig.ctxd.env["CTXD_SOCKET"]).exists()
    try:
        res = rig.opencode("Run the steps", CTXD_NO_SPAWN="0")
        assert "Done." in res.stdout, res.describe()
        main = rig.main()
        assert len(main) == 6, res.describe()
        # step 2's figure, given at call 3 as with a daemon already running
        assert at_calls(main, WARNING) == [3], [last_turn_text_chat(r["body"]) for r in main]

        def tokens() -> list[int]:
            return [s["tokens"] for s in rig.ctxd.status()["sessions"] if s["agent"] == "opencode"]

        assert wait_for(lambda: tokens() == [113_000], 10), rig.ctxd.status()
    finally:
        rig.ctxd.ctl("stop")


def test_a_daemon_stopped_mid_run_is_started_again(rig: Rig) -> None:
    """The plugin starts the daemon at the run's first call; the model's own bash call runs
    `ctxd stop`, a few seconds later. The first call at least 10 s after that start (after a long
    one) starts the daemon again, and its CRITICAL and the handoff still reach the model."""
    # step:  0        1(slow)  2        3(W)     4(stop)  5(slow)  6(slow)  7        8(C)
    steps = bash_steps(
        [50_000, 60_000, 110_000, 111_000, 112_000, 113_000, 114_000, 127_000, 128_000, 128_500]
    )
    commands = {1: "sleep 3", 4: f"{shlex.quote(PYTHON)} -m ctxd stop", 5: "sleep 8", 6: "sleep 2"}
    for i, command in commands.items():
        steps[i]["tool"]["arguments"] = {"command": command, "description": f"step {i}"}
    start(rig, steps)
    assert not Path(rig.ctxd.env["CTXD_SOCKET"]).exists()
    try:
        res = rig.opencode("Run the steps", CTXD_NO_SPAWN="0")
        main = rig.main()
        texts = [last_turn_text_chat(r["body"]) for r in main]
        assert "ctxd stopped" in texts[5], res.describe()  # call 4's output
        assert at_calls(main, WARNING) == [3], texts
        assert at_calls(main, CRITICAL) == [8], texts
        # 9 tool calls, the answer, and the answer to the handoff request
        assert len(main) == 11 and handoffs(main) == [10], res.describe()
    finally:
        rig.ctxd.ctl("stop")


def test_the_ui_asks_the_handoff_once_and_quits_during_its_turn(rig: Rig, tmp_path: Path) -> None:
    """The interactive UI under tmux: the handoff request is the user's next message, on screen
    too, answered once; /exit while that answer's tool runs quits at once (the plugin's
    `dispose`, which `opencode run` waits on, does not hold the UI)."""
    if shutil.which("tmux") is None:
        pytest.skip("tmux not installed (apt-get install tmux)")
    steps = bash_steps([50_000, 120_000, 125_000])  # the answer at 74 % used
    slow = {"command": "sleep 30", "description": "slow"}
    steps.append({"tool": {"name": "bash", "arguments": slow}, "usage": usage(126_000)})
    start(rig, steps)
    rig.ctxd.start(rig.mock.wrap)
    words = " ".join(
        shlex.quote(f"{k}={v}") for k, v in env(rig.rd, rig.mock, rig.ctxd.env).items()
    )
    argv = shlex.join(rig.mock.wrap([str(rig.bin), "--prompt", "Run the steps"]))
    tmux = Tmux(tmp_path / "tmux.sock", "opencode")
    work = shlex.quote(str(rig.rd.work))
    tmux.start(f"cd {work} && env -i {words} {argv}; echo OPENCODE-EXITED; sleep 30")
    try:
        assert wait_for(lambda: len(rig.main()) == 4, 90), tmux.pane()
        assert handoffs(rig.main()) == [3]
        assert tmux.wait("sleep 30", 20), tmux.pane()
        assert "CONTEXT HANDOFF:" in tmux.pane()
        began = time.monotonic()
        tmux.send("/exit")
        assert tmux.wait("OPENCODE-EXITED", 15), tmux.pane()
        assert time.monotonic() - began < 10
    finally:
        tmux.kill()
    assert len(rig.main()) == 4


#: A long session's history, before its compaction: BIG_PARTS user messages of BIG_PART chars.
BIG_PARTS = 400
BIG_PART = 1_000_000


def add_history_before(database: Path, session_id: str) -> None:
    """BIG_PARTS old requests of BIG_PART characters each (~400 MB), then an automatic compaction
    as OpenCode 1.18.33 records it (tests/data/transcripts/opencode-1.18.33/opencode.compact.db),
    all before the session's first message: OpenCode leaves what precedes a compaction out of
    its requests, but the history is the session's. One transaction, as fast as SQLite writes."""
    db = sqlite3.connect(database)
    first = db.execute(
        "select min(time_created) from message where session_id = ?", (session_id,)
    ).fetchone()[0]
    at = first - 10_000_000
    model = {"providerID": "mock", "modelID": MODEL}
    body = "Please keep this whole log in mind. " * (BIG_PART // 36)
    messages: list[tuple[str, str, int, int, str]] = []
    parts: list[tuple[str, str, str, int, int, str]] = []

    def message(n: int, data: Json) -> str:
        mid = f"msg_{n:012x}oldHistoryOld"
        data = {**data, "time": {"created": at + n}}
        messages.append((mid, session_id, at + n, at + n, json.dumps(data)))
        return mid

    def part(n: int, mid: str, data: Json) -> None:
        parts.append(
            (f"prt_{n:012x}oldHistoryOld", mid, session_id, at + n, at + n, json.dumps(data))
        )

    user = {"role": "user", "agent": "build", "model": model, "summary": {"diffs": []}}
    for i in range(BIG_PARTS):
        mid = message(2 * i + 1, user)
        part(2 * i + 1, mid, {"type": "text", "text": f"OLD-REQUEST-{i}: {body}"})
    n = 2 * BIG_PARTS + 1
    asked = message(n, user)
    part(n, asked, {"type": "compaction", "auto": True, "overflow": False})
    summary = {
        "role": "assistant",
        "parentID": asked,
        "mode": "compaction",
        "agent": "compaction",
        "summary": True,
        "path": {"cwd": "/", "root": "/"},
        "cost": 0,
        "tokens": {"total": 205, "input": 200, "output": 5, "reasoning": 0, "cache": {}},
        "modelID": MODEL,
        "providerID": "mock",
        "finish": "stop",
    }
    done = message(n + 1, summary)
    part(n + 1, done, {"type": "step-start"})
    part(n + 2, done, {"type": "text", "text": "The earlier work, summarised."})
    tokens = {"total": 205, "input": 200, "output": 5, "reasoning": 0, "cache": {}}
    part(n + 3, done, {"type": "step-finish", "reason": "stop", "tokens": tokens, "cost": 0})
    with db:
        db.executemany("insert into message values (?, ?, ?, ?, ?)", messages)
        db.executemany("insert into part values (?, ?, ?, ?, ?, ?)", parts)
    db.close()


@pytest.mark.slow
def test_a_400_mb_session_still_gets_its_handoff(rig: Rig) -> None:
    """A session with ~400 MB of history before its compaction: its handoff still reaches the
    model when it goes idle past the handoff point (the answer does not read the session)."""
    steps = bash_steps([50_000, 60_000])  # the first run: one call, then the answer
    # after the history (each of OpenCode's steps loads it all): an answer past 70 % used, then
    # the answer to the handoff request
    steps += [
        {"text": "Done.", "usage": usage(125_000)},
        {"text": "Noted.", "usage": usage(126_000)},
    ]
    start(rig, steps, step_mode="counter")
    rig.ctxd.start(rig.mock.wrap)
    rig.opencode("Run the steps")
    db = sqlite3.connect(rig.database())
    (session_id,) = db.execute("select id from session").fetchone()
    db.close()
    add_history_before(rig.database(), session_id)
    # its history written (the database, or still its write-ahead log)
    assert sum(p.stat().st_size for p in rig.database().parent.glob("opencode.db*")) > 4e8

    def compacted() -> bool:
        rows = [s for s in rig.ctxd.status()["sessions"] if s["session_id"] == session_id]
        return bool(rows) and rows[0]["compactions"] == 1

    assert wait_for(compacted, 60), rig.ctxd.status()
    argv = rig.mock.wrap([str(rig.bin), "run", "--session", session_id, "Go on"])
    res = run(argv, cwd=rig.rd.work, env=env(rig.rd, rig.mock, rig.ctxd.env))
    assert res.returncode == 0, res.describe()
    main = rig.main()
    assert max(len(json.dumps(r["body"])) for r in main) < 1_000_000  # the history stayed out
    assert handoffs(main) == [len(main) - 1], [last_turn_text_chat(r["body"])[:300] for r in main]
    rows = [s for s in rig.ctxd.status()["sessions"] if s["session_id"] == session_id]
    assert rows[0]["handoff_asked"] is True


def test_a_daemon_that_blocks_every_idle_gets_one_handoff_turn(rig: Rig, tmp_path: Path) -> None:
    """A broken daemon (a stand-in on the plugin's socket) answers every hook with a handoff
    block. The interactive UI (under tmux: `opencode run` exits after the handoff turn anyway)
    runs that turn once; the idle it causes is told so (`stop_hook_active`) and, blocked again,
    sends nothing: the session stays idle."""
    if shutil.which("tmux") is None:
        pytest.skip("tmux not installed (apt-get install tmux)")
    start(rig, bash_steps([50_000, 60_000]))  # a call, then "Done." for every turn after
    block = {"decision": "block", "reason": f"{HANDOFF} write the handoff note"}
    standin = StandIn(rig.rd.root / "standin.sock", (json.dumps(block).encode(),))
    extra = {**rig.ctxd.env, "CTXD_SOCKET": str(standin.path), "CTXD_NO_SPAWN": "1"}
    words = " ".join(shlex.quote(f"{k}={v}") for k, v in env(rig.rd, rig.mock, extra).items())
    argv = shlex.join(rig.mock.wrap([str(rig.bin), "--prompt", "Run the steps"]))
    tmux = Tmux(tmp_path / "tmux.sock", "opencode")
    tmux.start(f"cd {shlex.quote(str(rig.rd.work))} && env -i {words} {argv}; sleep 30")
    try:
        assert wait_for(lambda: len(standin.payloads) >= 3, 90), tmux.pane()
        # the call, the answer, the handoff turn's answer; without the guard, a turn per idle
        assert wait_for(lambda: len(rig.main()) >= 3, 30), tmux.pane()
        assert wait_for(
            lambda: [p.get("stop_hook_active") for p in standin.payloads][-1:] == [True], 30
        ), standin.payloads
        time.sleep(5)  # a model turn with the mock takes well under a second
        assert len(rig.main()) == 3 and handoffs(rig.main()) == [2], tmux.pane()
    finally:
        tmux.kill()
        standin.close()
    idles = [p["stop_hook_active"] for p in standin.payloads if "stop_hook_active" in p]
    assert idles == [False, True]
