"""GitHub Copilot CLI, the real CLI, offline against mock_openai_chat.py in a loopback-only network
namespace (`COPILOT_OFFLINE=true`, a bring-your-own-model provider at the mock), wired to a real
ctxd daemon by `ctxd install copilot`.

Copilot CLI runs the mock's model with a prompt limit of 64,000 (every usage record in its
events file says so: `maxPromptTokens`) and starts a background compaction at 80 % of it:
51,200. On ctxd's default "compaction" basis, which counts the prompt plus the answer's output
(40 tokens here), that puts WARNING from 33,240 reported (65 % of the room before compaction
used), CRITICAL from 38,360 (75 %), the handoff from 35,800 (70 %).

Only agentStop names the transcript; the other hooks give the session id, from which ctxd finds
the events file (`session-state/<id>/events.jsonl`), whose usage records carry the mock's
figures exactly. Nothing a hook prints reaches the user, so the handoff runs as a block even
with the default `[handoff] action = "message"`: its reason starts a new turn.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path

import pytest
from e2e_support import (
    COPILOT_MODEL,
    AgentRig,
    Ctxd,
    Json,
    Mock,
    Result,
    RunDir,
    Tmux,
    at_calls,
    chat_usage,
    copilot_env,
    last_turn_text_chat,
    marks,
    read_jsonl,
    run,
    shell_command,
    wait_for,
    write_json,
)

from ctxd.agents.hookcmd import is_ctxd_command

pytestmark = pytest.mark.e2e

MODEL = COPILOT_MODEL
WINDOW = 64_000
WARNING = "CONTEXT WARNING:"
CRITICAL = "CONTEXT CRITICAL:"
HANDOFF = "CONTEXT HANDOFF:"
#: The start of Copilot CLI's compaction prompt (1.0.102): answered as an aux request.
COMPACTION_PROMPT = "The history is being compacted"


def bash(command: str) -> Json:
    return {"tool": {"name": "bash", "arguments": {"command": command, "description": "step"}}}


def failing(call: int) -> Json:
    """A call that fails (its result a failure, so Copilot CLI fires postToolUseFailure and not
    postToolUse): a view of a missing file, or a tool that does not exist."""
    if call % 2:
        return {"tool": {"name": "nosuchtool", "arguments": {"step": call}}}
    return {"tool": {"name": "view", "arguments": {"path": f"missing-{call}.txt"}}}


def tool_steps(
    prompts: Sequence[int], final: str = "Done.", sleep: Sequence[int] = ()
) -> list[Json]:
    """A bash call per prompt but the last, then a text answer; step i reports prompts[i]."""
    steps: list[Json] = []
    for i, prompt in enumerate(prompts[:-1]):
        command = shell_command(i, 0)
        if i in sleep:
            command = f"sleep 1; {command}"
        steps.append({**bash(command), "usage": chat_usage(prompt)})
    steps.append({"text": final, "usage": chat_usage(prompts[-1])})
    return steps


# ------------------------------------------------------------------------------------ the rig
@dataclass
class Rig(AgentRig):
    settings: Path

    def copilot(self, *args: str, **extra_env: str) -> Result:
        argv = self.mock.wrap([str(self.bin), "-p", *args, "--allow-all-tools"])
        env = copilot_env(self.rd, self.mock, {**self.ctxd.env, **extra_env})
        res = run(argv, cwd=self.rd.work, env=env)
        assert res.returncode == 0, res.describe()
        assert not self.mock.requests_of_kind("proxy"), "the CLI tried to reach an outside host"
        return res

    def interactive(self, socket: Path) -> Tmux:
        """Copilot's interactive UI, all tools allowed, started in a tmux server of the test's
        own at `socket`; its window stays 30 s after the CLI exits."""
        env = copilot_env(self.rd, self.mock, {**self.ctxd.env, "COPILOT_ALLOW_ALL": "true"})
        words = " ".join(shlex.quote(f"{k}={v}") for k, v in env.items())
        argv = shlex.join(self.mock.wrap([str(self.bin), "--allow-all-tools"]))
        tmux = Tmux(socket, "copilot")
        tmux.start(f"cd {shlex.quote(str(self.rd.work))} && env -i {words} {argv}; sleep 30")
        return tmux

    def reported(self) -> list[int]:
        """The prompt_tokens the mock reported to the agent loop, in order."""
        return [r["answer"]["usage"]["prompt_tokens"] for r in self.main()]

    def events_file(self) -> Path:
        found = sorted((self.rd.home / ".copilot" / "session-state").glob("*/events.jsonl"))
        assert len(found) == 1, found
        return found[0]

    def events(self) -> list[Json]:
        return read_jsonl(self.events_file())

    def session_id(self) -> str:
        return self.events_file().parent.name


@pytest.fixture
def make_rig(copilot_bin: Path, netns: bool, tmp_path: Path) -> Iterator[Callable[..., Rig]]:
    """`make(steps, config)`: a run dir, `ctxd install copilot`, a daemon, the mock (counting
    its main requests: a compaction rewrites the history)."""
    with ExitStack() as cleanup:

        def make(steps: list[Json], config: str = "", settings_doc: Json | None = None) -> Rig:
            rd = RunDir.create(tmp_path)
            settings = rd.home / ".copilot" / "settings.json"
            write_json(settings, settings_doc or {})
            # as after a first session: the daemon watches the root from its start (a root
            # made later is watched from the next housekeeping tick, up to 5 s on; a session
            # ended by then is no longer swept, and Copilot CLI writes its last usage record
            # after its last hook)
            (settings.parent / "session-state").mkdir()
            ctxd = Ctxd(rd, config, {})
            ctxd.install("copilot", settings)
            script: Json = {
                "steps": steps,
                "step_mode": "counter",
                "aux_markers": [COMPACTION_PROMPT],
                "aux_text": "<summary>MOCK COMPACTION SUMMARY: echo commands were run.</summary>",
                "models": [MODEL],
            }
            mock = Mock("mock_openai_chat", rd.root, script, netns=netns)
            cleanup.callback(mock.stop)
            mock.start()
            cleanup.callback(ctxd.stop)
            ctxd.start(mock.wrap)
            return Rig(copilot_bin, rd, ctxd, mock, settings)

        yield make


# ------------------------------------------------------------------------------------ tests
def test_warnings_escalate_and_the_handoff_blocks_once(make_rig: Callable[..., Rig]) -> None:
    """Ten bash calls climbing past WARNING, CRITICAL and the handoff point; the final answer's
    agentStop is blocked once with the handoff, whose reason starts the next turn."""
    # call:    0       1       2(W)    3-6 (quiet, debounced)          7(W: 5th)
    prompts = [10_000, 20_000, 33_300, 33_400, 33_500, 33_600, 33_700, 33_800]
    # 8(C: escalation) 9      final answer (agentStop: 60 % used -> handoff, a block)
    prompts += [38_400, 38_500, 38_600]
    steps = [*tool_steps(prompts), {"text": "Handoff written.", "usage": chat_usage(38_700)}]
    rig = make_rig(steps)  # the default config: a handoff message, which only a block delivers
    res = rig.copilot("Run the steps")

    main = rig.main()
    assert len(main) == 12, res.describe()
    assert at_calls(main, WARNING) == [2, 7]
    assert at_calls(main, CRITICAL) == [8]
    # the block's reason is the text of the one turn it started
    assert marks(main, HANDOFF, last_turn_text_chat) == [False] * 11 + [True]
    assert res.stdout.strip().endswith("Handoff written."), res.describe()

    # the last answer's record lands after the last hook: the watcher reads it
    assert wait_for(lambda: rig.ctxd.session(rig.session_id())["tokens"] == 38_700, 10)
    row = rig.ctxd.session(rig.session_id())
    assert row["agent"] == "copilot"
    assert row["tokens"] == rig.reported()[-1] == 38_700  # exactly what the mock reported
    assert row["window"] == WINDOW  # the maxPromptTokens Copilot CLI recorded


def test_a_failed_call_is_warned_and_counted(make_rig: Callable[..., Rig]) -> None:
    """Copilot CLI fires postToolUse only after a call that succeeded; a call that fails fires
    postToolUseFailure. The calls where a warning is due fail (2: the first WARNING, 7: the
    repeat), and so does one of the four quiet calls between: the warnings reach the model after
    the failed calls, and call 7 is the fifth since the warning only with the failed calls
    counted. A shell command exiting 3 (call 5) is a success to Copilot CLI."""
    prompts = [10_000, 20_000, 33_300, 33_400, 33_500, 33_600, 33_700, 33_800, 33_900]
    steps = tool_steps(prompts)
    fails = (2, 4, 7)
    for call in fails:
        steps[call] = {**failing(call), "usage": steps[call]["usage"]}
    steps[5] = {**bash("echo step5; exit 3"), "usage": steps[5]["usage"]}
    rig = make_rig(steps)
    res = rig.copilot("Run the steps")

    main = rig.main()
    assert len(main) == len(prompts), res.describe()
    assert at_calls(main, WARNING) == [2, 7]
    # each came from the failure hook, as guidance after the failed result
    failed = "Additional guidance from postToolUseFailure hooks:"
    assert at_calls(main, failed) == [2, 7]
    after = last_turn_text_chat(main[3]["body"])
    assert f"failed. {failed}\\n{WARNING}" in after, after
    completed = [e["data"] for e in rig.events() if e["type"] == "tool.execution_complete"]
    assert [i for i, d in enumerate(completed) if not d["success"]] == list(fails)
    assert completed[5]["success"] and "exit code 3" in json.dumps(completed[5])
    starts = [e["data"]["hookType"] for e in rig.events() if e["type"] == "hook.start"]
    assert starts.count("postToolUseFailure") == len(fails)
    assert starts.count("postToolUse") == len(prompts) - 1 - len(fails)


def test_a_real_compaction_resets_the_debounce(make_rig: Callable[..., Rig]) -> None:
    """56,000 of 64,000 makes Copilot CLI compact in the background (the mock answers its
    summary request); the first call after `session.compaction_complete` warns at once, though
    it is inside the debounce of the warnings before."""
    prompts = [33_300, 56_000, 57_000, 34_000, 34_100, 34_200]
    rig = make_rig(tool_steps(prompts, sleep=(1, 2)))
    res = rig.copilot("Run the steps")

    assert rig.mock.requests_of_kind("aux"), "Copilot CLI sent no compaction request"
    events = rig.events()
    done = [e for e in events if e["type"] == "session.compaction_complete"]
    assert done and done[0]["data"]["success"] is True, res.describe()
    # the usage records after the compaction was applied: the first is the call it resets
    kinds = [e["type"] for e in events if e["type"].startswith("session.")]
    after = kinds[kinds.index("session.compaction_complete") :].count("session.usage_record")
    first_after = len(prompts) - after  # the call that first request made
    main = rig.main()
    assert len(main) == len(prompts)
    warned = at_calls(main, WARNING)
    critical = at_calls(main, CRITICAL)
    assert warned[0] == 0 and critical[0] == 1, (warned, critical)
    # the reset: the first call after the compaction warns again at once (5 calls of debounce)
    assert first_after in warned + critical, (first_after, warned, critical)

    assert wait_for(lambda: rig.ctxd.session(rig.session_id())["tokens"] == 34_200, 10)
    row = rig.ctxd.session(rig.session_id())
    assert row["compactions"] >= 1
    assert row["tokens"] == rig.reported()[-1] == 34_200


def test_without_a_daemon_the_session_completes_quietly(make_rig: Callable[..., Rig]) -> None:
    rig = make_rig(tool_steps([33_300, 38_400, 38_500, 38_600]))
    rig.ctxd.stop_with_cli()
    res = rig.copilot("Run the steps", CTXD_NO_SPAWN="1")
    assert res.stdout.strip().endswith("Done."), res.describe()
    assert "hook" not in res.stderr.lower(), res.describe()
    assert "CONTEXT " not in json.dumps([r["body"] for r in rig.main()]) + res.stderr
    assert not os.path.exists(rig.ctxd.env["CTXD_SOCKET"]), "a daemon was spawned"


def test_the_ui_shows_ctxds_statusline(make_rig: Callable[..., Rig], tmp_path: Path) -> None:
    """The interactive UI under tmux runs ctxd's statusLine (`ctxd install copilot` set it: none
    was set): the line shows the mock's figure against the 64,000 limit, and the statusline's
    session is the one the hooks and the events file feed."""
    if shutil.which("tmux") is None:
        pytest.skip("tmux not installed (apt-get install tmux)")
    rig = make_rig(tool_steps([12_000, 13_500, 33_300]))
    settings = json.loads(rig.settings.read_text())
    assert is_ctxd_command(settings["statusLine"]["command"])
    tmux = rig.interactive(tmp_path / "tmux.sock")
    try:
        assert tmux.wait("no usage yet", 60), tmux.pane()  # ctxd's line before any answer
        time.sleep(1.5)
        tmux.send("Run the steps")
        assert tmux.wait("Done.", 60), tmux.pane()
        # the last answer's prompt (33,300 of 64,000: 52 %), past WARNING: marked "! "
        assert tmux.wait("! gpt-4.1 ▓▓▓▓▓░░░░░ 52% of window · 33k/64k", 20), tmux.pane()
        tmux.send("/exit")
        time.sleep(2)
    finally:
        tmux.kill()
    row = rig.ctxd.session(rig.session_id())
    assert row["tokens"] == 33_300 and row["window"] == WINDOW


def test_the_users_own_statusline_stays_and_feeds_ctxd(
    make_rig: Callable[..., Rig], tmp_path: Path
) -> None:
    """A statusLine of the user's own: `ctxd install copilot` has ctxd's client run it, so the
    UI still shows the user's line while the daemon gets each payload (the live figure of a
    GitHub-hosted model, which writes no usage to its events file)."""
    if shutil.which("tmux") is None:
        pytest.skip("tmux not installed (apt-get install tmux)")
    own = "cat >/dev/null; echo my-own-line"
    doc = {"statusLine": {"type": "command", "command": own}}
    rig = make_rig(tool_steps([12_000, 13_500, 33_300]), settings_doc=doc)
    command = json.loads(rig.settings.read_text())["statusLine"]["command"]
    assert is_ctxd_command(command) and command.endswith(shlex.quote(own))
    tmux = rig.interactive(tmp_path / "tmux.sock")
    try:
        assert tmux.wait("my-own-line", 60), tmux.pane()
        time.sleep(1.5)
        tmux.send("Run the steps")
        assert tmux.wait("Done.", 60), tmux.pane()
        assert "my-own-line" in tmux.pane() and "33k/64k" not in tmux.pane()
        tmux.send("/exit")
        time.sleep(2)
    finally:
        tmux.kill()
    row = rig.ctxd.session(rig.session_id())
    assert row["tokens"] == 33_300 and row["window"] == WINDOW
    # uninstalling gives the user's command back as it was
    res = rig.ctxd.ctl("uninstall", "copilot", "--settings", str(rig.settings))
    assert res.returncode == 0, res.describe()
    assert json.loads(rig.settings.read_text())["statusLine"]["command"] == own
