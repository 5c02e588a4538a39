"""Claude Code transcripts -> the facts of a session digest (`ctxd.core.digest`).

What a Claude Code transcript says, line by line (1.0.51 to 2.1.332):
- a `"type":"user"` line whose `message.content` is a string (or holds `text` blocks) is a
  request the user typed, unless it is meta (`isMeta`), a compaction summary
  (`isCompactSummary`) or a local command's echo (`<command-name>`, `<local-command-…>`);
- a `"type":"assistant"` line holds one content block: `text` (what the assistant said) or a
  `tool_use` with its `input`: Read/Edit/MultiEdit/Write/NotebookEdit name the file
  (`file_path`, `notebook_path`), Bash the `command`, TodoWrite the whole `todos` list
  (`content`, `status`), TaskCreate/TaskUpdate one item (`subject`; `taskId`, `status`),
  Task/Agent a subagent (`description`);
- a user line with `tool_result` blocks answers tool calls by `tool_use_id`; `is_error: true`
  marks a failure, and a failed Bash's content starts with `Exit code N`. A TaskCreate's
  result (`toolUseResult.task.id`) gives the id later TaskUpdates name;
- a `system` line with `subtype: compact_boundary` is a compaction.

The facts ride on the usage reader (`transcript.py`, `ctxd.agents.digest`), which judges every
line from its head first (`transcript.judge_head`: the line's kind is in its first few hundred
bytes). Attachment, progress and other system lines hold no fact and no usage; user lines are
handed over from there (`take_user`). Assistant and compaction lines carry usage: the reader
decodes them for it and hands over an assistant message's content (`take_assistant`, which
returns the tool calls it folded in for the reader to remember) and any other record decoded
(`take_record`); the few lines whose head does not tell go to `take_unjudged`, which searches
the head. Tool results can be large (a file read whole), and Claude Code writes one result a
line. A successful one is known from its head and never decoded: it is written with its
`tool_use_id` first (`"content":[{"tool_use_id":…,"type":"tool_result",…`), or, when it holds
blocks, with its type first (`"content":[{"type":"tool_result","tool_use_id":…`) and no
`"is_error":true` nor text block anywhere in the line; a TaskCreate's item id is then read after
its `"toolUseResult":{"task":{"id":"` (when a plain string). A failed result
(`{"type":"tool_result","content":…,"is_error":true,"tool_use_id":…}`) and anything else is
decoded. Requests wait for the end of the feed (`flush`), where only the newest `Limits.asks`
and the session's first are read: a user line whose `message.content` is a string (a typed
request, unless it is a summary, meta or a local command's echo) has that string decoded alone,
and only then. The assistant's texts wait for it too: only the newest that is not blank
becomes the last reply, and only it is clipped. Sidechain lines belong
to subagents, which have their own transcripts (and their own digest); they are skipped in a
session's transcript. A tool call already folded in (a streamed message written twice) is known
by the usage reader's recent tool call ids, which the facts share. Facts are folded into the
digest book directly (no `DigestEvent`s): a replay folds one per tool call.
"""

from __future__ import annotations

import re
from collections.abc import Container
from typing import Any

import orjson

from ctxd.agents.claude.transcript import ClaudeReader
from ctxd.agents.digest import Facts, UsageDigestReader, todo_status, todos_from
from ctxd.agents.lines import decode

__all__ = ["ClaudeDigestReader", "ClaudeFacts"]

