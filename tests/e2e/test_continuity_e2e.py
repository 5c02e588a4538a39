"""Continuity with the real CLIs: the digest ctxd keeps from the transcript reaches the agent after
a compaction, and the handoff draft is written and named at the handoff point.

The mock model is scripted to read and edit named files, write one, keep a todo list, run a
failing command and then report usage past the agent's compaction point, so that the agent
compacts on its own; ctxd runs with `[continuity] inject = true`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from pathlib import Path

import pytest
import test_claude_e2e as claude_e2e
from e2e_support import (
    Ctxd,
    Json,
    Mock,
    RunDir,
    claude_prepare,
    claude_usage,
    last_turn_text_claude,
    marks,
)

pytestmark = pytest.mark.e2e

INJECT = '[thresholds]\nbasis = "window"\n[continuity]\ninject = true\n'
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


def test_claude_auto_compaction_gets_the_digest_once(
    make_rig: Callable[..., claude_e2e.Rig],
) -> None:
    def steps(work: Path) -> list[Json]:
        return [
            *_work_steps(work),
            # past the auto-compaction point of the 1M window: it compacts before the next
            _bash("echo big", 975_000),
            _bash("echo after", 20_000),
            {"text": "Done.", "usage": claude_usage(21_000)},
        ]

    rig = make_rig(steps, INJECT)
    res = rig.claude("Tidy the greeting and keep notes", CLAUDE_CODE_ENABLE_TODO_TOOLS="1")

    after = _requests_after_compaction(rig)
    assert after, res.describe()
    first = json.dumps(after[0]["body"])
    assert first.count(NOTE) == 1, [r["answer"] for r in after]
    note = _note(after[0]["body"])
    work = rig.rd.work
    assert f"`{work / 'app.py'}` — edited 1×, read 1×" in note, note
    assert f"`{work / 'NOTES.md'}` — written 1×" in note, note
    assert f"`sleep {TOOL_SECONDS}; {FAILING}` — exit 2: ls: cannot access" in note, note
    assert "- [~] Write the release notes\n- [ ] Run the test suite" in note, note
    assert "> Tidy the greeting and keep notes" in note, note
    assert "Rename the greeting" not in note  # completed: not an open todo
    # once per compaction: not repeated with the requests after it
    assert [NOTE in last_turn_text_claude(r["body"]) for r in after[1:]] == [False] * (
        len(after) - 1
    )
    sid = claude_e2e.session_id(res)
    assert rig.ctxd.session(sid)["compactions"] >= 1


def test_claude_handoff_block_names_the_draft(make_rig: Callable[..., claude_e2e.Rig]) -> None:
    config = INJECT + '[handoff]\naction = "block"\n'

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
