"""The Codex CLI digest (`CodexFacts`, the listener of `CodexReader`) against the real rollouts:
files, commands, the last ask and the compactions equal what an independent reading of each
rollout finds (plain json)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from ctxd.agents import spec
from ctxd.core.digest import Digest

DATA = Path(__file__).resolve().parents[2] / "data" / "transcripts"
SAMPLES = sorted(DATA.glob("codex-cli-*/*.jsonl"))


def _digest(path: Path | None, data: bytes | None = None, chunk: int | None = None) -> Digest:
    codex = spec("codex")
    name = None if path is None else str(path)
    facts = codex.open_facts(name)
    assert facts is not None
    reader = codex.open_reader(name, facts)
    if data is None:
        assert path is not None
        data = path.read_bytes()
    step = chunk or len(data) or 1
    for i in range(0, len(data), step):
        reader.feed(data[i : i + step])
    return facts.digest


def _reading(path: Path) -> dict[str, Any]:
    """The rollout's facts from its response items (the model's calls and their outputs)."""
    commands: list[str] = []
    written: list[str] = []
    edited: list[str] = []
    read: list[str] = []
    todos: list[tuple[str, str]] | None = None
    asks: list[str] = []
    outputs: dict[str, str] = {}
    ids: list[str] = []
    compactions = 0
    for line in path.read_text().splitlines():
        r = json.loads(line)
        p = r["payload"]
        if r["type"] == "compacted":
            compactions += 1
        if r["type"] != "response_item":
            continue
        if p["type"] == "function_call" and p["name"] == "exec_command":
            commands.append(json.loads(p["arguments"])["cmd"])
            ids.append(p["call_id"])
            if commands[-1].startswith("cat "):
                read.append(commands[-1].split()[1])
        elif p["type"] == "function_call" and p["name"] == "update_plan":
            plan = json.loads(p["arguments"])["plan"]
            todos = [(t["step"], t["status"]) for t in plan]
        elif p["type"] == "function_call_output":
            outputs[p["call_id"]] = p["output"]
        elif p["type"] == "custom_tool_call" and p["name"] == "apply_patch":
            lines = p["input"].splitlines()
            written += [ln.split(": ", 1)[1] for ln in lines if ln.startswith("*** Add")]
            edited += [ln.split(": ", 1)[1] for ln in lines if ln.startswith("*** Update")]
        elif p["type"] == "message" and p["role"] == "user":
            text = p["content"][0]["text"]
            if not text.startswith("<"):
                asks.append(text)
    failed = [
        c for c, i in zip(commands, ids, strict=True) if "exited with code 0" not in outputs[i]
    ]
    return {
        "commands": commands,
        "failed": failed,
        "written": written,
        "edited": edited,
        "read": read,
        "todos": todos,
        "asks": asks,
        "compactions": compactions,
    }


@pytest.mark.parametrize("path", SAMPLES, ids=lambda p: p.name)
def test_the_digest_is_what_the_rollout_holds(path: Path) -> None:
    d = _digest(path)
    truth = _reading(path)
    assert [c.text for c in d.commands] == truth["commands"]
    assert [c.text for c in d.failed] == truth["failed"]
    assert [Path(f.path).name for f in d.files if f.writes] == truth["written"]
    assert [Path(f.path).name for f in d.files if f.edits] == truth["edited"]
    assert [Path(f.path).name for f in d.files if f.reads] == truth["read"]
    todos = None if d.todos is None else [(t.text, t.status) for t in d.todos]
    assert todos == truth["todos"]
    assert list(d.asks) == truth["asks"]
    assert d.compactions == truth["compactions"]


@pytest.mark.parametrize("chunk", [1, 13, 4096])
def test_split_anywhere_the_same_digest(chunk: int) -> None:
    for path in SAMPLES:
        assert _digest(path, chunk=chunk) == _digest(path)


def _line(payload: dict[str, Any], kind: str = "event_msg") -> bytes:
    record = {"timestamp": "t", "ordinal": 1, "type": kind, "payload": payload}
    return json.dumps(record, separators=(",", ":")).encode() + b"\n"


def _item(item: dict[str, Any]) -> bytes:
    return _line({"type": "item_completed", "item": item})


def test_failures_reads_edits_and_the_plan() -> None:
    """Codex CLI 0.171.0's item shapes: a command that failed (exit 2), one that read a file
    (parsed_cmd type read), an apply_patch update, and update_plan's plan."""
    plan = {"plan": [{"step": "fix", "status": "completed"}, {"step": "ship", "status": "pending"}]}
    data = b"".join(
        [
            _item(
                {
                    "type": "CommandExecution",
                    "id": "c1",
                    "command": ["/bin/bash", "-lc", "cat a.py"],
                    "parsed_cmd": [
                        {"type": "read", "cmd": "cat a.py", "name": "a.py", "path": "a.py"}
                    ],
                    "status": "completed",
                    "aggregated_output": "x = 1\n",
                    "exit_code": 0,
                }
            ),
            _item(
                {
                    "type": "CommandExecution",
                    "id": "c2",
                    "command": ["/bin/bash", "-lc", "pytest"],
                    "parsed_cmd": [{"type": "unknown", "cmd": "pytest"}],
                    "status": "failed",
                    "aggregated_output": "collected 3\nFAILED test_a.py::test_x\n",
                    "exit_code": 2,
                }
            ),
            _item(
                {
                    "type": "FileChange",
                    "id": "c3",
                    "changes": {"/w/a.py": {"type": "update"}},
                    "status": "completed",
                }
            ),
            _line(
                {
                    "type": "function_call",
                    "name": "update_plan",
                    "arguments": json.dumps(plan),
                    "call_id": "c4",
                },
                "response_item",
            ),
        ]
    )
    d = _digest(None, data)
    assert [(f.path, f.reads, f.edits) for f in d.files] == [("a.py", 1, 0), ("/w/a.py", 0, 1)]
    ((text, code, error),) = [(c.text, c.exit_code, c.error) for c in d.failed]
    assert (text, code, error) == ("pytest", 2, "FAILED test_a.py::test_x")
    assert [(t.text, t.status) for t in d.todos or ()] == [
        ("fix", "completed"),
        ("ship", "pending"),
    ]


def test_records_in_another_key_order_hold_their_facts() -> None:
    """The facts come from decoded records: key order does not matter."""

    def reordered(line: bytes) -> bytes:
        record = json.loads(line)
        return json.dumps(dict(reversed(record.items()))).encode() + b"\n"

    path = DATA / "codex-cli-0.171.0" / "rollout.continuity.jsonl"
    lines = path.read_bytes().splitlines()
    data = b"".join(reordered(line) for line in lines)
    assert data.startswith(b'{"payload": {')
    assert _digest(None, data) == _digest(path)


def test_a_plan_whose_arguments_are_no_json_string_is_no_todo_list() -> None:
    def plan(arguments: object) -> bytes:
        payload = {"type": "function_call", "name": "update_plan", "arguments": arguments}
        return _line(payload, "response_item")

    steps = {"plan": [{"step": "fix", "status": "pending"}]}
    data = plan(json.dumps(steps)) + plan(steps) + plan("{not json")
    d = _digest(None, data)
    assert [(t.text, t.status) for t in d.todos or ()] == [("fix", "pending")]
    assert d.tool_calls == 1
    assert _digest(None, plan(None)).todos == ()  # no arguments: an empty list
