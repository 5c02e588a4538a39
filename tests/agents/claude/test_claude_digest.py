"""The Claude Code session digest (`ClaudeFacts`, told its records by `ClaudeReader`) against the
real transcripts: files, commands, todos and the last ask equal what an independent reading of
each transcript finds (plain json, whole records)."""

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


def _opened(path: str | None) -> tuple[ClaudeReader, ClaudeFacts]:
    """The reader and facts the daemon opens for a Claude Code transcript at `path`."""
    facts = spec("claude").open_facts(path)
    assert isinstance(facts, ClaudeFacts)
    reader = spec("claude").open_reader(path, facts)
    assert isinstance(reader, ClaudeReader)
    return reader, facts


def _digest_of(data: bytes, path: str | None, chunk: int | None = None) -> Digest:
    reader, facts = _opened(path)
    step = chunk or len(data) or 1
    for i in range(0, len(data), step):
        reader.feed(data[i : i + step])
    return facts.digest


def _digest(path: Path, chunk: int | None = None) -> Digest:
    return _digest_of(path.read_bytes(), str(path), chunk)


def _fed(data: bytes) -> ClaudeFacts:
    """The facts of a session's transcript made of `data`."""
    reader, facts = _opened(None)
    reader.feed(data)
    return facts


def _reading(path: Path) -> dict[str, Any]:
    """What the transcript holds, read whole with json, independently of ctxd."""
    reading = _Reading()
    for line in path.read_text().splitlines():
        reading.take(json.loads(line))
    return reading.result()


