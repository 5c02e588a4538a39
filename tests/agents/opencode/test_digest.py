"""OpenCode's parts -> the session digest's facts: one row per kind of part, shaped as the parts
the real CLI 1.18.33 wrote (tests/data/transcripts/opencode-1.18.33/)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from ctxd.agents.opencode_family.digest import OpenCodeFacts, session_digest
from ctxd.agents.opencode_family.store import OpenCodeStore
from ctxd.core.digest import Command, FileUse, Todo


def tool(name: str, status: str = "completed", **state: Any) -> dict[str, Any]:
    return {"type": "tool", "tool": name, "callID": "c1", "state": {"status": status, **state}}


def digest_of(*records: tuple[str, dict[str, Any]]) -> Any:
    facts = OpenCodeFacts()
    for role, part in records:
        facts.take({"role": role, "part": part})
    facts.flush()
    return facts.digest


@pytest.mark.parametrize(
    ("records", "field", "expected"),
    [
        ([("user", {"type": "text", "text": "Fix it"})], "asks", ("Fix it",)),
        # OpenCode's own texts on a user message are not requests
        ([("user", {"type": "text", "text": "continue", "synthetic": True})], "asks", ()),
        ([("user", {"type": "text", "text": "x", "ignored": True})], "asks", ()),
        ([("assistant", {"type": "text", "text": "Done."})], "last_reply", "Done."),
        # a compaction's summary (its message `summary: true`) is no answer to the user
        ([("summary", {"type": "text", "text": "Summary"})], "last_reply", None),
        (
            [("assistant", tool("bash", input={"command": "make"}, metadata={"exit": 0}))],
            "commands",
            (Command("make", None, False, 0, ""),),
        ),
        (
            [
                (
                    "assistant",
                    tool(
                        "bash",
                        input={"command": "pytest"},
                        output="collected 3\n1 failed\n",
                        metadata={"exit": 1},
                    ),
                )
            ],
            "failed",
            (Command("pytest", None, True, 1, "1 failed"),),
        ),
        # a command still running: listed, its outcome to come
        (
            [("assistant", tool("bash", "running", input={"command": "sleep 9"}))],
            "commands",
            (Command("sleep 9", "c1"),),
        ),
        (
            [("assistant", tool("edit", input={"filePath": "/w/a.py"}))],
            "files",
            (FileUse("/w/a.py", 0, 1, 0),),
        ),
        (
            [("assistant", tool("read", input={"filePath": "/w/a.py"}))],
            "files",
            (FileUse("/w/a.py", 1, 0, 0),),
        ),
        (
            [
                (
                    "assistant",
                    tool(
                        "apply_patch",
                        input={
                            "patchText": "*** Begin Patch\n*** Add File: b.py\n+x\n"
                            "*** Update File: a.py\n@@\n*** End Patch"
                        },
                    ),
                )
            ],
            "files",
            (FileUse("a.py", 0, 1, 0), FileUse("b.py", 0, 0, 1)),
        ),
        (
            [("assistant", tool("task", "running", input={"description": "find callers"}))],
            "subagents",
            ("find callers",),
        ),
        (
            [
                (
                    "assistant",
                    tool(
                        "todowrite",
                        input={"todos": [{"content": "a test", "status": "in_progress"}]},
                    ),
                )
            ],
            "todos",
            (Todo("a test", "in_progress", None),),
        ),
        (
            [("assistant", tool("grep", "error", input={}, error="bad pattern\nat 1"))],
            "errors",
            ("grep: bad pattern",),
        ),
        ([("user", {"type": "compaction", "auto": True, "overflow": True})], "compactions", 1),
        ([("assistant", {"type": "step-finish", "tokens": {}})], "tool_calls", 0),
    ],
)
def test_each_kind_of_part(
    records: list[tuple[str, dict[str, Any]]], field: str, expected: object
) -> None:
    value = getattr(digest_of(*records), field)
    if field == "files":
        value = tuple(sorted(value))
    elif field == "todos":
        value = tuple(value or ())
    assert value == expected


DATA = Path(__file__).parents[2] / "data" / "transcripts" / "opencode-1.18.33"


def test_a_real_compaction_counts_and_its_summary_is_no_answer() -> None:
    # OpenCode's "continue" after the compaction is its own text (synthetic), the summary's
    # text ("Mock summary") no reply to the user.
    path = str(DATA / "opencode.compact.db")
    (session,) = {r.session_id for r in OpenCodeStore(path).read()}
    digest = session_digest(path, session)
    assert digest.compactions == 1
    assert digest.asks == ('"Run the steps"',) and digest.last_reply == "Done."
    assert [c.text for c in digest.commands] == [
        "echo CAPTURE-0",
        "echo CAPTURE-1",
        "echo CAPTURE-2",
    ]


def test_a_real_subagent_is_in_its_parents_digest_and_has_its_own() -> None:
    path = str(DATA / "opencode.subagent.db")
    rows = OpenCodeStore(path).read()
    parent = next(r.session_id for r in rows if r.parent_id is None)
    child = next(r.session_id for r in rows if r.parent_id is not None)
    mine, its = session_digest(path, parent), session_digest(path, child)
    assert mine.subagents == ("echo in a subagent",) and mine.commands == ()
    assert its.asks == ("Run echo SUB-1",) and [c.text for c in its.commands] == ["echo CAPTURE-1"]


@pytest.mark.parametrize("name", ["opencode.db", "opencode.compact.db", "opencode.subagent.db"])
def test_the_digest_kept_as_rows_arrive_is_the_one_read_whole(name: str) -> None:
    path = str(Path(__file__).parents[2] / "data" / "transcripts" / "opencode-1.18.33" / name)
    reader = OpenCodeStore(path)
    while True:  # a part at a time: the deadline has always passed
        reader.read(until=0.0, clock=lambda: 1.0)
        if not reader.behind:
            break
    sessions = {r.session_id for r in OpenCodeStore(path).read()}
    assert sessions
    for session in sessions:
        assert reader.digest(session) == session_digest(path, session)


def test_a_part_rewritten_while_its_step_runs_is_folded_as_it_ends(tmp_path: Path) -> None:
    """OpenCode rewrites a tool part while it runs: the digest has its final state, once."""
    from opencode_db import Writer, copy_capture

    path = copy_capture(tmp_path)
    w = Writer(path)
    w.session("ses_x")
    msg = w.message("ses_x", "assistant")
    w.part("ses_x", msg, type="step-start")
    running = {"status": "running", "input": {"command": "make test"}}
    part = w.part("ses_x", msg, type="tool", tool="bash", callID="c1", state=running)
    reader = OpenCodeStore(str(path))
    reader.read()
    assert reader.digest("ses_x") is None  # the step has not ended
    done = {**running, "status": "completed", "metadata": {"exit": 2}, "output": "1 failed"}
    w.db.execute(
        "update part set data = json_set(data, '$.state', json(?)) where id = ?",
        (json.dumps(done), part),
    )
    w.db.commit()
    w.part("ses_x", msg, type="step-finish", tokens={"input": 9, "output": 1, "cache": {}})
    w.close()
    reader.read()
    digest = reader.digest("ses_x")
    assert digest is not None
    assert digest == session_digest(str(path), "ses_x")
    assert [c.exit_code for c in digest.commands] == [2]
