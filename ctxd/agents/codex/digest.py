"""Codex CLI rollouts -> digest events (`ctxd.core.digest`).

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
"item_completed",…,"item":{"type":"CommandExecution"`); a `compacted` line comes decoded.
"""

from __future__ import annotations

import posixpath
from typing import Any

import orjson

from ctxd.agents.codex.transcript import CodexReader
from ctxd.agents.digest import Facts, UsageDigestReader, todos_from
from ctxd.agents.lines import decode
from ctxd.core.digest import DigestBook, is_request

__all__ = ["CodexDigestReader", "CodexFacts"]

_ITEM_TYPE = b'"item":{"type":"'
_ITEMS = (b'UserMessage"', b'AgentMessage"', b'CommandExecution"', b'FileChange"')
# An item's kind by its first byte.
_USER, _AGENT, _COMMAND = ord("U"), ord("A"), ord("C")
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

    __slots__ = ("_asked", "items", "plans")

    def __init__(self) -> None:
        super().__init__()
        #: `item_completed` event lines not folded in yet (appended by the reader).
        self.items: list[bytes] = []
        #: `function_call` lines naming `update_plan` in their head, not folded in yet.
        self.plans: list[bytes] = []
        self._asked = False  # the book holds the session's first request

    def reset(self) -> None:
        super().reset()
        self.items = []
        self.plans = []
        self._asked = False

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
        batch: list[tuple[int, int, bytes]] = []  # (kind's first byte, the item's offset, line)
        for line in lines:
            at = line.find(_ITEM_TYPE, 0, _HEAD)
            if at >= 0 and line.startswith(_ITEMS, at + len(_ITEM_TYPE)):
                batch.append((line[at + len(_ITEM_TYPE)], at, line))
        known: dict[int, dict[str, Any] | None] = {}  # items decoded ahead
        skipped = self._hidden_replies(batch, known) | self._hidden_asks(batch, known)
        plain, counted = self._hidden_commands(batch, known)
        book = self.book
        for i, (_, _, line) in enumerate(batch):
            if i in skipped:
                continue
            if i in plain:
                book.command("")  # pushed out of the book by the commands that follow
                continue
            item = known[i] if i in known else _item_of(line)
            if item is not None:
                self._fold_item(item, i in counted)

    def _hidden_commands(
        self, batch: list[tuple[int, int, bytes]], known: dict[int, dict[str, Any] | None]
    ) -> tuple[set[int], set[int]]:
        """The commands `Limits.commands` later ones push out of the book: those known from
        their bytes to have succeeded reading no file (not decoded), and the others (decoded
        ahead: only a command that decodes is sure to push one out)."""
        plain: set[int] = set()
        counted: set[int] = set()
        later = 0  # commands after this one sure to be folded in
        for i in range(len(batch) - 1, -1, -1):
            kind, at, line = batch[i]
            if kind != _COMMAND:
                continue
            hidden = later >= self.limits.commands
            if hidden and _succeeded_reading_nothing(line, at):
                plain.add(i)
                later += 1
                continue
            item = known[i] = _item_of(line)
            if item is not None and item.get("type") == "CommandExecution":
                later += 1
                if hidden:
                    counted.add(i)
        return plain, counted

    def _hidden_replies(
        self, batch: list[tuple[int, int, bytes]], known: dict[int, dict[str, Any] | None]
    ) -> set[int]:
        """The replies before the batch's last one with a text."""
        replies = [i for i, (kind, _, _) in enumerate(batch) if kind == _AGENT]
        for n in range(len(replies) - 1, -1, -1):
            i = replies[n]
            item = known[i] = _item_of(batch[i][2])
            if item is not None and item.get("type") == "AgentMessage" and _texts(item).strip():
                return set(replies[:n])
        return set()

    def _hidden_asks(
        self, batch: list[tuple[int, int, bytes]], known: dict[int, dict[str, Any] | None]
    ) -> set[int]:
        """The asks that are neither the session's first request nor one of its last
        `Limits.asks`."""
        asks = [i for i, (kind, _, _) in enumerate(batch) if kind == _USER]
        lim = self.limits.asks
        if len(asks) <= lim + 1:
            return set()
        kept: set[int] = set()
        for i in () if self._asked else asks:
            known[i] = _item_of(batch[i][2])
            if _is_ask(known[i]):
                kept.add(i)
                break
        found = 0
        for i in reversed(asks):
            if found == lim:
                break
            if i not in known:
                known[i] = _item_of(batch[i][2])
            if _is_ask(known[i]):
                kept.add(i)
                found += 1
        return {i for i in asks if i not in kept}

    def _fold_item(self, item: dict[str, Any], counted: bool) -> None:
        """One finished item; `counted`: a command that only counts when it succeeded."""
        kind = item.get("type")
        if kind == "UserMessage":
            text = _texts(item)
            if is_request(text):
                self._asked = True
            self.book.ask(text)
        elif kind == "AgentMessage":
            self.book.reply(_texts(item))
        elif kind == "CommandExecution":
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


def _is_ask(item: dict[str, Any] | None) -> bool:
    return item is not None and item.get("type") == "UserMessage" and is_request(_texts(item))


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
    steps = [p for p in parsed if isinstance(p, dict)] if isinstance(parsed, list) else []
    if steps:
        cwd = item.get("cwd")
        base = cwd.removeprefix("file://") if isinstance(cwd, str) else ""
        for p in steps:
            if p.get("type") == "read":
                path = p.get("path") or p.get("name")
                if path:
                    book.touch(posixpath.join(base, str(path)), "read")
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
    written = " && ".join(str(p["cmd"]) for p in steps if isinstance(p.get("cmd"), str))
    argv = item.get("command")
    if not written and isinstance(argv, list) and argv:
        written = str(argv[-1])
    reason = _last_line(str(item.get("aggregated_output") or "")) if failed else ""
    book.command(written, call_id)
    book.result(call_id, failed, exit_code, reason)


def _first_line(text: str) -> str:
    return next((line.strip() for line in text.splitlines() if line.strip()), "")


def _last_line(text: str) -> str:
    # a failing command says why at the end of what it printed
    return next((line.strip() for line in reversed(text.splitlines()) if line.strip()), "")