class _Reading:
    """The naive reading's running tallies, one transcript record at a time."""

    def __init__(self) -> None:
        self.files: dict[str, list[int]] = {}
        self.commands: list[str] = []
        self.status: dict[str, bool] = {}  # tool_use id -> failed
        self.bash_ids: list[str] = []
        self.asks: list[str] = []
        self.tasks: dict[str, list[str]] = {}
        self.subjects: dict[str, str] = {}
        self.compactions = 0

    def take(self, r: dict[str, Any]) -> None:
        if r.get("isSidechain"):
            return
        if r.get("type") == "system" and r.get("subtype") == "compact_boundary":
            self.compactions += 1
        content: Any = (r.get("message") or {}).get("content")
        if r.get("type") == "assistant":
            for b in content:
                if b.get("type") == "tool_use":
                    self._call(b)
        elif r.get("type") == "user" and not r.get("isMeta") and not r.get("isCompactSummary"):
            self._user(r, content)

    def _call(self, b: dict[str, Any]) -> None:
        name, args = b["name"], b["input"]
        column = {"Read": 0, "Edit": 1, "Write": 2}.get(name)
        if column is not None:
            self.files.setdefault(args["file_path"], [0, 0, 0])[column] += 1
        elif name == "Bash":
            self.commands.append(args["command"])
            self.bash_ids.append(b["id"])
        elif name == "TaskCreate":
            self.subjects[b["id"]] = args["subject"]
        elif name == "TaskUpdate":
            self.tasks[args["taskId"]][1] = args["status"]

    def _user(self, r: dict[str, Any], content: object) -> None:
        if isinstance(content, str) and not content.startswith("<"):
            self.asks.append(content)
        for b in content if isinstance(content, list) else []:
            if b.get("type") == "tool_result":
                self.status[b["tool_use_id"]] = bool(b.get("is_error"))
                if b["tool_use_id"] in self.subjects:
                    task = r["toolUseResult"]["task"]
                    self.tasks[task["id"]] = [self.subjects[b["tool_use_id"]], "pending"]

    def result(self) -> dict[str, Any]:
        commands = self.commands
        return {
            "files": {p: tuple(n) for p, n in self.files.items()},
            "commands": commands,
            "failed": [
                c for c, i in zip(commands, self.bash_ids, strict=True) if self.status.get(i)
            ],
            "asks": self.asks,
            "todos": [(t, s) for t, s in self.tasks.values()],
            "compactions": self.compactions,
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
    reader, facts = _opened(None)
    reader.feed(CONTINUITY.read_bytes())
    assert facts.digest != Digest()
    reader.reset()  # the reader resets its listener too
    assert facts.digest == Digest()
    reader.feed(CONTINUITY.read_bytes())
    assert facts.digest == _digest(CONTINUITY)


def test_sidechain_lines_belong_to_the_subagent_reader() -> None:
    line = {
        "parentUuid": None,
        "isSidechain": True,
        "type": "user",
        "message": {"role": "user", "content": "subagent task"},
    }
    compact = (json.dumps(line, separators=(",", ":")) + "\n").encode()  # as Claude Code writes
    spaced = (json.dumps(line) + "\n").encode()  # not known from its first bytes: decoded
    for data in (compact, spaced):
        assert _digest_of(data, "/p/projects/x/s.jsonl").asks == ()
        sub = _digest_of(data, "/p/projects/x/s/subagents/agent-a1.jsonl")
        assert sub.asks == ("subagent task",)


PUBLIC = sorted((DATA.parent / "public" / "claude").rglob("*.jsonl"))


@pytest.mark.parametrize("path", SAMPLES + PUBLIC, ids=lambda p: f"{p.parent.name}/{p.name}")
@pytest.mark.parametrize("subagent", [False, True])
def test_the_facts_leave_usage_alone(path: Path, subagent: bool) -> None:
    # With facts, every line that may hold one is decoded: the updates and the remembered tool
    # calls must be those of the usage-only loop, which decodes only lines that may hold usage.
    data = path.read_bytes()
    calls = set(re.findall(r'"id":"(toolu_[^"]+)"', data.decode()))
    for step in (len(data) or 1, 97):
        alone, riding = ClaudeReader(subagent), ClaudeReader(subagent, ClaudeFacts())
        for i in range(0, len(data), step):
            assert riding.feed(data[i : i + step]) == alone.feed(data[i : i + step])
            assert {c for c in calls if riding.saw_tool_use(c)} == {
                c for c in calls if alone.saw_tool_use(c)
            }


@pytest.mark.parametrize("path", SAMPLES + PUBLIC, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_lines_skipped_unread_hold_no_fact(path: Path) -> None:
    # The lines the reader does not decode (known from their first bytes to hold nothing)
    # hold no fact: every record of the reader's chain taken, one at a time, gives the same
    # digest.
    subagent = is_subagent_path(str(path))
    decoded = ClaudeFacts()
    for line in path.read_bytes().splitlines():
        record = json.loads(line)
        if record.get("isSidechain") and not subagent:
            continue
        decoded.take(record)
        decoded.flush()  # each line's requests folded at once, not at the end of a feed
    assert _digest(path) == decoded.digest


@pytest.mark.parametrize("path", SAMPLES + PUBLIC, ids=lambda p: f"{p.parent.name}/{p.name}")
@pytest.mark.parametrize("layout", ["spaced", "sorted"])
def test_another_json_layout_gives_the_same_digest(path: Path, layout: str) -> None:
    # The first bytes of Claude Code's own layout only spare decoding: any other layout (spaces
    # after the separators, keys in another order) is decoded, and says the same.
    def written(record: object) -> str:
        if layout == "spaced":
            return json.dumps(record, ensure_ascii=False)
        return json.dumps(record, sort_keys=True, separators=(",", ":"))

    lines = path.read_bytes().splitlines()
    data = "".join(written(json.loads(line)) + "\n" for line in lines).encode()
    assert _digest_of(data, str(path)) == _digest(path)


@pytest.mark.parametrize(
    "text",
    ['say "hi"', "a \\ backslash", "ends in a backslash \\", 'quote then \\"', "é ✓ \U0001f600"],
)
def test_a_typed_request_is_read_whole_whatever_it_holds(text: str) -> None:
    # Escaped quotes and backslashes, and characters outside ASCII, escaped or not.
    record = {
        "parentUuid": None,
        "isSidechain": False,
        "type": "user",
        "message": {"role": "user", "content": text},
        "uuid": "u1",
    }
    for ascii_only in (True, False):
        line = json.dumps(record, separators=(",", ":"), ensure_ascii=ascii_only) + "\n"
        assert _fed(line.encode()).digest.asks == (text.strip(),)


def test_a_line_that_is_no_json_holds_no_fact() -> None:
    head = b'{"parentUuid":null,"isSidechain":false,"type":"user",'
    line = head + b'"message":{"role":"user","content":"open\n'
    assert _fed(line).digest.asks == ()


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
def test_a_failed_command_says_its_exit_status_and_error(output: str) -> None:
    # The exit status and the error line are those the output says, whatever else it holds
    # (the line repeats the output in its toolUseResult).
    block = {"type": "tool_result", "content": output, "is_error": True, "tool_use_id": "toolu_1"}
    (failed,) = _fed(_BASH_CALL + _result_line(block)).digest.failed
    assert (failed.text, failed.exit_code) == ("make test", int(output.split()[2]))
    assert failed.error == output.splitlines()[1].strip()


def test_requests_in_text_blocks_wait_for_the_end_of_the_feed_too() -> None:
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
        d = _digest_of(lines, None, step)
        assert d.first_ask == "ask 0"
        assert d.asks == tuple(f"ask {i}" for i in range(4, 9))


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
        reader, facts = _opened(None)
        for data in feeds:
            reader.feed(data)
        assert facts.digest.last_reply == "second answer"
    assert _fed(second + first).digest.last_reply == "first answer"


def _user(content: object, **extra: object) -> bytes:
    record = {
        "parentUuid": None,
        "isSidechain": False,
        "type": "user",
        "message": {"role": "user", "content": content},
        "uuid": "u9",
        **extra,
    }
    return json.dumps(record, separators=(",", ":")).encode() + b"\n"


_TYPED = _user("add a --verbose flag")


@pytest.mark.parametrize(
    "injected",
    [
        # A background task's notification (2.1.332: its origin says so, and its tags).
        _user(
            "<task-notification>\n<task-id>bx1</task-id>\n<status>completed</status>\n"
            "<summary>Background command finished</summary>\n</task-notification>",
            origin={"kind": "task-notification"},
        ),
        _user("the build is green", origin={"kind": "task-notification"}),
        # A local command: its echo and its output (as in the 2.1.38 and 2.1.197 samples).
        _user(
            "<command-name>/model</command-name>\n<command-message>model</command-message>\n"
            "<command-args></command-args>"
        ),
        _user("<local-command-stdout>Set model to opus</local-command-stdout>"),
        # `!` shell mode (as in the 1.0.51 sample).
        _user("<bash-input>uv run ty check</bash-input>"),
        _user("<bash-stdout>warning: x</bash-stdout><bash-stderr></bash-stderr>"),
        # Reminders alone, as a string and as text blocks (the IDE's note as in 2.0.28).
        _user("<system-reminder>\nThe file was modified.\n</system-reminder>"),
        _user(
            [
                {"type": "text", "text": "<ide_opened_file>The user opened a.py</ide_opened_file>"},
                {"type": "text", "text": "<system-reminder>x</system-reminder>"},
            ]
        ),
        _user("[Request interrupted by user for tool use]"),
    ],
)
def test_what_the_harness_adds_as_a_user_message_is_no_request(injected: bytes) -> None:
    d = _fed(_TYPED + injected).digest
    assert d.asks == ("add a --verbose flag",)
    assert "add a --verbose flag" in render_compact(d)


@pytest.mark.parametrize(
    "content",
    [
        "<system-reminder>\nThe file was modified.\n</system-reminder>\nnow add tests",
        [
            {"type": "text", "text": "<ide_opened_file>The user opened a.py</ide_opened_file>"},
            {"type": "text", "text": "now add tests"},
        ],
    ],
)
def test_a_request_beside_what_the_harness_added_is_what_the_user_typed(content: object) -> None:
    assert _fed(_TYPED + _user(content)).digest.asks[-1] == "now add tests"


def _bash(call: str, command: str) -> bytes:
    record = {
        "parentUuid": "p0",
        "isSidechain": False,
        "type": "assistant",
        "message": {
            "id": f"m-{call}",
            "role": "assistant",
            "model": "claude-sonnet-4-6",
            "content": [
                {"type": "tool_use", "id": call, "name": "Bash", "input": {"command": command}}
            ],
            "stop_reason": "tool_use",
            "usage": {"input_tokens": 10},
        },
        "uuid": f"a-{call}",
    }
    return json.dumps(record, separators=(",", ":")).encode() + b"\n"


def _outcome(call: str, output: str, failed: bool) -> bytes:
    block = {"type": "tool_result", "tool_use_id": call, "content": output, "is_error": failed}
    return _user([block])


def test_a_failed_command_that_a_later_run_fixed_shows_as_fixed() -> None:
    data = (
        _bash("t1", "make test")
        + _outcome("t1", "Exit code 2\nmake: *** [test] Error 2", True)
        + _bash("t2", "make lint")
        + _outcome("t2", "Exit code 1\nE501 line too long", True)
        + _bash("t3", "make test")
        + _outcome("t3", "42 passed", False)
    )
    d = _fed(data).digest
    assert [(c.text, c.fixed) for c in d.failed] == [("make test", True), ("make lint", False)]
    note = render_markdown(d, "t")
    assert "- `make test` — exit 2: make: *** [test] Error 2 — fixed: a later run succeeded" in note
    assert "- `make lint` — exit 1: E501 line too long\n" in note
