"""The Gemini CLI digest (`GeminiFacts`, the listener of its reader) against the real recordings:
files, commands, todos, the last ask and the compressions equal what an independent reading of
each recording finds (plain json); and on lines written for the purpose."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from ctxd.agents import spec
from ctxd.agents.gemini.digest import GeminiFacts
from ctxd.agents.gemini.transcript import GeminiJsonReader, GeminiReader
from ctxd.core.digest import Digest
from ctxd.core.events import UsageUpdate

DATA = Path(__file__).resolve().parents[2] / "data" / "transcripts"
SAMPLES = sorted(DATA.glob("gemini-cli-*/*.jsonl"))


def _opened(path: str) -> tuple[GeminiFacts, GeminiReader]:
    """The facts and the reader the daemon opens for a recording at `path`."""
    facts = spec("gemini").open_facts(path)
    assert isinstance(facts, GeminiFacts)
    reader = spec("gemini").open_reader(path, facts)
    assert isinstance(reader, GeminiReader)
    return facts, reader


def _fed_in(path: Path, chunk: int | None = None) -> tuple[Digest, list[UsageUpdate]]:
    facts, reader = _opened(str(path))
    data = path.read_bytes()
    step = chunk or len(data) or 1
    updates = [u for i in range(0, len(data), step) for u in reader.feed(data[i : i + step])]
    return facts.digest, updates


def _digest(path: Path, chunk: int | None = None) -> Digest:
    return _fed_in(path, chunk)[0]


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


@pytest.mark.parametrize("path", SAMPLES, ids=lambda p: p.name)
@pytest.mark.parametrize("chunk", [None, 7])
def test_the_facts_do_not_change_the_usage(path: Path, chunk: int | None) -> None:
    """The reader telling its facts (every line decoded) reports what it reports alone (the
    usage prefilter, what `ctxd replay` runs)."""
    alone = spec("gemini").open_reader(str(path)).feed(path.read_bytes())
    assert _fed_in(path, chunk)[1] == alone


def test_reset_forgets_the_facts_too() -> None:
    path = DATA / "gemini-cli-0.61.0" / "transcript.compress.1.jsonl"
    facts, reader = _opened(str(path))
    reader.feed(path.read_bytes())
    assert facts.digest.compactions == 2
    reader.reset()
    assert facts.digest == Digest()
    reader.feed(path.read_bytes())  # read again from 0: the same digest, not twice the facts
    assert facts.digest == _digest(path)


def test_the_single_object_recordings_keep_no_digest() -> None:
    path = str(DATA.parent / "public" / "gemini" / "chats" / "session-2026-03-kind.json")
    assert spec("gemini").open_facts(path) is None
    assert isinstance(spec("gemini").open_reader(path), GeminiJsonReader)


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
    facts, reader = _opened("/x/chats/session-1.jsonl")
    reader.feed(_line(message) + _line(message))  # written twice: folded once
    d = facts.digest
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
    """A tool call as Gemini CLI 0.61.0 records it, keys in its order."""
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
    facts, reader = _opened("/x/chats/session-1.jsonl")
    updates = reader.feed(data)
    return facts.digest, [u.tokens for u in updates]


def test_the_calls_fold_the_same_whatever_the_key_order() -> None:
    """A line in Gemini CLI's shape and the same calls with their keys in another order give the
    same digest: file tools by their path wherever it is, commands, other tools counted."""
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
    in_shape, tokens = _fed(_gemini_line("m1", calls, 100_000))
    reordered = [{k: c[k] for k in reversed(list(c))} for c in calls]
    reordered_digest, _ = _fed(_gemini_line("m1", reordered, 100_000))
    assert tokens == [100_000]
    assert in_shape == reordered_digest
    assert [(f.path, f.reads, f.edits) for f in in_shape.files] == [("/w/a.py", 1, 1)]
    assert [(c.text, c.failed, c.exit_code) for c in in_shape.commands] == [("make", False, 0)]
    assert in_shape.tool_calls == 4


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
    """A line that goes on after its calls with another `tokens` key: JSON's last key wins, for
    the usage and with the facts alike."""
    calls = [_call_in_shape("a", "read_file", {"file_path": "/w/a.py"}, {"output": "x"})]
    line = _gemini_line("m1", calls, 100_000)
    line = line[: -len(b"}\n")] + b',"tokens":{"input":150000,"total":150000}}\n'
    d, tokens = _fed(line)
    assert tokens == [150_000]
    assert [u.tokens for u in GeminiReader().feed(line)] == [150_000]
    assert [(f.path, f.reads) for f in d.files] == [("/w/a.py", 1)]


def test_a_command_whose_output_has_an_exit_code_is_a_failure() -> None:
    """Only a command's output says its exit code (another tool's output may hold the words)."""
    calls = [
        _call_in_shape(
            "a", "run_shell_command", {"command": "make"}, {"output": "x\nExit Code: 2"}
        ),
        _call_in_shape("b", "run_shell_command_x", {"command": "ok"}, {"output": "Exit Code: 2"}),
    ]
    d, _ = _fed(_gemini_line("m1", calls, 100_000))
    assert [(c.text, c.failed, c.exit_code) for c in d.commands] == [("make", True, 2)]
    assert d.tool_calls == 2


def test_the_calls_keep_the_files_order_and_are_folded_once() -> None:
    """Successes and failures in the file's order; a message written again adds nothing."""
    done = {"output": "done"}
    first = _call_in_shape("a", "run_shell_command", {"command": "one"}, done)
    failed = _call_in_shape("b", "run_shell_command", {"command": "two"}, {"error": "no"}, "error")
    later = _call_in_shape("c", "run_shell_command", {"command": "three"}, done)
    data = (
        _gemini_line("m1", [first], 100)
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


def test_requests_are_the_texts_the_user_typed() -> None:
    """A request is its message's text parts joined (not what the CLI showed instead, not a
    slash command, not what hooks added), quotes and escapes as typed."""
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
    """After any feed, the digest holds the session's first request and the newest five."""
    facts, reader = _opened("/x/chats/session-1.jsonl")
    for i in range(300):
        reader.feed(_typed(f"u{i}", [{"text": f"ask {i}"}]))
        if i in (0, 1, 280, 299):
            d = facts.digest
            assert d.first_ask == "ask 0"
            assert list(d.asks) == [f"ask {j}" for j in range(max(0, i - 4), i + 1)]


def test_the_call_ids_remembered_are_bounded() -> None:
    """A message written again is folded once while its calls are among the newest 64
    remembered; the ids of older ones are forgotten (the memory is bounded)."""
    done = {"output": "ok"}
    lines = [
        _gemini_line(f"m{i}", [_call_in_shape(f"c{i}", "update_topic", {}, done)], 100 + i)
        for i in range(70)
    ]
    d, _ = _fed(b"".join(lines) + lines[69] + lines[0])
    assert d.tool_calls == 71  # m69 again: nothing; m0 again: forgotten, counted anew


def _rewrite(*messages: dict[str, Any]) -> bytes:
    return _line({"$set": {"messages": list(messages), "lastUpdated": "2026-11-30T23:24:27Z"}})


def test_rewrites_at_the_start_and_after_a_compression() -> None:
    """A `$set` of messages at the file's start (a resumed session) brings in its facts, and
    the summary it holds is no compaction; after the session began, only a summary not seen
    before counts (once per rewrite), and the rewritten messages' facts are not taken again."""
    ask = {"id": "u1", "timestamp": "t", "type": "user", "content": [{"text": "fix the bug"}]}
    old = {"id": "s1", "type": "user", "content": [{"text": "<state_snapshot>old"}]}
    new = {"id": "s2", "type": "user", "content": [{"text": "<state_snapshot>new"}]}
    ack = {"id": "a2", "type": "gemini", "content": "Got it. Thanks for the additional context!"}
    data = (
        _rewrite(old, ask)
        + _typed("u2", [{"text": "and the test"}])
        + _rewrite(old, ask)  # a resume's repeat: no compaction, no request again
        + _rewrite(new, ack, ask)  # a compression: summary and acknowledgement, one compaction
        + _rewrite(new, ack)
    )
    d, _ = _fed(data)
    assert list(d.asks) == ["fix the bug", "and the test"]
    assert d.compactions == 1
    assert d.last_reply is None  # the acknowledgement is no reply
