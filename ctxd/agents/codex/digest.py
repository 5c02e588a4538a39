"""Codex CLI rollouts -> the session digest's facts (`ctxd.core.digest`).

What a rollout (0.171.0) says: every line is `{timestamp, ordinal, type, payload}`; the facts are
in `event_msg` lines of `payload.type == "item_completed"`, one finished item each:
- `UserMessage` (`content[].text`): a request the user typed (a Stop hook's prompt is a
  `HookPrompt` item instead, and the environment context is no item at all);
- `AgentMessage` (`content[].text`): what the model said;
- `CommandExecution`: a shell command (`command`, the argv of its shell; `parsed_cmd[].cmd` is
  the command as the model wrote it), its `exit_code`, `status` and `aggregated_output`; a
  `parsed_cmd` entry of type `read` names the file it read (`path`, else `name`; relative to
  the command's `cwd`, a `file://` URL);
- `FileChange` (`apply_patch`): `changes` maps each path to `{type: add | update | delete}`:
  an added file is written, an updated one edited.
The todo list is the `update_plan` tool's `plan` (`step`, `status`), a `function_call` response
item whose `arguments` are a JSON string. A `compacted` line is a compaction.

The facts ride on the usage reader (`transcript.py`, `ctxd.agents.digest`), which finds each
line's kind anyway: only lines that can hold one of these are handed over, and they say so in
their first few hundred bytes (`{"timestamp":…,"type":"event_msg","payload":{"type":
"item_completed",…,"item":{"type":"CommandExecution"`); a `compacted` line comes decoded. They
are folded into the book at the end of each feed, those a later line hides mostly undecoded
(`CodexFacts`).
"""

from __future__ import annotations

from typing import Any

import orjson

from ctxd.agents.codex.transcript import CodexReader
from ctxd.agents.digest import Facts, UsageDigestReader, todos_from
from ctxd.agents.lines import decode
from ctxd.core.digest import DigestBook

__all__ = ["CodexDigestReader", "CodexFacts"]

_ITEM_TYPE = b'"item":{"type":"'
_TOOLS = (b'CommandExecution"', b'FileChange"')
_USER = b'UserMessage"'
_AGENT = b'AgentMessage"'
_COMMAND = ord("C")  # a tool item's kind by its first byte
# A command that succeeded and read no file, known from its bytes (quotes inside strings are
# escaped, so these are keys and values of the item itself).
_EXIT_CODE = b'"exit_code":'
_ZERO = (b"0,", b"0}")
_READ = b'"type":"read"'
_STATUS = b'"status":"'
_FAILED = (b'failed"', b'declined"')
_HEAD = 400


class CodexDigestReader(UsageDigestReader):
    """A Codex CLI rollout's digest (a `CodexReader` carrying `CodexFacts`)."""

    __slots__ = ()

    def __init__(self) -> None:
        super().__init__(CodexReader(CodexFacts()))


