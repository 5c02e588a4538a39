"""Claude Code transcripts -> the facts of a session digest (`ctxd.core.digest`).

What a Claude Code transcript says, line by line (1.0.51 to 2.1.332):
- a `"type":"user"` line whose `message.content` is a string (or holds `text` blocks) is a
  request the user typed, unless it is meta (`isMeta`), a compaction summary
  (`isCompactSummary`), a background task's notification (`origin.kind: task-notification`,
  and its `<task-notification>` text), or what is left once the blocks the harness adds in its
  own tags (`<system-reminder>`, a local command's `<command-name>` echo and
  `<local-command-stdout>`, `!` shell mode's `<bash-input>`/`<bash-stdout>`, the IDE's
  `<ide_opened_file>`, …) are taken out is empty;
- a `"type":"assistant"` line holds one content block: `text` (what the assistant said) or a
  `tool_use` with its `input`: Read/Edit/MultiEdit/Write/NotebookEdit name the file
  (`file_path`, `notebook_path`), Bash the `command`, TodoWrite the whole `todos` list
  (`content`, `status`), TaskCreate/TaskUpdate one item (`subject`; `taskId`, `status`),
  Task/Agent a subagent (`description`);
- a user line with `tool_result` blocks answers tool calls by `tool_use_id`; `is_error: true`
  marks a failure, and a failed Bash's content starts with `Exit code N` (a later run of the
  same command that succeeds marks it fixed). A TaskCreate's result (`toolUseResult.task.id`)
  gives the id later TaskUpdates name;
- a `system` line with `subtype: compact_boundary` is a compaction.

`ClaudeFacts` is the `FactListener` of the usage reader (`transcript.py`), which decodes each
line once for both (but those its first bytes show to hold nothing) and hands over the records
of its own chain: a subagent's sidechain lines in a session's transcript are its own
transcript's (and digest's), not the session's. Facts are
folded into the digest book directly, as each record comes. Requests and the assistant's texts
wait for the end of the feed (`flush`): only the newest `Limits.asks` requests (and the
session's first) and the newest text that is not blank can show, and only they are clipped.
A streamed message can be written more than once: a tool call already folded in is known by
the recent call ids the facts keep (`RecentCalls`, as the reader keeps its own).
"""

from __future__ import annotations

import re
from typing import Any

from ctxd.agents.claude.transcript import RecentCalls
from ctxd.agents.digest import Facts, first_line, text_of, todo_status, todos_from
from ctxd.core.digest import without_injected

__all__ = ["ClaudeFacts"]

