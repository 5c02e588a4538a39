"""The Gemini CLI digest reader against the real recordings: files, commands, todos, the last ask
and the compressions equal what an independent reading of each recording finds (plain json)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from ctxd.agents import spec
from ctxd.core.digest import Digest

DATA = Path(__file__).resolve().parents[2] / "data" / "transcripts"
SAMPLES = sorted(DATA.glob("gemini-cli-*/*.jsonl"))


def _digest(path: Path, chunk: int | None = None) -> Digest:
    opener = spec("gemini").open_digest_reader
    assert opener is not None
    reader = opener(str(path))
    data = path.read_bytes()
    step = chunk or len(data) or 1
    for i in range(0, len(data), step):
        reader.feed(data[i : i + step])
    return reader.digest


def _reading(path: Path) -> dict[str, Any]:
    """The recording's facts: the last copy of each message by id; tool calls once each."""
    calls: dict[str, dict[str, Any]] = {}
    asks: list[str] = []
    summaries: set[str] = set()
    compressions = 0
    messages_seen = False
    for line in path.read_text().splitlines():
        r = json.loads(line)
        messages_seen |= "id" in r
        if "$set" in r and "messages" in r["$set"]:
            new = {
                m["id"]
                for m in r["$set"]["messages"]
                if isinstance(m.get("content"), list)
                and m["content"][0].get("text", "").startswith(("<state_snapshot>", "Got it."))
            } - summaries
            # a list rewritten with a summary not seen before, once the session has begun
            if new and messages_seen:
                compressions += 1
            summaries |= new
        elif r.get("type") == "user":
            texts = [p["text"] for p in r["content"] if "text" in p]
            text = re.sub(r"<hook_context>.*?</hook_context>", "", "\n".join(texts), flags=re.S)
            # not a slash command, not ctxd's own Stop reason (recorded as the user's text)
            if texts and not text.strip().startswith(("/", "CONTEXT HANDOFF:")):
                asks.append(text.strip())
        elif r.get("type") == "gemini":
            for c in r.get("toolCalls", []):
                calls[c["id"]] = c
    commands = [c for c in calls.values() if c["name"] == "run_shell_command"]
    files: dict[str, list[int]] = {}
    todos: list[tuple[str, str]] | None = None
    for c in calls.values():
        column = {"read_file": 0, "replace": 1, "write_file": 2}.get(c["name"])
        if column is not None:
            files.setdefault(c["args"]["file_path"], [0, 0, 0])[column] += 1
        elif c["name"] == "write_todos":
            todos = [(t["description"], t["status"]) for t in c["args"]["todos"]]
    return {
        "files": {p: tuple(n) for p, n in files.items()},
        "todos": todos,
        "commands": [c["args"]["command"] for c in commands],
        "failed": [
            c["args"]["command"]
            for c in commands
            if c["status"] == "error"
            or ("Exit Code: 0" not in str(c["result"]) and "Exit Code" in str(c["result"]))
        ],
        "asks": asks,
        "compressions": compressions,
    }


@pytest.mark.parametrize("path", SAMPLES, ids=lambda p: p.name)
def test_the_digest_is_what_the_recording_holds(path: Path) -> None:
    d = _digest(path)
    truth = _reading(path)
    assert [c.text for c in d.commands] == truth["commands"]
    assert [c.text for c in d.failed] == truth["failed"]
    assert list(d.asks) == truth["asks"][-5:]
    assert d.compactions == truth["compressions"]
    assert {f.path: (f.reads, f.edits, f.writes) for f in d.files} == truth["files"]
    todos = None if d.todos is None else [(t.text, t.status) for t in d.todos]
    assert todos == truth["todos"]


@pytest.mark.parametrize("path", SAMPLES, ids=lambda p: p.name)
def test_the_compressions_are_the_usage_readers(path: Path) -> None:
    reader = spec("gemini").open_reader(str(path))
    updates = reader.feed(path.read_bytes())
    assert _digest(path).compactions == sum(u.compaction for u in updates)


@pytest.mark.parametrize("chunk", [1, 13, 4096])
def test_split_anywhere_the_same_digest(chunk: int) -> None:
    for path in SAMPLES:
        assert _digest(path, chunk) == _digest(path)


def test_blocked_and_failed_calls_and_hook_context() -> None:
    d = _digest(DATA / "gemini-cli-0.61.0" / "transcript.exitcodes.1.jsonl")
    assert [(c.text, c.error) for c in d.failed] == [
        ("echo one", "Tool execution blocked: BT-EXIT2-MARKER blocked by exit 2"),
        ("echo two", "Tool execution blocked: BT-DENY-MARKER denied by JSON"),
        ("echo three", "AT-EXIT2-MARKER replaces the tool result"),
        ("echo five", "AT-DENY-MARKER hides the tool output"),
    ]
    assert [c.exit_code for c in d.commands if not c.failed] == [0]
    printed = _digest(DATA / "gemini-cli-0.61.0" / "transcript.print.1.jsonl")
    assert printed.first_ask == "Run echo hello and echo world"  # hook context taken out