class CodexFacts(Facts):
    """The digest side of a `CodexReader`; see the module docstring.

    The reader appends the lines that may hold a fact to `items` and `plans`; `flush` (at the
    end of each `feed`) folds them in, in order, straight into the book. Those a later line of
    the same feed makes invisible are not decoded, or only as far as what they still change:
    all replies but the last, the requests between the session's first and its last
    `Limits.asks`, all todo lists but the last (only counted), and a command that succeeded
    when `Limits.commands` more follow (only counted, and the files it read touched). A replay
    of a long rollout is mostly such lines.
    """

    __slots__ = ("items", "plans")

    def __init__(self) -> None:
        super().__init__()
        #: `item_completed` event lines not folded in yet (appended by the reader).
        self.items: list[bytes] = []
        #: `function_call` lines naming `update_plan` in their head, not folded in yet.
        self.plans: list[bytes] = []

    def reset(self) -> None:
        super().reset()
        self.items = []
        self.plans = []

    def flush(self) -> None:
        """Fold in the lines taken since the last flush (see the class docstring)."""
        if self.plans:
            plans, self.plans = self.plans, []
            self._fold_plans(plans)
        if self.items:
            items, self.items = self.items, []
            self._fold_items(items)

    def take_compacted(self, record: dict[str, Any]) -> None:
        self.book.compaction()

    def _fold_plans(self, lines: list[bytes]) -> None:
        # Each list replaces the one before: only the last is read, the others counted.
        book = self.book
        last: list[Any] | None = None
        for line in reversed(lines):
            plan = _plan(line)
            if plan is None:
                continue
            if last is None:
                last = plan
            else:
                book.tool()
        if last is not None:
            book.todos(todos_from(last, ("step",)))

    def _fold_items(self, lines: list[bytes]) -> None:
        # Requests, replies and tool calls change apart parts of the book: each kind is
        # folded in on its own, in order.
        asks: list[bytes] = []
        replies: list[bytes] = []
        tools: list[tuple[int, int, bytes]] = []  # (kind's first byte, item's offset, line)
        for line in lines:
            at = line.find(_ITEM_TYPE, 0, _HEAD) + len(_ITEM_TYPE)
            if at < len(_ITEM_TYPE):
                continue
            if line.startswith(_TOOLS, at):
                tools.append((line[at], at, line))
            elif line.startswith(_USER, at):
                asks.append(line)
            elif line.startswith(_AGENT, at):
                replies.append(line)
        if tools:
            self._fold_tools(tools)
        if asks:
            self.fold_requests(asks, _requests_of)
        if replies:
            self._fold_reply(replies)

    def _fold_tools(self, tools: list[tuple[int, int, bytes]]) -> None:
        # Backwards first, to know which commands `Limits.commands` later ones push out of the
        # book: only a command that decodes is sure to push one out, and one known from its
        # bytes to have succeeded reading no file is not decoded.
        # (the item, or None for a command only counted; whether it is pushed out), reversed
        items: list[tuple[dict[str, Any] | None, bool]] = []
        later = 0
        limit = self.limits.commands
        for kind, at, line in reversed(tools):
            hidden = kind == _COMMAND and later >= limit
            if hidden and _succeeded_reading_nothing(line, at):
                items.append((None, True))
                later += 1
                continue
            item = _item_of(line)
            if item is None:
                continue
            if item.get("type") == "CommandExecution":
                later += 1
            items.append((item, hidden))
        book = self.book
        for item, hidden in reversed(items):
            if item is None:
                book.command("")
            else:
                self._fold_item(item, hidden)

    def _fold_reply(self, lines: list[bytes]) -> None:
        """The last reply with a text; not the others."""
        for line in reversed(lines):
            item = _item_of(line)
            text = _texts(item) if item is not None and item.get("type") == "AgentMessage" else ""
            if text.strip():
                self.book.reply(text)
                return

    def _fold_item(self, item: dict[str, Any], counted: bool) -> None:
        """One finished tool item; `counted`: a command that only counts when it succeeded."""
        kind = item.get("type")
        if kind == "CommandExecution":
            _command(self.book, item, counted)
        elif kind == "FileChange":
            _file_change(self.book, item)


def _item_of(line: bytes) -> dict[str, Any] | None:
    record = decode(line)
    payload = record.get("payload") if record is not None else None
    item = payload.get("item") if isinstance(payload, dict) else None
    return item if isinstance(item, dict) else None


def _plan(line: bytes) -> list[Any] | None:
    """The `plan` argument of an `update_plan` call ([] when it has none); None: the line is
    no such call, or its arguments are no JSON."""
    payload = (decode(line) or {}).get("payload")
    if not isinstance(payload, dict) or payload.get("type") != "function_call":
        return None
    if payload.get("name") != "update_plan":
        return None
    try:
        args = orjson.loads(payload.get("arguments") or "{}")
    except orjson.JSONDecodeError:
        return None
    plan = args.get("plan") if isinstance(args, dict) else None
    return plan if isinstance(plan, list) else []


