"""Cline CLI sessions -> the session digest's facts (`ctxd.core.digest`).

What a messages document (3.0.65) says, message by message (`role`, `content` parts):
- `user` with text parts: a request, wrapped by Cline in `<user_input mode="act">...`; the
  same role with `metadata.displayRole: "system"` is Cline's own (hook context, a compaction's
  summary) and is not a request; `tool_result` parts (`tool_use_id`, `content`, `is_error`) are
  the tools' outcomes;
- `assistant`: what the model said (text parts) and its calls (`tool_use` parts: `id`, `name`,
  `input`): `run_commands` (`commands`, a list), `read_files` (`files[].path`), `editor`
  (`path`); others are counted.
The reader hands over each message once, and `{"type": "compaction"}` where Cline compacted.
"""

from __future__ import annotations

import re
from typing import Any

from ctxd.agents.digest import Facts, first_line, text_of

__all__ = ["COMPACTION", "ClineFacts"]

#: The record the reader hands over where a compaction happened.
COMPACTION: dict[str, Any] = {"type": "compaction"}
_USER_INPUT = re.compile(r"^<user_input[^>]*>(.*)</user_input>$", re.DOTALL)


class ClineFacts(Facts):
    """A Cline session's digest, kept from its messages; see the module docstring."""

    __slots__ = ()

    def take(self, record: dict[str, Any]) -> None:
        if record.get("type") == "compaction":
            self.book.compaction()
            return
        role = record.get("role")
        content = record.get("content")
        parts = content if isinstance(content, list) else ()
        if role == "assistant":
            self._answer(parts)
        elif role == "user":
            metadata = record.get("metadata")
            if isinstance(metadata, dict) and metadata.get("displayRole") == "system":
                return
            for part in parts:
                if isinstance(part, dict) and part.get("type") == "tool_result":
                    self._result(part)
            text = text_of(parts)
            if text:
                found = _USER_INPUT.match(text.strip())
                self.book.ask(found.group(1).strip() if found else text)

    def _answer(self, parts: Any) -> None:
        self.book.reply(text_of(parts))
        for part in parts:
            if not isinstance(part, dict) or part.get("type") != "tool_use":
                continue
            name, args = part.get("name"), part.get("input")
            args = args if isinstance(args, dict) else {}
            call_id = part.get("id") if isinstance(part.get("id"), str) else None
            if name == "run_commands" and isinstance(args.get("commands"), list):
                commands = [c for c in args["commands"] if isinstance(c, str)]
                for i, command in enumerate(commands):
                    # one outcome per call: it belongs to the last command
                    self.book.command(command, call_id if i == len(commands) - 1 else None)
            elif name == "read_files" and isinstance(args.get("files"), list):
                for item in args["files"]:
                    if isinstance(item, dict) and isinstance(item.get("path"), str):
                        self.book.touch(item["path"], "read")
            elif name == "editor" and isinstance(args.get("path"), str):
                self.book.touch(args["path"], "edit")
                if call_id is not None:
                    self.pending.add(call_id, "editor", args["path"])
            else:
                self.book.tool()

    def _result(self, part: dict[str, Any]) -> None:
        call_id = part.get("tool_use_id") if isinstance(part.get("tool_use_id"), str) else None
        failed = part.get("is_error") is True
        text = _result_text(part.get("content"))
        pending = self.pending.pop(call_id, None) if call_id is not None else None
        if pending is None and part.get("name") == "run_commands":
            self.book.result(call_id, failed, None, first_line(text) if failed else "")
        elif failed:
            tool = pending[0] if pending else str(part.get("name") or "tool")
            self.book.result(None, True, None, f"{tool}: {first_line(text)}")


def _result_text(content: object) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        texts = []
        for item in content:
            if isinstance(item, dict):
                for key in ("error", "result", "text"):
                    if isinstance(item.get(key), str) and item[key]:
                        texts.append(item[key])
                        break
        return "\n".join(texts)
    return ""