_EXIT = re.compile(r"^Exit code (\d+)")
#: The tags Claude Code wraps what it adds to a user message in (read from its 2.1.332 bundle
#: and seen in real transcripts): never what the user typed.
_INJECTED = frozenset(
    {
        "system-reminder",
        "task-notification",
        "command-name",
        "command-message",
        "command-args",
        "command-contents",
        "local-command-stdout",
        "local-command-stderr",
        "local-command-caveat",
        "bash-input",
        "bash-stdout",
        "bash-stderr",
        "bash-exit-code",
        "user-prompt-submit-hook",
        "ide_opened_file",
        "ide_selection",
        "ide_diagnostics",
        "teammate-message",
        "cross-session-message",
        "persisted-output",
        "tick",
    }
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


class ClaudeFacts(Facts):
    """The session digest of a Claude Code transcript, told its records by a `ClaudeReader`;
    see the module docstring."""

    __slots__ = ("_asks", "_calls", "_replies")

    mark_fixed = True

    def __init__(self) -> None:
        super().__init__()
        #: The tool calls folded in lately (a streamed copy of one is not folded again).
        self._calls = RecentCalls()
        #: The requests of the current feed, folded by `flush`.
        self._asks: list[str] = []
        #: The assistant's texts of the current feed, of which `flush` folds the newest.
        self._replies: list[str] = []

    def reset(self) -> None:
        super().reset()
        self._calls.clear()
        self._asks.clear()
        self._replies.clear()

    def take(self, record: dict[str, Any]) -> None:
        kind = record.get("type")
        if kind == "user":
            self._user(record)
        elif kind == "assistant":
            self._assistant(record)
        elif kind == "system" and record.get("subtype") == "compact_boundary":
            self.book.compaction()

    def flush(self) -> None:
        """Fold in the requests and replies taken since the last flush: only the newest
        `Limits.asks` requests (and the session's first) and the newest reply can show in the
        digest, so only those are clipped."""
        if self._asks:
            asks, self._asks = self._asks, []
            self.fold_requests(asks, _one)
        if self._replies:
            replies, self._replies = self._replies, []
            self.fold_reply(replies)

    def _assistant(self, record: dict[str, Any]) -> None:
        message = record.get("message")
        if not isinstance(message, dict) or record.get("isApiErrorMessage"):
            return
        content = message.get("content")
        if not isinstance(content, list):
            return
        turn = message.get("id")
        for block in content:
            if not isinstance(block, dict):
                continue
            kind = block.get("type")
            if kind == "tool_use":
                call_id = block.get("id")
                if not isinstance(call_id, str):
                    self._tool_use(block, None)
                elif call_id not in self._calls:  # else a streamed copy already folded in
                    self._calls.add(turn, call_id)
                    self._tool_use(block, call_id)
            elif kind == "text":
                text = block.get("text")
                if isinstance(text, str):
                    self._replies.append(text)

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
        if not isinstance(message, dict) or record.get("isMeta") or record.get("isCompactSummary"):
            return
        content = message.get("content")
        if isinstance(content, str):
            ask = _ask(content)
            if ask and not _notification(record):
                self._asks.append(ask)
            return
        if not isinstance(content, list):
            return
        for block in content:
            if not isinstance(block, dict):
                continue
            kind = block.get("type")
            if kind == "tool_result":
                call_id = block.get("tool_use_id")
                if isinstance(call_id, str):
                    self._result(call_id, block, record)
            elif kind == "text":
                text = block.get("text")
                ask = _ask(text) if isinstance(text, str) else ""
                if ask and not _notification(record):
                    self._asks.append(ask)

    def _result(self, call_id: str, block: dict[str, Any], record: dict[str, Any]) -> None:
        call = self.pending.pop(call_id, None)
        if call is None:
            return  # a call never seen, or a result already folded in
        tool, about = call
        if block.get("is_error"):
            self._failed(call_id, tool, about, text_of(block.get("content")))
        elif tool == "Bash":
            self.book.result(call_id, False, 0)
        elif tool == "TaskCreate" and about:
            self.book.todo(about, "pending", _task_key(record))
        # any other tool's outcome is kept only when it failed

    def _failed(self, call_id: str, tool: str, about: str, text: str) -> None:
        """Call `call_id` of `tool` (on `about`) failed, saying `text`."""
        found = _EXIT.match(text)
        exit_code = int(found.group(1)) if found and tool == "Bash" else None
        if found:
            text = text[found.end() :]  # the line after it says what went wrong
        if tool != "Bash":
            where = f" {about}" if about else ""
            text = f"{tool}{where}: {first_line(text)}"
        self.book.result(call_id, True, exit_code, text)


def _one(text: str) -> list[str]:
    return [text]


def _task_key(record: dict[str, Any]) -> str | None:
    """A TaskCreate result's item id (`toolUseResult.task.id`)."""
    task = record.get("toolUseResult")
    task = task.get("task") if isinstance(task, dict) else None
    key = task.get("id") if isinstance(task, dict) else None
    return str(key) if isinstance(key, str | int) else None


def _ask(text: str) -> str:
    """What the user typed in a user message's `text`: "" when nothing (all of it added by the
    harness, or the interruption mark)."""
    typed = without_injected(text, _INJECTED)
    return "" if typed.startswith("[Request interrupted") else typed


def _notification(record: dict[str, Any]) -> bool:
    """A user message that a background task's notification made (2.1.332 says so in
    `origin`, beside the `<task-notification>` text)."""
    origin = record.get("origin")
    return isinstance(origin, dict) and origin.get("kind") == "task-notification"