_OTHER = b'{"type":'
_USER = b'"type":"user"'
_ASSISTANT = b'"role":"assistant"'
_BOUNDARY = b'"subtype":"compact_boundary"'
_SIDECHAIN = b'"isSidechain":true'
_USER_CONTENT = b'user","message":{"role":"user","content":'
_USER_CONTENT_END = len(_USER_CONTENT)
_ID_FIRST_LIST = b'[{"tool_use_id":"'
_ID_FIRST_LIST_END = len(_ID_FIRST_LIST)
_TYPE_FIRST_LIST = b'[{"type":"tool_result",'
_TEXT_FIRST_LIST = b'[{"type":"text",'
#: A tool result's type, found only as a key's value (quotes inside a string are escaped).
_RESULT_VALUE = b'"tool_result"'
_STRING_CONTENT = b'"content":"'
_FAILED_ID = b',"is_error":true,"tool_use_id":"'
_ONE_BLOCK_END = b'"}]'
_RESULT_HEAD = b'"content":[{"'
_ID_FIRST = b'tool_use_id":"'
_RESULT_TYPE = b'","type":"tool_result"'
_RESULT_FIRST = b'type":"tool_result",'
_ID_KEY = b'"tool_use_id":"'
_ERROR_FLAG = b'"is_error":true'
_TEXT_BLOCK = b'"type":"text"'
_TASK_ID = b'"toolUseResult":{"task":{"id":"'
_SUMMARY_FLAG = b'"isCompactSummary":true'
_META_FLAG = b'"isMeta":true'
_BACKSLASH = ord("\\")
_EXIT = re.compile(r"^Exit code (\d+)")
_SKIPPED_ASKS = ("<command-name>", "<local-command-", "<command-message>", "<system-reminder>")
# A user line whose text starts with one of them, known from its head.
_ECHO = re.compile(
    rb'"role":"user","content":"(?:%s)' % b"|".join(re.escape(a.encode()) for a in _SKIPPED_ASKS)
)
#: The tools that name a file, and what they do with it.
_FILE_USES = {
    "Read": "read",
    "Edit": "edit",
    "MultiEdit": "edit",
    "NotebookEdit": "edit",
    "Write": "write",
}
_SUBAGENT = frozenset({"Task", "Agent"})
# A user line's text that starts with one of them, known from its head: a string's first bytes.
_ECHO_TEXTS = tuple(b'"' + ask.encode() for ask in _SKIPPED_ASKS)
#: How many bytes of a line's head `take_unjudged` searches.
_WINDOW = 400


class ClaudeDigestReader(UsageDigestReader):
    """A Claude Code transcript's digest (a `ClaudeReader` carrying `ClaudeFacts`)."""

    __slots__ = ()

    def __init__(self, subagent: bool = False) -> None:
        super().__init__(ClaudeReader(subagent, ClaudeFacts(subagent)))


