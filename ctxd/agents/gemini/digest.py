"""Gemini CLI chat recordings -> digest events (`ctxd.core.digest`).

What a recording (0.61.0) says, line by line (see `transcript.py` for the file's shape):
- a user message line (`"type":"user"`) whose `content` holds `text` parts is a request the user
  typed (a slash command such as `/compress` is not); `functionResponse` parts are tool results,
  which the gemini message already carries;
- a gemini message line is written again once its tool calls ran, with `toolCalls`: each has its
  `id`, `name`, `args`, `status` ("success" | "error") and `result` (the `functionResponse`,
  whose `response.output` of a shell command ends in `Exit Code: N` when it failed).
  `read_file`/`read_many_files`, `replace`, `write_file` name their files (`file_path`),
  `run_shell_command` its `command`, `write_todos` the whole list (`description`, `status`),
  `invoke_agent` a subagent. Its non-empty `content` is what the model said;
- `{"$set": {"messages": [...]}}` rewrites the list: at the start of a file (a resumed session's
  new file holds the conversation so far: its facts are taken once), and after a compression,
  whose new `<state_snapshot>` summary (or the CLI's fixed acknowledgement of one) counts as a
  compaction. A summary already seen (a resume repeats it) does not count again.

Tool call ids already folded in are remembered (bounded), since a message is written several
times. A line is judged from its head (see `LineDigestReader`): a message line starts with its
id, timestamp and type; one with empty `content` is decoded only when it carries `toolCalls`,
known from its tail (Gemini CLI writes `model` last when there are none). The legacy
single-object `.json` recordings keep no digest (`NullDigestReader`).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

from ctxd.agents.digest import LineDigestReader, todos_from
from ctxd.agents.lines import decode
from ctxd.core.digest import Digest, DigestEvent

__all__ = ["GeminiDigestReader", "NullDigestReader"]

_SNAPSHOT = "<state_snapshot>"
_ACK = "Got it. Thanks for the additional context!"
_SET = b'{"$set":'
_MESSAGES = b'"messages"'
_MARKERS = (_SNAPSHOT.encode(), _ACK.encode())
_USER = b'"type":"user"'
_GEMINI = b'"type":"gemini"'
_TOOL_CALLS = b'"toolCalls"'
_EMPTY = b'"content":""'
_MESSAGE = b'{"id":"'
_TYPE = b'","type":"'
_MODEL = b'"model":"'
_TAIL = 160
_EXIT = re.compile(r"Exit Code: (-?\d+)")
_SEEN_KEPT = 64
#: What hooks added to a prompt (BeforeAgent, SessionStart context), not what the user typed.
_HOOK_CONTEXT = re.compile(r"<hook_context>.*?</hook_context>", re.S)
_READ = frozenset({"read_file"})
_EDIT = frozenset({"replace", "edit"})
_WRITE = frozenset({"write_file"})


class GeminiDigestReader(LineDigestReader):
    skip = (b'{"$set":{"lastUpdated"', b'{"$set":{"sessionId"')

    def __init__(self) -> None:
        super().__init__()
        self._seen: dict[str, None] = {}  # tool call ids and summary ids already folded in
        self._messages = 0  # message lines seen in this file

    def reset(self) -> None:
        super().reset()
        self._seen.clear()
        self._messages = 0

    def _first_time(self, key: str) -> bool:
        if key in self._seen:
            return False
        self._seen[key] = None
        if len(self._seen) > _SEEN_KEPT:
            del self._seen[next(iter(self._seen))]
        return True

    def wanted(self, data: bytes, start: int, end: int) -> bool:
        if data.startswith(_SET, start):
            return data.find(_MESSAGES, start, min(end, start + self.window)) >= 0
        if not data.startswith(_MESSAGE, start):
            return False
        self._messages += 1  # a message line: a `$set` after it is no longer the file's start
        # `{"id":"…","timestamp":"…","type":"user|gemini","content":…`
        kind = data.find(_TYPE, start, min(end, start + 160))
        if kind < 0:
            return data.find(_GEMINI, start, min(end, start + self.window)) >= 0 or (
                data.find(_USER, start, min(end, start + self.window)) >= 0
            )
        kind += len(_TYPE)
        if data.startswith(b'user"', kind):
            return True
        if not data.startswith(b'gemini"', kind):
            return False
        # empty content and `model` last: written before its tool calls ran, nothing to take
        empty = data.startswith(_EMPTY, kind + 8)
        return not (empty and data.find(_MODEL, max(start, end - _TAIL), end) >= 0)

    def head_unwanted(self, head: bytes) -> bool:
        # The tail decides about a gemini message with empty content: not there yet.
        if head.startswith(_MESSAGE):
            return _GEMINI not in head and _USER not in head
        return not head.startswith(_SET) or _MESSAGES not in head

    def on_line(self, line: bytes) -> Iterable[DigestEvent]:
        if line.startswith(_SET):
            return self._rewrite(line)
        record = decode(line)
        return self._message(record) if record is not None else ()

    def _rewrite(self, line: bytes) -> list[DigestEvent]:
        at_start = self._messages == 0
        if not at_start and not any(m in line for m in _MARKERS):
            return []
        record = decode(line)
        changes = record.get("$set") if record is not None else None
        messages = changes.get("messages") if isinstance(changes, dict) else None
        if not isinstance(messages, list):
            return []
        out: list[DigestEvent] = []
        compressed = False
        for message in messages:
            if not isinstance(message, dict):
                continue
            if _is_summary(message):
                # a summary and its acknowledgement come in pairs: one compaction per rewrite
                compressed |= self._first_time(f"summary:{message.get('id')}") and not at_start
            elif at_start:
                out += self._message(message)
        return [*out, DigestEvent("compaction")] if compressed else out

    def _message(self, message: dict[str, Any]) -> list[DigestEvent]:
        kind = message.get("type")
        if kind == "user":
            texts = _texts(message)
            if texts and not _is_summary(message):
                text = _HOOK_CONTEXT.sub("", "\n".join(texts)).strip()
                if text and not text.lstrip().startswith(("/", "<session_context>")):
                    return [DigestEvent("ask", text)]
            return []
        if kind != "gemini":
            return []
        out: list[DigestEvent] = []
        calls = message.get("toolCalls")
        for call in calls if isinstance(calls, list) else ():
            is_call = isinstance(call, dict) and isinstance(call.get("id"), str)
            if is_call and self._first_time(call["id"]):
                out += _tool_call(call)
        content = message.get("content")
        if isinstance(content, str) and content.strip():
            out.append(DigestEvent("reply", content))
        return out


def _tool_call(call: dict[str, Any]) -> list[DigestEvent]:
    name = str(call.get("name") or "")
    data = call.get("args")
    args: dict[str, Any] = data if isinstance(data, dict) else {}
    call_id: str = call["id"]
    path = args.get("file_path") or args.get("absolute_path") or args.get("path")
    path = path if isinstance(path, str) else ""
    output, error = _response(call)
    failed = call.get("status") == "error" or bool(error)
    found = _EXIT.search(output or error)
    exit_code = int(found.group(1)) if found else None
    if exit_code:
        failed = True
    events: list[DigestEvent]
    if name in _READ:
        events = [DigestEvent("read", path)]
    elif name == "read_many_files":
        paths = args.get("include") or args.get("paths") or []
        events = [DigestEvent("read", p) for p in paths if isinstance(p, str)] or [
            DigestEvent("tool", name)
        ]
    elif name in _EDIT:
        events = [DigestEvent("edit", path)]
    elif name in _WRITE:
        events = [DigestEvent("write", path)]
    elif name == "run_shell_command":
        command = str(args.get("command") or "")
        reason = _reason(error or output)
        result = DigestEvent(
            "result",
            reason,
            call_id,
            failed=failed,
            exit_code=exit_code if exit_code is not None else (None if failed else 0),
        )
        return [DigestEvent("command", command, call_id), result]
    elif name == "write_todos":
        events = [DigestEvent("todos", todos=todos_from(args.get("todos"), ("description",)))]
    elif name == "invoke_agent":
        about = args.get("description") or args.get("agent_name") or args.get("prompt")
        events = [DigestEvent("subagent", str(about or ""))]
    else:
        events = [DigestEvent("tool", name)]
    if failed:
        where = f" {path}" if path else ""
        events.append(
            DigestEvent("result", f"{name}{where}: {_reason(error or output)}", None, True)
        )
    return events


def _response(call: dict[str, Any]) -> tuple[str, str]:
    """(output, error) of a tool call's functionResponse."""
    result = call.get("result")
    for part in result if isinstance(result, list) else ():
        response = part.get("functionResponse") if isinstance(part, dict) else None
        response = response.get("response") if isinstance(response, dict) else None
        if isinstance(response, dict):
            output, error = response.get("output"), response.get("error")
            return (
                output if isinstance(output, str) else "",
                error if isinstance(error, str) else "",
            )
    return "", ""


def _reason(text: str) -> str:
    """The line of a tool's output that says what went wrong (the first that is not framing)."""
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith(("<", "Process Group PGID", "Exit Code")):
            return line.removeprefix("Output: ").removeprefix("Error: ")
    return ""


def _texts(message: dict[str, Any]) -> list[str]:
    content = message.get("content")
    if isinstance(content, str):
        return [content]
    if not isinstance(content, list):
        return []
    return [p["text"] for p in content if isinstance(p, dict) and isinstance(p.get("text"), str)]


def _is_summary(message: dict[str, Any]) -> bool:
    texts = _texts(message)
    return bool(texts) and (texts[0].lstrip().startswith(_SNAPSHOT) or texts[0].strip() == _ACK)


class NullDigestReader:
    """For recordings that keep no digest: always the empty one."""

    digest = Digest()

    def feed(self, data: bytes) -> None:
        pass

    def reset(self) -> None:
        pass
