"""Gemini CLI chat recordings -> the session digest (`ctxd.core.digest`).

`GeminiFacts` is the listener of a `GeminiReader` (`transcript.py`, which describes the file's
shape): it is handed each record the reader decodes and folds its facts into the book.

What a recording (0.61.0) says, record by record:
- a user message (`"type":"user"`) whose `content` holds `text` parts is a request the user
  typed (a slash command such as `/compress` is not, nor what hooks added to it); one whose
  content starts with a `functionResponse` is a tool result, which the gemini message already
  carries;
- a gemini message is written again once its tool calls ran, with `toolCalls`: each has its
  `id`, `name`, `args`, `status` ("success" | "error" | "cancelled") and `result` (the
  `functionResponse`, whose `response.output` of a shell command ends in `Exit Code: N` when it
  failed). `read_file`/`read_many_files`, `replace`, `write_file` name their files
  (`file_path`), `run_shell_command` its `command`, `write_todos` the whole list (`description`,
  `status`), `invoke_agent` a subagent. Its non-empty `content` is what the model said. Since a
  message is written several times, the ids of the tool calls folded in are remembered
  (bounded), and each call is folded once;
- `{"$set": {"messages": [...]}}` rewrites the list: at the start of a file (a resumed
  session's new file holds the conversation so far: its facts are taken), and after a
  compression, whose new `<state_snapshot>` summary (or the CLI's fixed acknowledgement of one)
  counts as a compaction. A summary already seen (a resume repeats it) does not count again.
  Only a new summary matters in a later rewrite: a reader opened for the facts alone does not
  decode one whose bytes hold none (`transcript.may_hold_summary`).
Requests and what the model said wait for the end of the feed (`flush`): only the session's
first request, the newest `Limits.asks` and the newest reply can show, and only they are read.
The legacy single-object `.json` recordings keep no digest (`open_facts` gives None for them).
"""

from __future__ import annotations

import re
from typing import Any

from ctxd.agents.digest import Facts, todos_from
from ctxd.agents.gemini.transcript import is_summary, is_summary_text, message_texts

__all__ = ["GeminiFacts"]

_SHELL = "run_shell_command"
_EXIT = re.compile(r"Exit Code: (-?\d+)")
#: How many tool call ids (and summary ids) already folded in are remembered.
_SEEN_KEPT = 64
#: What hooks added to a prompt (BeforeAgent, SessionStart context), not what the user typed.
_HOOK_CONTEXT = re.compile(r"<hook_context>.*?</hook_context>", re.S)
#: A file tool's name -> how it touches its file.
_FILE_TOOLS = {"read_file": "read", "replace": "edit", "edit": "edit", "write_file": "write"}