class ClaudeFacts(Facts):
    """The digest side of a `ClaudeReader`; see the module docstring."""

    __slots__ = ("_asks", "_keep_sidechain", "_replies", "calls_seen")

    def __init__(self, subagent: bool = False) -> None:
        super().__init__()
        self._keep_sidechain = subagent
        #: The reader's recent tool call ids (a call among them was folded in already).
        self.calls_seen: Container[str] = ()
        #: Requests of the current feed, folded by `flush`: a user line and where its string
        #: content starts (not decoded yet), or the text.
        self._asks: list[tuple[bytes, int] | str] = []
        #: The assistant's texts of the current feed, of which `flush` folds the newest.
        self._replies: list[str] = []

    def reset(self) -> None:
        super().reset()
        self._asks.clear()
        self._replies.clear()

    def flush(self) -> None:
        """Fold in the requests and replies taken since the last flush: only the newest
        `Limits.asks` requests (and the session's first) and the newest reply can show in the
        digest, so only those are decoded or clipped."""
        if self._asks:
            asks, self._asks = self._asks, []
            self.fold_requests(asks, self._requests_of)
        if self._replies:
            # Only the newest reply shows: the others are never clipped.
            replies, self._replies = self._replies, []
            for text in reversed(replies):
                if text.strip():
                    self.book.reply(text)
                    break

    def _requests_of(self, item: tuple[bytes, int] | str) -> list[str]:
        if isinstance(item, str):
            return [item]
        return self._request_texts(*item)

    def take_user(self, line: bytes, kind: int) -> None:
        """A user line, whose own `"type"` value starts at `kind` (`judge_head`): taken if it
        may hold a fact."""
        if not line.startswith(_USER_CONTENT, kind):
            self._take(line)
            return
        at = kind + _USER_CONTENT_END  # where `message.content` starts
        if line.startswith(_ID_FIRST_LIST, at):
            # The commonest line of all, a tool's result: `_took_id_first`, one call less.
            at += _ID_FIRST_LIST_END
            end = line.find(b'"', at)
            if not line.startswith(_RESULT_TYPE, end) or not self._took_success(line, at, end):
                self._take(line)
        elif line.startswith(_TYPE_FIRST_LIST, at):
            at += len(_TYPE_FIRST_LIST)
            if not self._took_type_first(line, at) and not self._took_failure(line, at):
                self._decoded(line)  # a result holding text, or not known: never a summary
        elif line.startswith(b'"', at):
            if not line.startswith(_ECHO_TEXTS, at):
                self._take_text(line, at)
        elif line.startswith(_TEXT_FIRST_LIST, at) and _RESULT_VALUE not in line:
            self._asks.append((line, -1))  # text blocks: requests, decoded by `flush` if shown
        else:
            self._take(line)

    def take_unjudged(self, line: bytes) -> None:
        """A line `judge_head` could not judge and that carries no usage: taken if a search of
        its head finds a user, assistant or compaction line."""
        if not line.startswith(_OTHER):
            self._take_searched(line)

    def _take_text(self, line: bytes, at: int) -> None:
        """A user line whose `message.content` is the string starting at `at`: a request,
        unless the line is a summary or meta; read by `flush` if it can show."""
        self._asks.append((line, at))

    def _request_texts(self, line: bytes, at: int) -> list[str]:
        """The requests of a user line taken for them: its content's string (starting at `at`,
        decoded alone), or its text blocks (`at` < 0: the line decoded)."""
        if at < 0:
            record = decode(line)
            return [] if record is None else self._user_asks(record)
        if _SUMMARY_FLAG in line or _META_FLAG in line:
            return []
        end = _string_end(line, at)
        try:
            text = orjson.loads(line[at:end]) if end > 0 else None
        except orjson.JSONDecodeError:
            text = None
        if not isinstance(text, str):  # not a string seen rightly: read as the decoder reads it
            record = decode(line)
            return [] if record is None else self._user_asks(record)
        return [text] if _is_ask(text) else []

    def _take_searched(self, line: bytes) -> None:
        find = line.find
        limit = min(len(line), _WINDOW)
        if not self._keep_sidechain and find(_SIDECHAIN, 0, limit) >= 0:
            return
        if (
            find(_USER, 0, limit) >= 0
            or find(_ASSISTANT, 0, limit) >= 0
            or find(_BOUNDARY, 0, limit) >= 0
        ):
            self._take(line)

    def _take(self, line: bytes) -> None:
        at = line.find(_RESULT_HEAD, 0, _WINDOW)
        if at >= 0:
            at += len(_RESULT_HEAD)
            if line.startswith(_ID_FIRST, at):
                if self._took_id_first(line, at + len(_ID_FIRST)):
                    return
            elif line.startswith(_RESULT_FIRST, at):
                if not self._took_type_first(line, at + len(_RESULT_FIRST)):
                    self._decoded(line)  # a failure, or a result holding text: never a summary
                return
        if _SUMMARY_FLAG in line or _META_FLAG in line or _ECHO.search(line, 0, _WINDOW):
            return  # a compaction's summary, text Claude Code added, a local command's echo
        self._decoded(line)

    def _decoded(self, line: bytes) -> None:
        record = decode(line)
        if record is not None:
            self.take_record(record, line)

    def _took_id_first(self, line: bytes, at: int) -> bool:
        """Whether `line`, a result whose `tool_use_id` value starts at `at`, is a success
        (`…","type":"tool_result"`): then taken, and never decoded."""
        end = line.find(b'"', at)
        if not line.startswith(_RESULT_TYPE, end):
            return False
        return self._took_success(line, at, end)

    def _took_type_first(self, line: bytes, at: int) -> bool:
        """Whether `line`, a result written type first (`…"type":"tool_result",` ends at
        `at`), is a success holding no text: then taken, and never decoded."""
        if not line.startswith(_ID_KEY, at) or _ERROR_FLAG in line or _TEXT_BLOCK in line:
            return False
        at += len(_ID_KEY)
        end = line.find(b'"', at)
        return end >= 0 and self._took_success(line, at, end)

    def _took_failure(self, line: bytes, at: int) -> bool:
        """Whether `line`, a result written type first (`…"type":"tool_result",` ends at
        `at`), is a failure whose content is a string, the line's one block
        (`"content":"…","is_error":true,"tool_use_id":"…"}]`): then taken, only that string
        decoded (not the line, which repeats the output in its `toolUseResult`)."""
        if not line.startswith(_STRING_CONTENT, at):
            return False
        at += len(_STRING_CONTENT) - 1  # the string's opening quote
        # `,"` cannot occur inside a JSON string (its quotes are escaped): the first
        # `,"is_error":true,…` ends the string, if the line is what it seems.
        end = line.find(_FAILED_ID, at)
        if end < 0:
            return False
        id_at = end + len(_FAILED_ID)
        id_end = line.find(b'"', id_at)
        if not line.startswith(_ONE_BLOCK_END, id_end):
            return False
        call_id = line[id_at:id_end].decode("utf-8", "replace")
        try:
            text = orjson.loads(line[at:end])
        except orjson.JSONDecodeError:
            return False
        if not isinstance(text, str) or "\\" in call_id:
            return False
        call = self.pending.pop(call_id, None)
        if call is not None:
            self._failed(call_id, *call, text)
        return True

    def _took_success(self, line: bytes, at: int, end: int) -> bool:
        # The call's id is `line[at:end]`.
        call_id = line[at:end].decode("utf-8", "replace")
        if "\\" in call_id:
            return False  # an escape in the id: decoded, to read it right
        call = self.pending.pop(call_id, None)  # None: a call never seen, or folded in already
        if call is not None:
            tool, about = call
            if tool == "Bash":
                self.book.result(call_id, False, 0)
            elif tool == "TaskCreate" and about:
                self.book.todo(about, "pending", _task_key(line, end))
            # any other tool's outcome is kept only when it failed
        return True

    def take_record(self, record: dict[str, Any], line: bytes) -> None:
        """A line's record, decoded (by the usage reader, or here)."""
        if record.get("isSidechain") and not self._keep_sidechain:
            return
        kind = record.get("type")
        if kind == "assistant":
            self._assistant(record)
        elif kind == "user":
            self._user(record)
        elif kind == "system" and record.get("subtype") == "compact_boundary":
            self.book.compaction()

    def _assistant(self, record: dict[str, Any]) -> None:
        message = record.get("message")
        if isinstance(message, dict) and not record.get("isApiErrorMessage"):
            self.take_assistant(message.get("content"))

    def take_assistant(self, content: object) -> list[str] | None:
        """An assistant message's `content`, from a main-chain line that is no API error: its
        text and its tool calls folded in, but for calls in `calls_seen`. Returns the ids of
        the calls folded in (None: none), for the usage reader to remember."""
        if not isinstance(content, list):
            return None
        folded: list[str] | None = None
        for block in content:
            if not isinstance(block, dict):
                continue
            kind = block.get("type")
            if kind == "tool_use":
                call_id = block.get("id")
                if not isinstance(call_id, str):
                    self._tool_use(block, None)
                elif call_id not in self.calls_seen:  # else a streamed copy already folded in
                    self._tool_use(block, call_id)
                    if folded is None:
                        folded = [call_id]
                    else:
                        folded.append(call_id)
            elif kind == "text":
                text = block.get("text")
                if isinstance(text, str):
                    self._replies.append(text)
        return folded

    def _tool_use(self, block: dict[str, Any], call_id: str | None) -> None:
        # One per tool call of a replay: Bash first, reading only what it needs.
        name = block.get("name")
        if not isinstance(name, str):
            name = str(name or "")
        data = block.get("input")
        args: dict[str, Any] = data if isinstance(data, dict) else {}
        book = self.book
        if name == "Bash":
            if call_id:
                self.pending.add(call_id, name, "")  # a command's failure names no subject
            book.command(str(args.get("command") or ""), call_id)
            return
        path = args.get("file_path") or args.get("notebook_path")
        path = path if isinstance(path, str) else ""
        if call_id:
            self.pending.add(call_id, name, path or str(args.get("subject") or ""))
        use = _FILE_USES.get(name)
        if use is not None:
            book.touch(path, use)
        elif name == "TodoWrite":
            book.todos(todos_from(args.get("todos"), ("content",)))
        elif name == "TaskUpdate":
            self._task_updated(args)
        elif name in _SUBAGENT:
            about = args.get("description") or args.get("subagent_type") or args.get("prompt")
            book.subagent(str(about or ""))
        elif name != "TaskCreate":  # which is folded in with its result, giving the item's id
            book.tool()

    def _task_updated(self, args: dict[str, Any]) -> None:
        key = args.get("taskId")
        if not isinstance(key, str | int):
            self.book.tool()
            return
        subject = args.get("subject")
        status = todo_status(args.get("status"))
        self.book.todo(subject if isinstance(subject, str) else "", status, str(key))

    def _user(self, record: dict[str, Any]) -> None:
        message = record.get("message")
        if not isinstance(message, dict):
            return
        if record.get("isMeta") or record.get("isCompactSummary"):
            return
        content = message.get("content")
        if isinstance(content, str):
            if _is_ask(content):
                self._asks.append(content)
            return
        for block in content if isinstance(content, list) else ():
            if not isinstance(block, dict):
                continue
            kind = block.get("type")
            if kind == "text" and isinstance(block.get("text"), str) and _is_ask(block["text"]):
                self._asks.append(block["text"])
            elif kind == "tool_result" and isinstance(block.get("tool_use_id"), str):
                self._result(block, record)

    def _user_asks(self, record: dict[str, Any]) -> list[str]:
        """The requests a decoded user record holds (`_user`'s, without its tool results)."""
        message = record.get("message")
        if (
            record.get("type") != "user"
            or not isinstance(message, dict)
            or record.get("isMeta")
            or record.get("isCompactSummary")
            or (record.get("isSidechain") and not self._keep_sidechain)
        ):
            return []
        content = message.get("content")
        if isinstance(content, str):
            return [content] if _is_ask(content) else []
        blocks = content if isinstance(content, list) else []
        return [
            block["text"]
            for block in blocks
            if isinstance(block, dict)
            and block.get("type") == "text"
            and isinstance(block.get("text"), str)
            and _is_ask(block["text"])
        ]

    def _result(self, block: dict[str, Any], record: dict[str, Any]) -> None:
        call_id = block["tool_use_id"]
        call = self.pending.pop(call_id, None)
        if call is None:
            return  # a call never seen, or a result already folded in
        tool, about = call
        if not block.get("is_error"):
            if tool == "TaskCreate":
                if about:
                    self.book.todo(about, "pending", _record_task_key(record))
            else:
                self.book.result(call_id, False, _ok_exit(tool))
            return
        self._failed(call_id, tool, about, _text(block.get("content")))

    def _failed(self, call_id: str, tool: str, about: str, text: str) -> None:
        """Call `call_id` of `tool` (on `about`) failed, saying `text`."""
        found = _EXIT.match(text)
        exit_code = int(found.group(1)) if found and tool == "Bash" else None
        if found:
            text = text[found.end() :]  # the line after it says what went wrong
        if tool != "Bash":
            where = f" {about}" if about else ""
            text = f"{tool}{where}: {_first_line(text)}"
        self.book.result(call_id, True, exit_code, text)