def _line(record: dict[str, Any]) -> bytes:
    return json.dumps(record, separators=(",", ":")).encode() + b"\n"


def test_files_todos_and_exit_codes_from_tool_calls() -> None:
    """Gemini CLI 0.61.0's tool names and parameters (read_file, replace, write_file,
    write_todos, run_shell_command with `Exit Code: N` in its output)."""

    def call(i: int, name: str, args: dict[str, Any], output: str = "ok") -> dict[str, Any]:
        response = {"output": output}
        return {
            "id": f"c{i}",
            "name": name,
            "args": args,
            "result": [{"functionResponse": {"id": f"c{i}", "name": name, "response": response}}],
            "status": "success",
        }

    todos = [
        {"description": "parse", "status": "completed"},
        {"description": "test", "status": "in_progress"},
    ]
    calls = [
        call(1, "read_file", {"file_path": "/w/a.py"}),
        call(2, "replace", {"file_path": "/w/a.py", "old_string": "x", "new_string": "y"}),
        call(3, "write_file", {"file_path": "/w/b.md", "content": "hi"}),
        call(4, "write_todos", {"todos": todos}),
        call(5, "run_shell_command", {"command": "make"}, "Output: boom\nExit Code: 2"),
    ]
    message = {"id": "m1", "timestamp": "t", "type": "gemini", "content": "", "toolCalls": calls}
    opener = spec("gemini").open_digest_reader
    assert opener is not None
    reader = opener("/x/chats/session-1.jsonl")
    reader.feed(_line(message) + _line(message))  # written twice: folded once
    d = reader.digest
    assert [(f.path, f.reads, f.edits, f.writes) for f in d.files] == [
        ("/w/a.py", 1, 1, 0),
        ("/w/b.md", 0, 0, 1),
    ]
    assert [(t.text, t.status) for t in d.todos or ()] == [
        ("parse", "completed"),
        ("test", "in_progress"),
    ]
    ((text, code, error),) = [(c.text, c.exit_code, c.error) for c in d.failed]
    assert (text, code, error) == ("make", 2, "boom")


# ------------------------------------------------------- lines in Gemini CLI 0.61.0's own shape


def _call_in_shape(
    call_id: str, name: str, args: dict[str, Any], response: dict[str, Any], status: str = "success"
) -> dict[str, Any]:
    """A tool call as Gemini CLI 0.61.0 records it, keys in its order (the digest walks those)."""
    part = {"functionResponse": {"id": call_id, "name": name, "response": response}}
    return {
        "id": call_id,
        "name": name,
        "args": args,
        "result": [part],
        "status": status,
        "timestamp": "2026-11-30T23:24:26.507Z",
        "resultDisplay": "",
        "description": "",
        "displayName": name,
        "renderOutputAsMarkdown": True,
    }


def _gemini_line(message_id: str, calls: list[dict[str, Any]], prompt: int, **extra: Any) -> bytes:
    tokens = {
        "input": prompt,
        "output": 40,
        "cached": 0,
        "thoughts": 0,
        "tool": 0,
        "total": prompt + 40,
    }
    record = {
        "id": message_id,
        "timestamp": "2026-11-30T23:24:26.456Z",
        "type": "gemini",
        "content": "",
        "thoughts": [],
        "tokens": tokens,
        "model": "gemini-3.8-flash",
        "toolCalls": calls,
        **extra,
    }
    return _line(record)


def _fed(data: bytes) -> tuple[Digest, list[int]]:
    opener = spec("gemini").open_digest_reader
    assert opener is not None
    reader = opener("/x/chats/session-1.jsonl")
    assert reader.usage_reader is not None
    updates = reader.usage_reader.feed(data)
    return reader.digest, [u.tokens for u in updates]


def test_calls_walked_without_decoding_fold_what_decoding_folds() -> None:
    """A line in Gemini CLI's shape is walked call by call (results skipped); the same calls in
    a line that must be decoded (keys in another order) give the same digest."""
    calls = [
        _call_in_shape("a", "read_file", {"file_path": "/w/a.py"}, {"output": 'x = "}],\\n"'}),
        _call_in_shape(
            "b",
            "replace",
            {"old_string": "x", "file_path": "/w/a.py", "new_string": "y"},
            {"output": "ok"},
        ),
        _call_in_shape("c", "run_shell_command", {"command": "make"}, {"output": "done"}),
        _call_in_shape("d", "update_topic", {"title": "t"}, {"output": "ok"}),
    ]
    walked, tokens = _fed(_gemini_line("m1", calls, 100_000))
    reordered = [{k: c[k] for k in reversed(list(c))} for c in calls]
    decoded, _ = _fed(_gemini_line("m1", reordered, 100_000))
    assert tokens == [100_000]
    assert walked == decoded
    assert [(f.path, f.reads, f.edits) for f in walked.files] == [("/w/a.py", 1, 1)]
    assert [(c.text, c.failed, c.exit_code) for c in walked.commands] == [("make", False, 0)]
    assert walked.tool_calls == 4


