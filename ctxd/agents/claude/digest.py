"""Claude Code transcripts -> digest events (`ctxd.core.digest`).

What a Claude Code transcript says, line by line (2.1.197, 2.1.332):
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

Tool results can be large (a file read whole): a result that is not an error is never decoded;
its call ids are taken from the raw line (`"tool_use_id":"…"` with its quotes can only be a key,
since quotes inside JSON strings are escaped). Sidechain lines belong to subagents, which have
their own transcripts (and their own digest); they are skipped in a session's transcript.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

from ctxd.agents.digest import LineDigestReader, todo_status, todos_from
from ctxd.agents.lines import decode
from ctxd.core.digest import DigestEvent, Todo

__all__ = ["ClaudeDigestReader"]

_USER = b'"type":"user"'
_ASSISTANT = b'"type":"assistant"'
_BOUNDARY = b'"subtype":"compact_boundary"'
_RESULT = b'"tool_use_id"'
_ERROR = b'"is_error":true'
_RESULT_ID = re.compile(rb'"tool_use_id":"([^"\\]+)"')
_EXIT = re.compile(r"^Exit code (\d+)")
_SKIPPED_ASKS = ("<command-name>", "<local-command-", "<command-message>", "<system-reminder>")
_READ = frozenset({"Read"})
_EDIT = frozenset({"Edit", "MultiEdit", "NotebookEdit"})
_WRITE = frozenset({"Write"})
_SUBAGENT = frozenset({"Task", "Agent"})
#: Recent tool call ids already folded in (a streamed message may be written twice).
_SEEN_KEPT = 256


class ClaudeDigestReader(LineDigestReader):
    def __init__(self, subagent: bool = False) -> None:
        super().__init__()
        self._keep_sidechain = subagent
        self._seen: dict[str, None] = {}

    def reset(self) -> None:
        super().reset()
        self._seen.clear()

    def on_line(self, line: bytes) -> Iterable[DigestEvent]:
        if _ASSISTANT in line:
            return self._assistant(line)
        if _USER in line:
            if _RESULT in line and _ERROR not in line:
                return self._results_ok(line)
            return self._user(line)
        if _BOUNDARY in line:
            record = decode(line)
            if record is not None and record.get("subtype") == "compact_boundary":
                return (DigestEvent("compaction"),)
        return ()

    def _wanted(self, record: dict[str, Any] | None) -> dict[str, Any] | None:
        if record is None or (record.get("isSidechain") and not self._keep_sidechain):
            return None
        message = record.get("message")
        return message if isinstance(message, dict) else None

    def _assistant(self, line: bytes) -> list[DigestEvent]:
        record = decode(line)
        message = self._wanted(record)
        if message is None or record is None or record.get("type") != "assistant":
            return []
        if record.get("isApiErrorMessage"):
            return []
        out: list[DigestEvent] = []
        content = message.get("content")
        for block in content if isinstance(content, list) else ():
            if not isinstance(block, dict):
                continue
            if block.get("type") == "text" and isinstance(block.get("text"), str):
                out.append(DigestEvent("reply", block["text"]))
            elif block.get("type") == "tool_use":
                out += self._tool_use(block)
        return out

    def _tool_use(self, block: dict[str, Any]) -> list[DigestEvent]:
        call_id = block.get("id")
        if not isinstance(call_id, str):
            call_id = None
        elif call_id in self._seen:
            return []
        else:
            self._seen[call_id] = None
            if len(self._seen) > _SEEN_KEPT:
                del self._seen[next(iter(self._seen))]
        name = str(block.get("name") or "")
        data = block.get("input")
        args: dict[str, Any] = data if isinstance(data, dict) else {}
        path = args.get("file_path") or args.get("notebook_path")
        path = path if isinstance(path, str) else ""
        if call_id:
            self.pending.add(call_id, name, path or str(args.get("subject") or ""))
        if name in _READ:
            return [DigestEvent("read", path)]
        if name in _EDIT:
            return [DigestEvent("edit", path)]
        if name in _WRITE:
            return [DigestEvent("write", path)]
        if name == "Bash":
            return [DigestEvent("command", str(args.get("command") or ""), call_id)]
        if name == "TodoWrite":
            return [DigestEvent("todos", todos=todos_from(args.get("todos"), ("content",)))]
        if name == "TaskUpdate":
            key = args.get("taskId")
            if isinstance(key, str | int):
                subject = args.get("subject")
                todo = Todo(
                    subject if isinstance(subject, str) else "",
                    todo_status(args.get("status")),
                    str(key),
                )
                return [DigestEvent("todo", todos=(todo,))]
            return [DigestEvent("tool", name)]
        if name == "TaskCreate":
            return []  # folded in with its result, which gives the item's id
        if name in _SUBAGENT:
            about = args.get("description") or args.get("subagent_type") or args.get("prompt")
            return [DigestEvent("subagent", str(about or ""))]
        return [DigestEvent("tool", name)]

    def _results_ok(self, line: bytes) -> list[DigestEvent]:
        out: list[DigestEvent] = []
        for match in _RESULT_ID.finditer(line):
            call_id = match.group(1).decode("utf-8", "replace")
            call = self.pending.pop(call_id)
            if call is None:
                continue
            if call[0] == "TaskCreate":
                out += self._task_created(decode(line), call[1])
            else:
                out.append(DigestEvent("result", call_id=call_id, exit_code=_ok_exit(call[0])))
        return out

    def _task_created(self, record: dict[str, Any] | None, subject: str) -> list[DigestEvent]:
        task = (record or {}).get("toolUseResult")
        task = task.get("task") if isinstance(task, dict) else None
        key = task.get("id") if isinstance(task, dict) else None
        todo = Todo(subject, "pending", str(key) if isinstance(key, str | int) else None)
        return [DigestEvent("todo", todos=(todo,))] if subject else []

    def _user(self, line: bytes) -> list[DigestEvent]:
        record = decode(line)
        message = self._wanted(record)
        if message is None or record is None or record.get("type") != "user":
            return []
        if record.get("isMeta") or record.get("isCompactSummary"):
            return []
        content = message.get("content")
        if isinstance(content, str):
            return [DigestEvent("ask", content)] if _is_ask(content) else []
        out: list[DigestEvent] = []
        for block in content if isinstance(content, list) else ():
            if not isinstance(block, dict):
                continue
            kind = block.get("type")
            if kind == "text" and isinstance(block.get("text"), str) and _is_ask(block["text"]):
                out.append(DigestEvent("ask", block["text"]))
            elif kind == "tool_result" and isinstance(block.get("tool_use_id"), str):
                out += self._result(block, record)
        return out

    def _result(self, block: dict[str, Any], record: dict[str, Any]) -> list[DigestEvent]:
        call_id = block["tool_use_id"]
        call = self.pending.pop(call_id)
        tool, about = call if call is not None else ("tool", "")
        if not block.get("is_error"):
            if tool == "TaskCreate":
                return self._task_created(record, about)
            return [DigestEvent("result", call_id=call_id, exit_code=_ok_exit(tool))]
        text = _text(block.get("content"))
        found = _EXIT.match(text)
        exit_code = int(found.group(1)) if found and tool == "Bash" else None
        if found:
            text = text[found.end() :]  # the line after it says what went wrong
        if tool != "Bash":
            where = f" {about}" if about else ""
            text = f"{tool}{where}: {_first_line(text)}"
        return [DigestEvent("result", text, call_id, failed=True, exit_code=exit_code)]


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