class GeminiFacts(Facts):
    """A Gemini CLI recording's digest, from the records its reader decodes; see the module
    docstring."""

    __slots__ = ("_asks", "_begun", "_replies", "_seen")

    def __init__(self) -> None:
        super().__init__()
        #: Tool call ids and summary ids already folded in, oldest first (bounded).
        self._seen: dict[str, None] = {}
        #: A message was seen: a `$set` of messages is no longer the file's start.
        self._begun = False
        #: The user messages of the current feed, of which `flush` folds the requests that
        #: can show (the session's first, the newest few).
        self._asks: list[dict[str, Any]] = []
        #: What the model said in the current feed, of which `flush` folds the newest.
        self._replies: list[str] = []

    def reset(self) -> None:
        super().reset()
        self._seen.clear()
        self._begun = False
        self._asks.clear()
        self._replies.clear()

    def take(self, record: dict[str, Any]) -> None:
        """One decoded record: a message, a rewrite of the list, or something saying nothing."""
        if "$set" in record:
            self._rewrite(record["$set"])
        elif isinstance(record.get("id"), str) and "$rewindTo" not in record:
            self._begun = True
            kind = record.get("type")
            if kind == "gemini":
                self._gemini(record)
            elif kind == "user":
                self._user(record)

    def flush(self) -> None:
        """Fold in the requests and the reply taken since the last flush: only the session's
        first request, the newest `Limits.asks` and the newest reply can show, so only those
        are read and clipped."""
        if self._asks:
            asks, self._asks = self._asks, []
            self.fold_requests(asks, _asks_of)
        if self._replies:
            replies, self._replies = self._replies, []
            self.fold_reply(replies)

    def _first_time(self, key: str) -> bool:
        seen = self._seen
        if key in seen:
            return False
        seen[key] = None
        if len(seen) > _SEEN_KEPT:
            del seen[next(iter(seen))]
        return True

    def _rewrite(self, changes: object) -> None:
        """A `$set`: a new message list's facts at the file's start, a compaction's after."""
        messages = changes.get("messages") if isinstance(changes, dict) else None
        if not isinstance(messages, list):
            return
        at_start = not self._begun
        compressed = False
        for message in messages:
            if not isinstance(message, dict):
                continue
            if is_summary(message):
                # a summary and its acknowledgement come in pairs: one compaction per rewrite
                compressed |= self._first_time(f"summary:{message.get('id')}") and not at_start
            elif at_start:
                kind = message.get("type")
                if kind == "gemini":
                    self._gemini(message)
                elif kind == "user":
                    self._user(message)
        if compressed:
            self.book.compaction()

    def _user(self, message: dict[str, Any]) -> None:
        content = message.get("content")
        if isinstance(content, list) and content:
            first = content[0]
            if isinstance(first, dict) and "functionResponse" in first:
                return  # tool results
        self._asks.append(message)

    def _gemini(self, message: dict[str, Any]) -> None:
        calls = message.get("toolCalls")
        if isinstance(calls, list):
            first_time = self._first_time
            for call in calls:
                if isinstance(call, dict):
                    call_id = call.get("id")
                    if isinstance(call_id, str) and first_time(call_id):
                        self._call(call, call_id)
        content = message.get("content")
        if isinstance(content, str) and content:
            self._replies.append(content)  # a blank one is no reply: `flush` passes it

    def _call(self, call: dict[str, Any], call_id: str) -> None:
        """One tool call, with its result, folded in."""
        name = call.get("name")
        if not isinstance(name, str):
            name = str(name or "")
        data = call.get("args")
        args: dict[str, Any] = data if isinstance(data, dict) else {}
        output, error = _response(call.get("result"))
        failed = bool(error) or call.get("status") == "error"
        if name == _SHELL:
            self._command(args.get("command"), call_id, failed, output, error)
            return
        book = self.book
        path = args.get("file_path") or args.get("absolute_path") or args.get("path")
        path = path if isinstance(path, str) else ""
        kind = _FILE_TOOLS.get(name)
        if kind is not None:
            book.touch(path, kind)
        elif name == "read_many_files":
            paths = args.get("include") or args.get("paths")
            if isinstance(paths, str):
                paths = [paths]
            read = [p for p in paths if isinstance(p, str)] if isinstance(paths, list) else []
            for p in read:
                book.touch(p, "read")
            if not read:
                book.tool()
        elif name == "write_todos":
            book.todos(todos_from(args.get("todos"), ("description",)))
        elif name == "invoke_agent":
            about = args.get("description") or args.get("agent_name") or args.get("prompt")
            book.subagent(str(about or ""))
        else:
            book.tool()
        if failed:
            where = f" {path}" if path else ""
            book.result(None, True, None, f"{name}{where}: {_reason(error or output)}")

    def _command(
        self, command: object, call_id: str, failed: bool, output: str, error: str
    ) -> None:
        """A shell command: its exit code, from what it printed, and why it failed."""
        # Only a command's output ends in `Exit Code: N` (a file read may hold those words).
        found = _EXIT.search(output or error)
        exit_code = int(found[1]) if found else None
        failed = failed or bool(exit_code)
        if exit_code is None and not failed:
            exit_code = 0
        reason = _reason(error or output) if failed else ""
        text = command if isinstance(command, str) else str(command or "")
        self.book.ran(text, call_id, failed, exit_code, reason)


def _asks_of(message: dict[str, Any]) -> list[str]:
    """The request a user message makes, as a list (none, or one)."""
    text = _ask_in(message_texts(message))
    return [] if text is None else [text]


def _ask_in(texts: list[str]) -> str | None:
    """The request a user message's texts make, if they make one."""
    if not texts or is_summary_text(texts[0]):
        return None
    text = _HOOK_CONTEXT.sub("", "\n".join(texts)).strip()
    if text and not text.lstrip().startswith(("/", "<session_context>")):
        return text
    return None


def _response(result: object) -> tuple[str, str]:
    """(output, error) of a tool call's `result`: its functionResponse's."""
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