def test_a_cancelled_call_is_not_taken_for_a_success() -> None:
    """Gemini CLI keeps a cancelled tool's own output and adds an error; the next call of the
    line, a success, is still counted."""
    calls = [
        _call_in_shape(
            "a",
            "run_shell_command",
            {"command": "sleep 99"},
            {"output": "partial", "error": "[Operation Cancelled] by user"},
            status="cancelled",
        ),
        _call_in_shape("b", "read_file", {"file_path": "/w/a.py"}, {"output": "x"}),
    ]
    d, _ = _fed(_gemini_line("m1", calls, 100_000))
    assert [(c.text, c.failed) for c in d.commands] == [("sleep 99", True)]
    assert [(f.path, f.reads) for f in d.files] == [("/w/a.py", 1)]


def test_a_second_tokens_key_after_the_calls_is_the_figure() -> None:
    """Walking the calls stands for the usage reader's search for a second `tokens` key: a line
    that goes on after its calls is decoded, and JSON's last key wins."""
    calls = [_call_in_shape("a", "read_file", {"file_path": "/w/a.py"}, {"output": "x"})]
    line = _gemini_line("m1", calls, 100_000)
    line = line[: -len(b"}\n")] + b',"tokens":{"input":150000,"total":150000}}\n'
    d, tokens = _fed(line)
    assert tokens == [150_000]
    assert [(f.path, f.reads) for f in d.files] == [("/w/a.py", 1)]


def test_a_walked_command_whose_output_has_an_exit_code_is_a_failure() -> None:
    """Only a command's output says its exit code: such a line is decoded, not walked."""
    calls = [
        _call_in_shape(
            "a", "run_shell_command", {"command": "make"}, {"output": "x\nExit Code: 2"}
        ),
        _call_in_shape("b", "run_shell_command_x", {"command": "ok"}, {"output": "Exit Code: 2"}),
    ]
    d, _ = _fed(_gemini_line("m1", calls, 100_000))
    assert [(c.text, c.failed, c.exit_code) for c in d.commands] == [("make", True, 2)]
    assert d.tool_calls == 2


def test_walked_and_decoded_calls_keep_the_files_order() -> None:
    """Walked calls wait for the end of the feed; a decoded line's calls come after them."""
    done = {"output": "done"}
    walked = _call_in_shape("a", "run_shell_command", {"command": "one"}, done)
    failed = _call_in_shape("b", "run_shell_command", {"command": "two"}, {"error": "no"}, "error")
    later = _call_in_shape("c", "run_shell_command", {"command": "three"}, done)
    data = (
        _gemini_line("m1", [walked], 100)
        + _gemini_line("m2", [failed], 200)
        + _gemini_line("m3", [later], 300)
        + _gemini_line("m3", [later], 300)  # written again: folded once
    )
    d, tokens = _fed(data)
    assert tokens == [100, 200, 300]
    assert [(c.text, c.failed) for c in d.commands] == [
        ("one", False),
        ("two", True),
        ("three", False),
    ]
    assert d.tool_calls == 3


def _typed(message_id: str, content: list[dict[str, Any]], **extra: Any) -> bytes:
    record = {
        "id": message_id,
        "timestamp": "2026-11-30T23:24:26.456Z",
        "type": "user",
        "content": content,
        **extra,
    }
    return _line(record)


def test_requests_in_the_clis_shape_are_what_decoding_finds() -> None:
    """A request's text is decoded alone when its line is in Gemini CLI's shape (one text
    part, maybe what the CLI showed after it); any other shape is decoded whole."""
    shown = [{"text": "/init"}]
    lines = [
        _typed("u1", [{"text": 'say "hi"\n'}]),
        _typed("u2", [{"text": "why?"}], displayContent=shown),
        _typed("u3", [{"text": "one"}, {"text": "two"}]),
        _typed("u4", [{"text": "/compress"}]),
        _typed("u5", [{"text": "<hook_context>x</hook_context> fix it"}], displayContent=shown),
        _typed("u6", [{"text": 'a \\"}],"displayContent": b'}]),
    ]
    d, _ = _fed(b"".join(lines))
    assert d.first_ask == 'say "hi"'
    assert list(d.asks) == ['say "hi"', "why?", "one\ntwo", "fix it", 'a \\"}],"displayContent": b']


def test_requests_show_after_every_feed() -> None:
    """Requests wait for the end of a feed: after any feed, the digest holds the session's
    first and the newest five."""
    opener = spec("gemini").open_digest_reader
    assert opener is not None
    reader = opener("/x/chats/session-1.jsonl")
    for i in range(300):
        reader.feed(_typed(f"u{i}", [{"text": f"ask {i}"}]))
        if i in (0, 1, 280, 299):
            d = reader.digest
            assert d.first_ask == "ask 0"
            assert list(d.asks) == [f"ask {j}" for j in range(max(0, i - 4), i + 1)]
