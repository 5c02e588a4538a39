"""The Claude Code digest reader against the real transcripts: files, commands, todos and the last
ask equal what an independent reading of each transcript finds (plain json, whole records)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from ctxd.agents import spec
from ctxd.agents.claude.digest import ClaudeFacts
from ctxd.agents.claude.files import is_subagent_path
from ctxd.agents.claude.transcript import ClaudeReader
from ctxd.core.digest import Digest, render_compact, render_markdown

DATA = Path(__file__).resolve().parents[2] / "data" / "transcripts"
SAMPLES = sorted(DATA.glob("claude-code-*/*.jsonl"))
CONTINUITY = DATA / "claude-code-2.1.332" / "transcript.continuity.jsonl"


def _digest(path: Path, chunk: int | None = None) -> Digest:
    opener = spec("claude").open_digest_reader
    assert opener is not None
    reader = opener(str(path))
    data = path.read_bytes()
    step = chunk or len(data) or 1
    for i in range(0, len(data), step):
        reader.feed(data[i : i + step])
    return reader.digest


def _reading(path: Path) -> dict[str, Any]:
    """What the transcript holds, read whole with json, independently of ctxd."""
    files: dict[str, list[int]] = {}
    commands: list[str] = []
    status: dict[str, bool] = {}  # tool_use id -> failed
    bash_ids: list[str] = []
    asks: list[str] = []
    tasks: dict[str, list[str]] = {}
    subjects: dict[str, str] = {}
    compactions = 0
    for line in path.read_text().splitlines():
        r = json.loads(line)
        if r.get("isSidechain"):
            continue
        if r.get("type") == "system" and r.get("subtype") == "compact_boundary":
            compactions += 1
        content = (r.get("message") or {}).get("content")
        if r.get("type") == "assistant":
            for b in content:
                if b.get("type") != "tool_use":
                    continue
                name, args = b["name"], b["input"]
                column = {"Read": 0, "Edit": 1, "Write": 2}.get(name)
                if column is not None:
                    files.setdefault(args["file_path"], [0, 0, 0])[column] += 1
                elif name == "Bash":
                    commands.append(args["command"])
                    bash_ids.append(b["id"])
                elif name == "TaskCreate":
                    subjects[b["id"]] = args["subject"]
                elif name == "TaskUpdate":
                    tasks[args["taskId"]][1] = args["status"]
        elif r.get("type") == "user" and not r.get("isMeta") and not r.get("isCompactSummary"):
            if isinstance(content, str) and not content.startswith("<"):
                asks.append(content)
            for b in content if isinstance(content, list) else []:
                if b.get("type") == "tool_result":
                    status[b["tool_use_id"]] = bool(b.get("is_error"))
                    if b["tool_use_id"] in subjects:
                        task = r["toolUseResult"]["task"]
                        tasks[task["id"]] = [subjects[b["tool_use_id"]], "pending"]
    return {
        "files": {p: tuple(n) for p, n in files.items()},
        "commands": commands,
        "failed": [c for c, i in zip(commands, bash_ids, strict=True) if status.get(i)],
        "asks": asks,
        "todos": [(t, s) for t, s in tasks.values()],
        "compactions": compactions,
    }


@pytest.mark.parametrize("path", SAMPLES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_the_digest_is_what_the_transcript_holds(path: Path) -> None:
    d = _digest(path)
    truth = _reading(path)
    assert {f.path: (f.reads, f.edits, f.writes) for f in d.files} == truth["files"]
    assert [c.text for c in d.commands] == truth["commands"][-12:]
    assert d.commands_run == len(truth["commands"])
    assert [c.text for c in d.failed] == truth["failed"]
    assert d.asks[-1] == truth["asks"][-1]
    assert d.first_ask == truth["asks"][0]
    assert [(t.text, t.status) for t in d.todos or ()] == truth["todos"]
    assert d.compactions == truth["compactions"]


@pytest.mark.parametrize("chunk", [1, 7, 4096])
def test_split_anywhere_the_same_digest(chunk: int) -> None:
    assert _digest(CONTINUITY, chunk) == _digest(CONTINUITY)


def test_the_continuity_capture_in_full() -> None:
    """The e2e run captured: Read + Edit of app.py, Write of NOTES.md, three tasks (one done,
    one in progress), `ls` of a missing directory (exit 2), then an auto-compaction."""
    d = _digest(CONTINUITY)
    work = "$SCRATCH/runs/continuity/work"
    assert [(f.path, f.reads, f.edits, f.writes) for f in d.files] == [
        (f"{work}/app.py", 1, 1, 0),
        (f"{work}/NOTES.md", 0, 0, 1),
    ]
    (failed,) = d.failed
    assert failed.exit_code == 2 and failed.failed
    assert failed.error == (
        "ls: cannot access '/nonexistent-ctxd-e2e-dir': No such file or directory"
    )
    assert [(t.text, t.status, t.key) for t in d.todos or ()] == [
        ("Rename the greeting in app.py", "completed", "1"),
        ("Write the release notes", "in_progress", "2"),
        ("Run the test suite", "pending", "3"),
    ]
    ok = [c for c in d.commands if c.failed is False]
    assert [c.exit_code for c in ok] == [0, 0]
    assert d.compactions == 1
    assert d.last_reply == "Done."
    note = render_compact(d)
    assert "- [~] Write the release notes\n- [ ] Run the test suite" in note
    assert "exit 2" in note and f"`{work}/app.py` — edited 1×, read 1×" in note
    md = render_markdown(d, "Claude Code session x")
    assert md.startswith("# Handoff: Claude Code session x\n")
    assert re.search(r"1 commands? \(1 failed\)|3 commands \(1 failed\)", md)


def test_reset_forgets_everything() -> None:
    opener = spec("claude").open_digest_reader
    assert opener is not None
    reader = opener(None)
    reader.feed(CONTINUITY.read_bytes())
    assert reader.digest != Digest()
    reader.reset()
    assert reader.digest == Digest()


def test_sidechain_lines_belong_to_the_subagent_reader() -> None:
    line = {
        "parentUuid": None,
        "isSidechain": True,
        "type": "user",
        "message": {"role": "user", "content": "subagent task"},
    }
    data = (json.dumps(line, separators=(",", ":")) + "\n").encode()  # as Claude Code writes
    opener = spec("claude").open_digest_reader
    assert opener is not None
    main = opener("/p/projects/x/s.jsonl")
    main.feed(data)
    assert main.digest.asks == ()
    sub = opener("/p/projects/x/s/subagents/agent-a1.jsonl")
    sub.feed(data)
    assert sub.digest.asks == ("subagent task",)


PUBLIC = sorted((DATA.parent / "public" / "claude").rglob("*.jsonl"))


@pytest.mark.parametrize("path", SAMPLES + PUBLIC, ids=lambda p: f"{p.parent.name}/{p.name}")
@pytest.mark.parametrize("subagent", [False, True])
def test_the_head_judgement_leaves_usage_alone(path: Path, subagent: bool) -> None:
    # With facts, lines whose head shows they carry no usage are not searched for it: the
    # updates and the remembered tool calls must be those of the usage-only loop.
    data = path.read_bytes()
    calls = set(re.findall(r'"id":"(toolu_[^"]+)"', data.decode()))
    for step in (len(data) or 1, 97):
        alone, riding = ClaudeReader(subagent), ClaudeReader(subagent, ClaudeFacts(subagent))
        for i in range(0, len(data), step):
            assert riding.feed(data[i : i + step]) == alone.feed(data[i : i + step])
            assert {c for c in calls if riding.saw_tool_use(c)} == {
                c for c in calls if alone.saw_tool_use(c)
            }


@pytest.mark.parametrize("path", SAMPLES + PUBLIC, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_judged_from_the_head_as_if_decoded(path: Path) -> None:
    # Every line decoded and taken whole gives the digest the head judgement gives.
    subagent = is_subagent_path(str(path))
    decoded = ClaudeFacts(subagent)
    calls: dict[str, None] = {}
    decoded.calls_seen = calls
    for line in path.read_bytes().splitlines():
        record = json.loads(line)
        decoded.take_record(record, line)
        decoded.flush()  # each line's requests folded at once, not at the end of a feed
        message = record.get("message")
        main = not record.get("isSidechain") or subagent
        if main and record.get("type") == "assistant" and isinstance(message, dict):
            calls.update(
                (b["id"], None) for b in message.get("content") or () if b.get("type") == "tool_use"
            )
    assert _digest(path) == decoded.digest


@pytest.mark.parametrize(
    "text",
    ['say "hi"', "a \\ backslash", "ends in a backslash \\", 'quote then \\"', "é ✓ \U0001f600"],
)
def test_a_typed_request_is_read_from_its_string_alone(text: str) -> None:
    # Only the request's string is decoded: escaped quotes and backslashes must end it right.
    record = {
        "parentUuid": None,
        "isSidechain": False,
        "type": "user",
        "message": {"role": "user", "content": text},
        "uuid": "u1",
    }
    for ascii_only in (True, False):
        line = json.dumps(record, separators=(",", ":"), ensure_ascii=ascii_only) + "\n"
        reader = ClaudeReader(facts=ClaudeFacts())
        reader.feed(line.encode())
        assert reader.facts is not None
        assert reader.facts.digest.asks == (text.strip(),)


def test_a_typed_request_not_ended_is_decoded_as_a_whole() -> None:
    head = b'{"parentUuid":null,"isSidechain":false,"type":"user",'
    line = head + b'"message":{"role":"user","content":"open\n'
    reader = ClaudeReader(facts=ClaudeFacts())
    reader.feed(line)
    assert reader.facts is not None
    assert reader.facts.digest.asks == ()  # not JSON: no fact, as when decoded


def _result_line(block: dict[str, Any]) -> bytes:
    record = {
        "parentUuid": "p1",
        "isSidechain": False,
        "type": "user",
        "message": {"role": "user", "content": [block]},
        "uuid": "u2",
        "toolUseResult": "Error: " + str(block.get("content")),
    }
    return json.dumps(record, separators=(",", ":")).encode() + b"\n"


_BASH_CALL = (
    b'{"parentUuid":"p0","isSidechain":false,"type":"assistant","message":{"id":"m1",'
    b'"role":"assistant","model":"claude-sonnet-4-6","content":[{"type":"tool_use",'
    b'"id":"toolu_1","name":"Bash","input":{"command":"make test"}}],"stop_reason":"tool_use",'
    b'"usage":{"input_tokens":10}},"uuid":"p1"}\n'
)


@pytest.mark.parametrize(
    "output",
    [
        "Exit code 2\nmake: *** [test] Error 2",
        'Exit code 1\nsays ,"is_error":true,"tool_use_id":"toolu_9"}] in its output',
        "Exit code 3\n\u00e9\\ \U0001f600 tail\\",
    ],
)
def test_a_failed_command_is_read_from_its_string_alone(output: str) -> None:
    # A failure's content string is decoded alone (the line repeats the output in its
    # toolUseResult): the exit status and the error line must be those the whole line says,
    # whatever the output holds.
    block = {"type": "tool_result", "content": output, "is_error": True, "tool_use_id": "toolu_1"}
    reader = ClaudeReader(facts=ClaudeFacts())
    reader.feed(_BASH_CALL + _result_line(block))
    assert reader.facts is not None
    (failed,) = reader.facts.digest.failed
    assert (failed.text, failed.exit_code) == ("make test", int(output.split()[2]))
    assert failed.error == output.splitlines()[1].strip()


def test_requests_in_text_blocks_are_decoded_only_when_they_show() -> None:
    # A request written as text blocks waits for the end of the feed like a typed one: the
    # newest five (and the session's first) are read, in their order among the others.
    def ask(text: str, blocks: bool) -> bytes:
        content: object = [{"type": "text", "text": text}] if blocks else text
        record = {
            "parentUuid": None,
            "isSidechain": False,
            "type": "user",
            "uuid": "u",
            "message": {"role": "user", "content": content},
        }
        return json.dumps(record, separators=(",", ":")).encode() + b"\n"

    lines = b"".join(ask(f"ask {i}", blocks=i % 2 == 0) for i in range(9))
    for step in (len(lines), 50):
        reader = ClaudeReader(facts=ClaudeFacts())
        for i in range(0, len(lines), step):
            reader.feed(lines[i : i + step])
        assert reader.facts is not None
        assert reader.facts.digest.first_ask == "ask 0"
        assert reader.facts.digest.asks == tuple(f"ask {i}" for i in range(4, 9))


def test_the_last_reply_is_the_newest_text_that_is_not_blank() -> None:
    # Replies wait for the end of the feed, where only the newest is folded in: a blank text
    # after it, in the same feed or a later one, must not hide it, and the newest must win.
    def reply(text: str, n: int) -> bytes:
        record = {
            "parentUuid": "p",
            "isSidechain": False,
            "type": "assistant",
            "message": {
                "id": f"m{n}",
                "role": "assistant",
                "model": "claude-sonnet-4-6",
                "content": [{"type": "text", "text": text}],
                "stop_reason": "end_turn",
                "usage": {"input_tokens": 10 + n},
            },
            "uuid": f"a{n}",
        }
        return json.dumps(record, separators=(",", ":")).encode() + b"\n"

    first, second = reply("first answer", 1), reply("second answer", 2)
    blank = reply(" \n ", 3)
    for feeds in ([first + second + blank], [first + second, blank], [first, second, blank]):
        reader = ClaudeReader(facts=ClaudeFacts())
        for data in feeds:
            reader.feed(data)
        assert reader.facts is not None
        assert reader.facts.digest.last_reply == "second answer"
    reader = ClaudeReader(facts=ClaudeFacts())
    reader.feed(second + first)
    assert reader.facts is not None
    assert reader.facts.digest.last_reply == "first answer"
