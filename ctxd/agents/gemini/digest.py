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
times. The facts ride on the usage reader (`transcript.py`, `ctxd.agents.digest`), which hands
over each message line and the records it decodes. A message line is judged from its head: it
starts with its id, timestamp and type; a gemini message with empty `content` is decoded only
when it carries `toolCalls`, known from its tail (Gemini CLI writes `model` last when there are
none). The legacy single-object `.json` recordings keep no digest (`NullDigestReader`).
"""

from __future__ import annotations

import re
from typing import Any

import orjson

from ctxd.agents.digest import Facts, UsageDigestReader, todos_from
from ctxd.agents.gemini.transcript import GeminiReader
from ctxd.agents.lines import decode
from ctxd.core.digest import Digest, DigestEvent

__all__ = ["GeminiDigestReader", "GeminiFacts", "NullDigestReader"]

_SNAPSHOT = "<state_snapshot>"
_ACK = "Got it. Thanks for the additional context!"
_MARKERS = (_SNAPSHOT.encode(), _ACK.encode())
_USER = b'"type":"user"'
_GEMINI = b'"type":"gemini"'
_EMPTY = b'"content":""'
_TYPE = b'","type":"'
_MODEL = b'"model":"'
_TAIL = 160
_TEXT = b'"content":"'
_THOUGHTS_AT = b'","thoughts":'
_TOOL_CALLS_AT = b',"toolCalls":[{"id":"'
_CALL_AT = b'{"id":"'
_NAME_AT = b'","name":"'
_ARGS_AT = b'","args":'
_RESULT_AT = b',"result":[{"functionResponse":{'
_RESPONSE_AT = b'"response":{'
_OUTPUT = b'"output":'
_STATUS_AT = b'}],"status":"'
_SUCCESS = b'success"'
_NEXT_CALL_AT = b'},{"id":"'
_EXIT_CODE = b"Exit Code: "
_SHELL = "run_shell_command"
_WINDOW = 400
_EXIT = re.compile(r"Exit Code: (-?\d+)")
_SEEN_KEPT = 64
#: What hooks added to a prompt (BeforeAgent, SessionStart context), not what the user typed.
_HOOK_CONTEXT = re.compile(r"<hook_context>.*?</hook_context>", re.S)
_READ = frozenset({"read_file"})
_EDIT = frozenset({"replace", "edit"})
_WRITE = frozenset({"write_file"})


class GeminiDigestReader(UsageDigestReader):
    """A Gemini CLI recording's digest (a `GeminiReader` carrying `GeminiFacts`)."""

    __slots__ = ()

    def __init__(self) -> None:
        super().__init__(GeminiReader(GeminiFacts()))


