"""Kimi Code wire files -> the session digest's facts (`ctxd.core.digest`).

What a wire file (2.1.0) says, by record:
- `turn.prompt` with `origin.kind` "user": a request (`input`, text parts); a Stop hook's or
  another system turn has another origin and is not one;
- `context.append_loop_event`, its `event` one of `content.part` (text the model wrote:
  `part.text`), `tool.call` (`toolCallId`, `name`, `args`: `Bash` with `command`, `Read`,
  `Edit` and `Write` with `path`; others are counted) and `tool.result` (`toolCallId`,
  `result: {output, isError}`; a failed Bash command's says "Command failed with exit code: N");
- `full_compaction.complete`: a compaction.
Records of another agent (`agentId` not "main": a subagent's) are not the session's.
"""

from __future__ import annotations

import re
from typing import Any

from ctxd.agents.digest import Facts, first_line, last_line, text_of

__all__ = ["KimiFacts"]

_FILE_TOOLS = {"Read": "read", "Edit": "edit", "Write": "write"}
_EXIT = re.compile(r"exit code:? (\d+)")


class KimiFacts(Facts):
    """A Kimi Code session's digest, kept from its decoded records; see the module docstring."""

    __slots__ = ()

    def take(self, record: dict[str, Any]) -> None:
        if record.get("agentId", "main") != "main":
            return
        kind = record.get("type")
        if kind == "context.append_loop_event":
            event = record.get("event")
            if isinstance(event, dict):
                self._loop_event(event)
        elif kind == "turn.prompt":
            origin = record.get("origin")
            if isinstance(origin, dict) and origin.get("kind") == "user":
                self.book.ask(text_of(record.get("input")))
        elif kind == "full_compaction.complete":
            self.book.compaction()

    def _loop_event(self, event: dict[str, Any]) -> None:
        kind = event.get("type")
        if kind == "content.part":
            part = event.get("part")
            if isinstance(part, dict) and part.get("type") == "text":
                text = part.get("text")
                if isinstance(text, str):
                    self.book.reply(text)
        elif kind == "tool.call":
            self._call(event)
        elif kind == "tool.result":
            self._result(event)

    def _call(self, event: dict[str, Any]) -> None:
        name, args = event.get("name"), event.get("args")
        args = args if isinstance(args, dict) else {}
        call_id = event.get("toolCallId") if isinstance(event.get("toolCallId"), str) else None
        if name == "Bash" and isinstance(args.get("command"), str):
            self.book.command(args["command"], call_id)
        elif name in _FILE_TOOLS and isinstance(args.get("path"), str):
            self.book.touch(args["path"], _FILE_TOOLS[name])
            if call_id is not None:
                self.pending.add(call_id, name, args["path"])
        else:
            self.book.tool()
            if call_id is not None and isinstance(name, str):
                self.pending.add(call_id, name, "")

    def _result(self, event: dict[str, Any]) -> None:
        call_id = event.get("toolCallId")
        call_id = call_id if isinstance(call_id, str) else None
        result = event.get("result")
        result = result if isinstance(result, dict) else {}
        failed = result.get("isError") is True
        text = text_of(result.get("output"))
        pending = self.pending.pop(call_id, None) if call_id is not None else None
        if pending is None or not failed:
            # a command's outcome (by its id), or a call that went well
            found = _EXIT.search(text[-300:]) if failed else None
            exit_code = int(found.group(1)) if found else None
            self.book.result(call_id, failed, exit_code, last_line(text) if failed else "")
            return
        self.book.result(None, True, None, f"{pending[0]}: {first_line(text)}")
