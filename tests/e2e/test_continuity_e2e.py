"""Continuity with the real CLIs: the digest ctxd keeps from the transcript reaches the agent after
a compaction, and the handoff draft is written and named at the handoff point.

The mock model is scripted to read and edit named files, write one, keep a todo list, run a
failing command and then report usage past the agent's compaction point, so that the agent
compacts on its own; ctxd runs with its default `[continuity]` (the note on).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from pathlib import Path

import pytest
import test_claude_e2e as claude_e2e
import test_codex_e2e as codex_e2e
import test_gemini_e2e as gemini_e2e
from e2e_support import (
    Ctxd,
    Json,
    Mock,
    RunDir,
    claude_prepare,
    claude_usage,
    codex_prepare,
    codex_usage,
    gemini_prepare,
    gemini_usage,
    last_turn_text_claude,
    last_turn_text_codex,
    last_turn_text_gemini,
    marks,
)

pytestmark = pytest.mark.e2e

WINDOW = '[thresholds]\nbasis = "window"\n'  # the note after a compaction is on by default
NOTE = "[ctxd continuity]"
TOOL_SECONDS = claude_e2e.TOOL_SECONDS
FAILING = "ls /nonexistent-ctxd-e2e-dir"
TODOS = ["Rename the greeting in app.py", "Write the release notes", "Run the test suite"]


@pytest.fixture
def make_rig(claude_bin: Path, tmp_path: Path) -> Iterator[Callable[..., claude_e2e.Rig]]:
    cleanup = ExitStack()

    def make(steps: Callable[[Path], list[Json]], config: str) -> claude_e2e.Rig:
        """A rig whose mock answers `steps(work dir)`."""
        rd = RunDir.create(tmp_path)
        (rd.work / "app.py").write_text('GREETING = "hello"\nprint(GREETING)\n')
        settings = claude_prepare(rd)
        ctxd = Ctxd(rd, config, {"CLAUDE_CONFIG_DIR": str(rd.config)})
        ctxd.install("claude", settings)
        cleanup.callback(ctxd.stop)
        ctxd.start()
        script = {"steps": steps(rd.work), "step_mode": "counter"}
        mock = Mock("mock_anthropic", rd.root, script)
        cleanup.callback(mock.stop)
        mock.start()
        return claude_e2e.Rig(claude_bin, rd, ctxd, mock, rd.config / "settings.json")

    with cleanup:
        yield make


def _tool(name: str, args: Json, cache_read: int) -> Json:
    return {"tool_use": {"name": name, "input": args}, "usage": claude_usage(cache_read)}


def _bash(command: str, cache_read: int) -> Json:
    return _tool(
        "Bash", {"command": f"sleep {TOOL_SECONDS}; {command}", "description": "run"}, cache_read
    )


def _work_steps(work: Path) -> list[Json]:
    """Read app.py, edit it, write NOTES.md, keep a todo list, run a failing command."""
    app, notes = str(work / "app.py"), str(work / "NOTES.md")
    return [
        _tool("Read", {"file_path": app}, 95_000),
        _tool(
            "Edit",
            {"file_path": app, "old_string": '"hello"', "new_string": '"hello, world"'},
            105_000,
        ),
        _tool(
            "Write", {"file_path": notes, "content": "# Notes\n\nrenamed the greeting\n"}, 115_000
        ),
        # Claude Code 2.1.332 keeps its todo list with the deferred Task tools
        _tool("ToolSearch", {"query": "select:TaskCreate,TaskUpdate", "max_results": 5}, 120_000),
        *(
            _tool("TaskCreate", {"subject": t, "description": t, "activeForm": t}, 121_000 + i)
            for i, t in enumerate(TODOS)
        ),
        _tool("TaskUpdate", {"taskId": "1", "status": "completed"}, 125_000),
        _tool("TaskUpdate", {"taskId": "2", "status": "in_progress"}, 126_000),
        _bash(FAILING, 135_000),
    ]


def _requests_after_compaction(rig: claude_e2e.Rig) -> list[Json]:
    """The main requests that came after the (first) compaction request, in order."""
    log = rig.mock.requests()
    kinds = [(r.get("answer") or {}).get("kind") for r in log]
    assert "compact" in kinds, f"the agent did not compact: {kinds}"
    first = kinds.index("compact")
    return [r for r in log[first + 1 :] if (r.get("answer") or {}).get("kind") == "main"]


def _strings(value: object) -> Iterator[str]:
    if isinstance(value, dict):
        for v in value.values():
            yield from _strings(v)
    elif isinstance(value, list):
        for v in value:
            yield from _strings(v)
    elif isinstance(value, str):
        yield value


def _note(body: Json) -> str:
    """The injected note as the model received it (from its header to the end of its text)."""
    text = next(s for s in _strings(body) if NOTE in s)
    return text[text.index(NOTE) :]


def _compacting_steps(work: Path) -> list[Json]:
    return [
        *_work_steps(work),
        # past the auto-compaction point of the 1M window: it compacts before the next
        _bash("echo big", 975_000),
        _bash("echo after", 20_000),
        {"text": "Done.", "usage": claude_usage(21_000)},
    ]


def _compactions(rig: claude_e2e.Rig) -> int:
    return [(r.get("answer") or {}).get("kind") for r in rig.mock.requests()].count("compact")


def _check_note(note: str, work: Path) -> None:
    assert f"`{work / 'app.py'}` — edited 1×, read 1×" in note, note
    assert f"`{work / 'NOTES.md'}` — written 1×" in note, note
    assert f"`sleep {TOOL_SECONDS}; {FAILING}` — exit 2: ls: cannot access" in note, note
    assert "- [~] Write the release notes\n- [ ] Run the test suite" in note, note
    assert "## Last request\nTidy the greeting and keep notes\n" in note, note
    assert "Rename the greeting" not in note  # completed: not an open todo


@pytest.mark.parametrize(
    ("model", "big"),
    [
        ("claude-opus-5-5", 975_000),  # 1M window: compacts at 967,000
        ("claude-sonnet-4-6", 170_000),  # 200k window: compacts at 167,000
    ],
)
def test_claude_auto_compaction_gets_the_digest_once_by_default(
    make_rig: Callable[..., claude_e2e.Rig], model: str, big: int
) -> None:
    """ctxd's default config: the first request after Claude Code's own compaction carries the
    note (from SessionStart `compact`), once; Claude Code compacts once, not again for it."""

    def steps(work: Path) -> list[Json]:
        return [
            *_work_steps(work),
            _bash("echo big", big),  # past the compaction point: it compacts before the next
            _bash("echo after", 20_000),
            {"text": "Done.", "usage": claude_usage(21_000)},
        ]

    rig = make_rig(steps, "")
    res = rig.claude(
        "Tidy the greeting and keep notes", "--model", model, CLAUDE_CODE_ENABLE_TODO_TOOLS="1"
    )

    after = _requests_after_compaction(rig)
    assert after, res.describe()
    assert _compactions(rig) == 1
    first = json.dumps(after[0]["body"])
    assert first.count(NOTE) == 1, [r["answer"] for r in after]
    _check_note(_note(after[0]["body"]), rig.rd.work)
    # once per compaction: not repeated with the requests after it
    assert [NOTE in last_turn_text_claude(r["body"]) for r in after[1:]] == [False] * (
        len(after) - 1
    )
    sid = claude_e2e.session_id(res)
    assert rig.ctxd.session(sid)["compactions"] == 1


def test_inject_false_keeps_the_note_out(make_rig: Callable[..., claude_e2e.Rig]) -> None:
    rig = make_rig(_compacting_steps, "[continuity]\ninject = false\n")
    res = rig.claude("Tidy the greeting and keep notes", CLAUDE_CODE_ENABLE_TODO_TOOLS="1")

    after = _requests_after_compaction(rig)
    assert after, res.describe()
    assert not any(NOTE in json.dumps(r["body"]) for r in after)
    assert _compactions(rig) == 1


def test_claude_handoff_block_names_the_draft(make_rig: Callable[..., claude_e2e.Rig]) -> None:
    config = WINDOW + '[handoff]\naction = "block"\n'

    def steps(work: Path) -> list[Json]:
        # the answer that stops at 73 % used: the handoff point
        return [*_work_steps(work), {"text": "Done.", "usage": claude_usage(725_000)}]

    rig = make_rig(steps, config)
    res = rig.claude("Tidy the greeting and keep notes", CLAUDE_CODE_ENABLE_TODO_TOOLS="1")
    sid = claude_e2e.session_id(res)

    main = rig.main()
    carried = marks(main, claude_e2e.HANDOFF, last_turn_text_claude)
    assert carried[-1] and not any(carried[:-1]), carried
    reason = last_turn_text_claude(main[-1]["body"])
    draft = Path(rig.ctxd.env["XDG_STATE_HOME"]) / "ctxd" / "handoffs" / f"{sid}.md"
    assert str(draft) in reason, reason
    assert "review and complete this draft" in reason
    text = draft.read_text()
    assert oct(draft.stat().st_mode & 0o777) == "0o600"
    for needle in ("app.py", "NOTES.md", FAILING, "Write the release notes"):
        assert needle in text, (needle, text)
    assert re.search(r"`.*app\.py` — edited 1×, read 1×", text), text
    # `ctxd handoff` prints the same note for the session
    out = rig.ctxd.ctl("handoff", sid[:8])
    assert out.returncode == 0, out.describe()
    assert out.stdout.split("\n", 1)[1] == text.split("\n", 1)[1]


# ------------------------------------------------------------------------------------ Gemini CLI
@pytest.fixture
def make_gemini(
    gemini_bin: Path, netns: bool, tmp_path: Path
) -> Iterator[Callable[..., gemini_e2e.Rig]]:
    cleanup = ExitStack()

    def make(steps: Callable[[Path], list[Json]], config: str) -> gemini_e2e.Rig:
        rd = RunDir.create(tmp_path)
        (rd.work / "app.py").write_text('GREETING = "hello"\nprint(GREETING)\n')
        settings = gemini_prepare(rd)
        ctxd = Ctxd(rd, config, {})
        ctxd.install("gemini", settings)
        cleanup.callback(ctxd.stop)
        ctxd.start()
        script = {"steps": steps(rd.work), "step_mode": "counter"}
        mock = Mock("mock_gemini", rd.root, script, netns=netns)
        cleanup.callback(mock.stop)
        mock.start()
        return gemini_e2e.Rig(gemini_bin, rd, ctxd, mock)

    with cleanup:
        yield make


def _gemini_call(name: str, args: Json, prompt: int) -> Json:
    return {"function_call": {"name": name, "args": args}, "usage": gemini_usage(prompt)}


def test_gemini_compression_gets_the_digest_at_the_next_tool_call(
    make_gemini: Callable[..., gemini_e2e.Rig],
) -> None:
    """Gemini CLI has no hook after a compression (PreCompress fires before every model turn,
    compressed or not, and SessionStart never says "compact"), so ctxd learns of it from the
    recording (the `$set` that brings in the `<state_snapshot>`) and hands the note to the first
    event after it that carries context. Gemini CLI compresses at the start of a turn, after
    BeforeAgent has run: the first such event is the AfterTool of the turn's first tool call,
    whose request is the second one after the compression. The turn here is the one ctxd's
    handoff block starts (AfterAgent "deny"), whose text names the draft."""
    todos = [
        {"description": TODOS[0], "status": "completed"},
        {"description": TODOS[1], "status": "in_progress"},
        {"description": TODOS[2], "status": "pending"},
    ]

    def steps(work: Path) -> list[Json]:
        app, notes = str(work / "app.py"), str(work / "NOTES.md")
        return [
            _gemini_call("read_file", {"file_path": app}, 100_000),
            _gemini_call(
                "replace",
                {
                    "file_path": app,
                    "old_string": '"hello"',
                    "new_string": '"hello, world"',
                    "instruction": "rename the greeting",
                },
                110_000,
            ),
            _gemini_call("write_file", {"file_path": notes, "content": "# Notes\n"}, 120_000),
            _gemini_call("write_todos", {"todos": todos}, 130_000),
            _gemini_call("run_shell_command", {"command": FAILING}, 140_000),
            # past half the 1M window: the handoff point (AfterAgent blocked), and Gemini CLI
            # compresses at the start of the turn the block starts
            {"text": "Paused.", "usage": gemini_usage(600_000)},
            _gemini_call("run_shell_command", {"command": "echo after"}, 20_000),
            _gemini_call("run_shell_command", {"command": "echo again"}, 21_000),
            {"text": "Done.", "usage": gemini_usage(22_000)},
        ]

    config = WINDOW.replace('basis = "window"', 'basis = "compaction"')
    rig = make_gemini(steps, config + '[handoff]\naction = "block"\n')
    res = rig.gemini("Tidy the greeting and keep notes")
    assert rig.mock.requests_of_kind("compress"), "Gemini CLI did not compress"

    log = rig.mock.requests()
    kinds = [(r.get("answer") or {}).get("kind") for r in log]
    after = [r for r in log[kinds.index("compress") + 1 :] if r["answer"].get("kind") == "main"]
    carried = [NOTE in last_turn_text_gemini(r["body"]) for r in after]
    assert carried[:3] == [False, True, False], (carried, res.describe())
    note = _note(after[1]["body"])
    work = rig.rd.work
    assert f"`{work / 'app.py'}` — edited 1×, read 1×" in note, note
    assert f"`{work / 'NOTES.md'}` — written 1×" in note, note
    assert f"`{FAILING}` — exit 2" in note, note
    assert "- [~] Write the release notes\n- [ ] Run the test suite" in note, note
    assert "## Last request\nTidy the greeting and keep notes\n" in note, note
    # the turn the block started: its text names the draft, which exists
    turn = last_turn_text_gemini(after[0]["body"])
    draft = Path(rig.ctxd.env["XDG_STATE_HOME"]) / "ctxd" / "handoffs"
    (path,) = draft.iterdir()
    assert str(path) in turn and "review and complete this draft" in turn, turn
    assert f"`{work / 'app.py'}` — edited 1×, read 1×" in path.read_text()


# ------------------------------------------------------------------------------------ Codex CLI
@pytest.fixture
def make_codex(
    codex_bin: Path, netns: bool, tmp_path: Path
) -> Iterator[Callable[..., codex_e2e.Rig]]:
    cleanup = ExitStack()

    def make(steps: Callable[[Path], list[Json]], config: str) -> codex_e2e.Rig:
        rd = RunDir.create(tmp_path)
        (rd.work / "app.py").write_text('GREETING = "hello"\nprint(GREETING)\n')
        script = {"steps": steps(rd.work), "step_mode": "counter"}
        mock = Mock("mock_openai", rd.root, script, netns=netns)
        cleanup.callback(mock.stop)
        mock.start()
        hooks_json = codex_prepare(rd, mock)
        ctxd = Ctxd(rd, config, {"CODEX_HOME": str(rd.config)})
        ctxd.install("codex", hooks_json)
        cleanup.callback(ctxd.stop)
        ctxd.start()
        return codex_e2e.Rig(codex_bin, rd, ctxd, mock)

    with cleanup:
        yield make


def test_codex_compaction_gets_the_digest_once(make_codex: Callable[..., codex_e2e.Rig]) -> None:
    """Codex CLI runs SessionStart with source "compact" after it compacted; its
    additionalContext reaches the next request as a developer message."""
    plan = {
        "plan": [
            {"step": TODOS[0], "status": "completed"},
            {"step": TODOS[1], "status": "in_progress"},
            {"step": TODOS[2], "status": "pending"},
        ]
    }
    patch_app = (
        "*** Begin Patch\n*** Update File: app.py\n@@\n"
        '-GREETING = "hello"\n+GREETING = "hello, world"\n*** End Patch\n'
    )
    patch_notes = "*** Begin Patch\n*** Add File: NOTES.md\n+# Notes\n*** End Patch\n"

    def steps(work: Path) -> list[Json]:
        del work  # Codex works in its cwd with relative paths
        return [
            {"shell": "cat app.py", "usage": codex_usage(40_000)},
            {
                "custom_tool": {"name": "apply_patch", "input": patch_app},
                "usage": codex_usage(50_000),
            },
            {
                "custom_tool": {"name": "apply_patch", "input": patch_notes},
                "usage": codex_usage(60_000),
            },
            {"tool": {"name": "update_plan", "arguments": plan}, "usage": codex_usage(70_000)},
            {"shell": FAILING, "usage": codex_usage(80_000)},
            # above 90 % of the 272,000 catalog window: Codex compacts before going on
            {"shell": "echo big", "usage": codex_usage(250_000)},
            {"shell": "echo after", "usage": codex_usage(20_000)},
            {"text": "Done.", "usage": codex_usage(21_000)},
        ]

    rig = make_codex(steps, WINDOW.replace('basis = "window"', 'basis = "compaction"'))
    res = rig.codex("Tidy the greeting and keep notes")
    assert rig.mock.requests_of_kind("compact"), "Codex CLI did not compact"

    log = rig.mock.requests()
    kinds = [(r.get("answer") or {}).get("kind") for r in log]
    after = [r for r in log[kinds.index("compact") + 1 :] if r["answer"].get("kind") == "main"]
    assert after, res.describe()
    first = json.dumps(after[0]["body"])
    assert first.count(NOTE) == 1, (kinds, res.describe())
    note = _note(after[0]["body"])
    work = rig.rd.work
    assert f"`{work / 'app.py'}` — edited 1×" in note, note
    assert f"`{work / 'NOTES.md'}` — written 1×" in note, note
    assert f"`{FAILING}` — exit 2" in note, note
    assert "- [~] Write the release notes\n- [ ] Run the test suite" in note, note
    assert "## Last request\nTidy the greeting and keep notes\n" in note, note


def test_codex_handoff_block_names_the_draft(make_codex: Callable[..., codex_e2e.Rig]) -> None:
    """Codex CLI's Stop `decision: block` adds the reason as a user message: it names the
    draft, which holds what the session did."""

    def steps(work: Path) -> list[Json]:
        del work
        return [
            {"shell": "cat app.py", "usage": codex_usage(40_000)},
            {"shell": FAILING, "usage": codex_usage(50_000)},
            # the answer that stops at 74 % of the room before compaction: the handoff point
            {"text": "Done.", "usage": codex_usage(175_000)},
            {"text": "Done.", "usage": codex_usage(176_000)},
        ]

    rig = make_codex(steps, '[handoff]\naction = "block"\n')
    rig.codex("Look at the app")
    main = rig.main()
    carried = marks(main, claude_e2e.HANDOFF, last_turn_text_codex)
    assert carried[-1] and not any(carried[:-1]), carried
    (draft,) = (Path(rig.ctxd.env["XDG_STATE_HOME"]) / "ctxd" / "handoffs").iterdir()
    reason = last_turn_text_codex(main[-1]["body"])
    assert str(draft) in reason and "review and complete this draft" in reason, reason
    text = draft.read_text()
    assert f"`{rig.rd.work / 'app.py'}` — read 1×" in text, text
    assert f"`{FAILING}` — exit 2" in text, text