class GeminiFacts(Facts):
    """The digest side of a `GeminiReader`; see the module docstring."""

    __slots__ = ("_seen", "messages")

    def __init__(self) -> None:
        super().__init__()
        self._seen: dict[str, None] = {}  # tool call ids and summary ids already folded in
        #: Message lines seen in this file (the reader counts them).
        self.messages = 0

    def reset(self) -> None:
        super().reset()
        self._seen.clear()
        self.messages = 0

    def _first_time(self, key: str) -> bool:
        if key in self._seen:
            return False
        self._seen[key] = None
        if len(self._seen) > _SEEN_KEPT:
            del self._seen[next(iter(self._seen))]
        return True

    def take_message_line(self, line: bytes) -> None:
        """A message line (`{"id":"…","timestamp":"…","type":…`), not decoded yet."""
        kind = line.find(_TYPE, 0, 160)
        if kind < 0:
            if _GEMINI not in line[:_WINDOW] and _USER not in line[:_WINDOW]:
                return
        else:
            kind += len(_TYPE)
            if line.startswith(b'gemini"', kind):
                kind += 8
                if line.startswith(_EMPTY, kind):
                    # empty content and `model` last: written before its tool calls ran
                    if line.find(_MODEL, max(0, len(line) - _TAIL)) >= 0:
                        return
                    events = self._calls(line)
                    if events is not None:
                        self.fold(events)
                        return
                elif line.startswith(_TEXT, kind):
                    events = self._reply_and_calls(line, kind + len(_TEXT) - 1)
                    if events is not None:
                        self.fold(events)
                        return
            elif not line.startswith(b'user"', kind):
                return
        record = decode(line)
        if record is not None:
            self.fold(self._message(record))

    def _reply_and_calls(self, line: bytes, text_at: int) -> list[DigestEvent] | None:
        """A gemini message line with text content and tool calls, read as `_calls` does, its
        text taken from between `"content":` and `,"thoughts":` (quotes inside the text are
        escaped: the first `","thoughts":` ends it); None: decode the line instead."""
        if line.find(_TOOL_CALLS_AT, text_at) < 0:
            return None  # no tool calls: a short line, decoded
        end = line.find(_THOUGHTS_AT, text_at)
        if end < 0:
            return None
        try:
            text = orjson.loads(line[text_at : end + 1])
        except orjson.JSONDecodeError:
            return None
        events = self._calls(line)
        if events is None or not isinstance(text, str):
            return None
        return [*events, DigestEvent("reply", text)] if text.strip() else events

    def _calls(self, line: bytes) -> list[DigestEvent] | None:
        """The tool calls of a gemini message line with empty content, read without decoding
        their results (most of the line: a file read whole); None when the line must be
        decoded instead (a call that did not succeed, a command's exit code, another shape).

        Gemini CLI writes each call as `{"id":"…","name":"…","args":{…},"result":[{
        "functionResponse":{"id":…,"name":…,"response":{"output"|"error":…}}}],"status":"…",…}`:
        the walk reads each call's head, decodes its `args`, skips its result to its status
        (one pass over the line's bytes, in C) and goes on to the next call. Only a command's
        output says `Exit Code: N`; it is looked for in that output alone.
        """
        at = line.find(_TOOL_CALLS_AT)
        if at < 0:
            return None
        pos = at + len(_TOOL_CALLS_AT) - len(_CALL_AT)
        calls: list[dict[str, Any]] = []
        while True:
            if not line.startswith(_CALL_AT, pos):
                return None
            id_end = line.find(b'"', pos + len(_CALL_AT))
            if not line.startswith(_NAME_AT, id_end):
                return None
            name_end = line.find(b'"', id_end + len(_NAME_AT))
            if not line.startswith(_ARGS_AT, name_end):
                return None
            args_at = name_end + len(_ARGS_AT)
            result_at = line.find(_RESULT_AT, args_at)
            status_at = line.find(_STATUS_AT, result_at)
            if result_at < 0 or status_at < 0:
                return None
            status_end = status_at + len(_STATUS_AT)
            if not line.startswith(_SUCCESS, status_end):
                return None  # failed, cancelled, or not run yet: decoded whole
            name = line[id_end + len(_NAME_AT) : name_end].decode("utf-8", "replace")
            response = line.find(_RESPONSE_AT, result_at, result_at + 200 + name_end - pos)
            if response < 0 or not line.startswith(_OUTPUT, response + len(_RESPONSE_AT)):
                return None  # an error response, or another shape
            if name == _SHELL and line.find(_EXIT_CODE, result_at, status_at) >= 0:
                return None  # a command's exit code: decoded whole
            call_id = line[pos + len(_CALL_AT) : id_end].decode("utf-8", "replace")
            if call_id not in self._seen:
                try:
                    args = orjson.loads(line[args_at:result_at])
                except orjson.JSONDecodeError:
                    return None
                if not isinstance(args, dict):
                    return None
                calls.append({"id": call_id, "name": name, "args": args})
            pos = line.find(_NEXT_CALL_AT, status_end)
            if pos < 0:
                break
            pos += 2
        out: list[DigestEvent] = []
        for call in calls:
            if self._first_time(call["id"]):
                out += _tool_call(call)
        return out

    def take_message(self, record: dict[str, Any]) -> None:
        """A message line's record, decoded."""
        self.fold(self._message(record))

    def take_rewrite(self, record: dict[str, Any], line: bytes) -> None:
        """A `$set` line's record, decoded."""
        at_start = self.messages == 0
        if not at_start and not any(m in line for m in _MARKERS):
            return
        changes = record.get("$set")
        messages = changes.get("messages") if isinstance(changes, dict) else None
        if not isinstance(messages, list):
            return
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
        self.fold([*out, DigestEvent("compaction")] if compressed else out)

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
    # Only a command's output ends in `Exit Code: N` (a file read may hold those words).
    found = _EXIT.search(output or error) if name == _SHELL else None
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
    elif name == _SHELL:
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
    usage_reader = None

    def feed(self, data: bytes) -> None:
        pass

    def reset(self) -> None:
        pass
