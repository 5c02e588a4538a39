"""pi sessions -> the session digest's facts (`ctxd.core.digest`).

What a session (0.73.1) says, in `message` entries (`message.role`):
- `user`: a request (`content`, a string or text parts);
- `assistant`: what the model said (text parts) and its tool calls (`toolCall` parts: `id`,
  `name`, `arguments`): `bash` (`command`), `read`, `edit`, `write` (`path`); others are counted;
- `toolResult` (`toolCallId`, `toolName`, `isError`, text parts): a tool's outcome; a failing
  bash command's text ends with pi's "Command exited with code N";
- `bashExecution`: a command the user ran with `!` (`command`, `exitCode`).
A `compaction` entry is a compaction.
"""

from __future__ import annotations

import re
from typing import Any

from ctxd.agents.digest import Facts, first_line, last_line, text_of

__all__ = ["PiFacts"]

_FILE_TOOLS = {"read": "read", "edit": "edit", "write": "write"}
_EXIT = re.compile(r"exited with code (\d+)")


class PiFacts(Facts):
    """A pi session's digest, kept from its decoded records; see the module docstring."""

    __slots__ = ()

    def take(self, record: dict[str, Any]) -> None:
        kind = record.get("type")
        if kind == "compaction":
            self.book.compaction()
            return
        message = record.get("message") if kind == "message" else None
        if not isinstance(message, dict):
            return
        role = message.get("role")
        if role == "assistant":
            self._answer(message)
        elif role == "toolResult":
            self._result(message)
        elif role == "user":
            self.book.ask(text_of(message.get("content")))
        elif role == "bashExecution" and isinstance(message.get("command"), str):
            code = message.get("exitCode")
            exit_code = code if type(code) is int else None
            self.book.ran(message["command"], None, bool(exit_code), exit_code)

    def _answer(self, message: dict[str, Any]) -> None:
        content = message.get("content")
        parts = content if isinstance(content, list) else ()
        self.book.reply(text_of(parts))
        for part in parts:
            if not isinstance(part, dict) or part.get("type") != "toolCall":
                continue
            name, args = part.get("name"), part.get("arguments")
            args = args if isinstance(args, dict) else {}
            call_id = part.get("id") if isinstance(part.get("id"), str) else None
            if name == "bash" and isinstance(args.get("command"), str):
                self.book.command(args["command"], call_id)
            elif name in _FILE_TOOLS and isinstance(args.get("path"), str):
                self.book.touch(args["path"], _FILE_TOOLS[name])
                if call_id is not None:
                    self.pending.add(call_id, name, args["path"])
            else:
                self.book.tool()

    def _result(self, message: dict[str, Any]) -> None:
        call_id = message.get("toolCallId")
        call_id = call_id if isinstance(call_id, str) else None
        failed = message.get("isError") is True
        text = text_of(message.get("content"))
        pending = self.pending.pop(call_id, None) if call_id is not None else None
        if message.get("toolName") == "bash":
            found = _EXIT.search(text[-200:]) if failed else None
            exit_code = int(found.group(1)) if found else None
            self.book.result(call_id, failed, exit_code, last_line(text) if failed else "")
        elif failed:
            tool = pending[0] if pending else str(message.get("toolName") or "tool")
            self.book.result(None, True, None, f"{tool}: {first_line(text)}")