def _string_end(line: bytes, at: int) -> int:
    """Where the JSON string starting at `at` (its opening quote) ends, past its closing
    quote; -1 if it does not."""
    end = at
    while True:
        end = line.find(b'"', end + 1)
        if end < 0:
            return -1
        # A quote ends the string unless it follows an odd run of backslashes.
        escape = end - 1
        while line[escape] == _BACKSLASH:
            escape -= 1
        if (end - escape) % 2:
            return end + 1


def _task_key(line: bytes, start: int) -> str | None:
    """A TaskCreate result's item id (`toolUseResult.task.id`), read from its line (after
    `start`): found by its key when it is a plain string, else from the decoded line."""
    at = line.find(_TASK_ID, start)
    if at >= 0:
        at += len(_TASK_ID)
        end = line.find(b'"', at)
        if end >= 0 and line.find(b"\\", at, end) < 0:
            return line[at:end].decode("utf-8", "replace")
    return _record_task_key(decode(line))


def _record_task_key(record: dict[str, Any] | None) -> str | None:
    task = (record or {}).get("toolUseResult")
    task = task.get("task") if isinstance(task, dict) else None
    key = task.get("id") if isinstance(task, dict) else None
    return str(key) if isinstance(key, str | int) else None


def _ok_exit(tool: str) -> int | None:
    return 0 if tool == "Bash" else None


def _is_ask(text: str) -> bool:
    stripped = text.lstrip()
    if not stripped or stripped.startswith(_SKIPPED_ASKS):
        return False
    return not stripped.startswith("[Request interrupted")


def _text(content: object) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(
            b["text"]
            for b in content
            if isinstance(b, dict) and b.get("type") == "text" and isinstance(b.get("text"), str)
        )
    return ""


def _first_line(text: str) -> str:
    return next((line.strip() for line in text.splitlines() if line.strip()), "")