def _requests_of(line: bytes) -> list[str]:
    """The request of a `UserMessage` item line (the book leaves out what is no request)."""
    item = _item_of(line)
    return [_texts(item)] if item is not None and item.get("type") == "UserMessage" else []


def _succeeded_reading_nothing(line: bytes, at: int) -> bool:
    """Whether the command item from `at` on surely exited 0, is neither failed nor declined
    and read no file (else it is decoded to tell)."""
    code = line.rfind(_EXIT_CODE, at)
    if code < 0 or not line.startswith(_ZERO, code + len(_EXIT_CODE)):
        return False
    if line.find(_READ, at) >= 0:
        return False
    status = line.find(_STATUS, at)
    while status >= 0:
        status += len(_STATUS)
        if line.startswith(_FAILED, status):
            return False
        status = line.find(_STATUS, status)
    return True


def _texts(item: dict[str, Any]) -> str:
    content = item.get("content")
    parts = content if isinstance(content, list) else ()
    return "\n".join(
        p["text"] for p in parts if isinstance(p, dict) and isinstance(p.get("text"), str)
    )


def _file_change(book: DigestBook, item: dict[str, Any]) -> None:
    changes = item.get("changes")
    for path, change in changes.items() if isinstance(changes, dict) else ():
        how = change.get("type") if isinstance(change, dict) else None
        if how == "add":
            book.touch(str(path), "write")
        elif how in ("update", "delete"):
            book.touch(str(path), "edit")
    if item.get("status") not in (None, "completed"):
        reason = _first_line(str(item.get("stderr") or item.get("stdout") or ""))
        book.result(None, True, None, f"apply_patch: {reason}")


def _command(book: DigestBook, item: dict[str, Any], counted: bool) -> None:
    """A command: the files it read, then the command and its outcome; only counted (the
    book's entry for it is pushed out by the commands that follow) when `counted` and it
    succeeded."""
    parsed = item.get("parsed_cmd")
    steps = parsed if isinstance(parsed, list) else ()
    base: str | None = None  # the command's directory, once a step read a file
    for p in steps:
        if isinstance(p, dict) and p.get("type") == "read":
            path = p.get("path") or p.get("name")
            if path:
                if base is None:
                    cwd = item.get("cwd")
                    base = cwd.removeprefix("file://") if isinstance(cwd, str) else ""
                book.touch(_joined(base, str(path)), "read")
    code = item.get("exit_code")
    exit_code = code if type(code) is int else None
    failed = (exit_code is not None and exit_code != 0) or item.get("status") in (
        "failed",
        "declined",
    )
    if counted and not failed:
        book.command("")
        return
    call_id = item.get("id") if isinstance(item.get("id"), str) else None
    written = " && ".join(
        str(p["cmd"]) for p in steps if isinstance(p, dict) and isinstance(p.get("cmd"), str)
    )
    argv = item.get("command")
    if not written and isinstance(argv, list) and argv:
        written = str(argv[-1])
    reason = _last_line(str(item.get("aggregated_output") or "")) if failed else ""
    book.ran(written, call_id, failed, exit_code, reason)


def _joined(base: str, path: str) -> str:
    """`posixpath.join(base, path)`, without its generality (called for every file read)."""
    if path.startswith("/"):
        return path
    if not base or base.endswith("/"):
        return base + path
    return f"{base}/{path}"


def _first_line(text: str) -> str:
    return next((line.strip() for line in text.splitlines() if line.strip()), "")


def _last_line(text: str) -> str:
    """The last line of `text` that is not blank, stripped (a failing command says why at the
    end of what it printed); `text` can be long, and only its end is split."""
    text = text.rstrip()  # every line separator is whitespace too
    lines = text[text.rfind("\n") + 1 :].splitlines()
    return lines[-1].strip() if lines else ""
