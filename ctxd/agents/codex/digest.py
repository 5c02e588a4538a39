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
from ctxd.core.digest import DigestEvent

__all__ = ["CodexDigestReader", "CodexFacts"]

_ITEM_TYPE = b'"item":{"type":"'
_ITEMS = (b'UserMessage"', b'AgentMessage"', b'CommandExecution"', b'FileChange"')
_HEAD = 400


class CodexDigestReader(UsageDigestReader):
    """A Codex CLI rollout's digest (a `CodexReader` carrying `CodexFacts`)."""

    __slots__ = ()

    def __init__(self) -> None:
        super().__init__(CodexReader(CodexFacts()))


class CodexFacts(Facts):
    """The digest side of a `CodexReader`; see the module docstring."""

    __slots__ = ()

    def take_item(self, line: bytes) -> None:
        """An `item_completed` event line: folded in when its item is of a kind that holds a
        fact (`"item":{"type":"<kind>"` in its head)."""
        at = line.find(_ITEM_TYPE, 0, _HEAD)
        if at < 0 or not line.startswith(_ITEMS, at + len(_ITEM_TYPE)):
            return
        record = decode(line)
        payload = record.get("payload") if record is not None else None
        item = payload.get("item") if isinstance(payload, dict) else None
        if isinstance(item, dict):
            self.fold(_item(item))

    def take_compacted(self, record: dict[str, Any]) -> None:
        self.fold((DigestEvent("compaction"),))

    def take_plan(self, line: bytes) -> None:
        """A `function_call` line that names `update_plan` in its head."""
        payload = (decode(line) or {}).get("payload")
        if not isinstance(payload, dict) or payload.get("type") != "function_call":
            return
        if payload.get("name") != "update_plan":
            return
        try:
            args = orjson.loads(payload.get("arguments") or "{}")
        except orjson.JSONDecodeError:
            return
        plan = args.get("plan") if isinstance(args, dict) else None
        self.fold((DigestEvent("todos", todos=todos_from(plan, ("step",))),))


def _texts(item: dict[str, Any]) -> str:
    content = item.get("content")
    parts = content if isinstance(content, list) else ()
    return "\n".join(
        p["text"] for p in parts if isinstance(p, dict) and isinstance(p.get("text"), str)
    )


def _item(item: dict[str, Any]) -> list[DigestEvent]:
    kind = item.get("type")
    if kind == "UserMessage":
        text = _texts(item)
        return [DigestEvent("ask", text)] if text.strip() else []
    if kind == "AgentMessage":
        return [DigestEvent("reply", _texts(item))]
    if kind == "CommandExecution":
        return _command(item)
    if kind == "FileChange":
        changes = item.get("changes")
        out: list[DigestEvent] = []
        for path, change in changes.items() if isinstance(changes, dict) else ():
            how = change.get("type") if isinstance(change, dict) else None
            if how == "add":
                out.append(DigestEvent("write", str(path)))
            elif how in ("update", "delete"):
                out.append(DigestEvent("edit", str(path)))
        if item.get("status") not in (None, "completed"):
            reason = _first_line(str(item.get("stderr") or item.get("stdout") or ""))
            out.append(DigestEvent("result", f"apply_patch: {reason}", None, failed=True))
        return out
    return []


def _command(item: dict[str, Any]) -> list[DigestEvent]:
    call_id = item.get("id") if isinstance(item.get("id"), str) else None
    parsed = item.get("parsed_cmd")
    steps = [p for p in parsed if isinstance(p, dict)] if isinstance(parsed, list) else []
    written = " && ".join(str(p["cmd"]) for p in steps if isinstance(p.get("cmd"), str))
    argv = item.get("command")
    if not written and isinstance(argv, list) and argv:
        written = str(argv[-1])
    cwd = item.get("cwd")
    base = cwd.removeprefix("file://") if isinstance(cwd, str) else ""
    out = [
        DigestEvent("read", posixpath.join(base, str(p.get("path") or p.get("name"))))
        for p in steps
        if p.get("type") == "read" and (p.get("path") or p.get("name"))
    ]
    code = item.get("exit_code")
    exit_code = code if type(code) is int else None
    failed = (exit_code is not None and exit_code != 0) or item.get("status") in (
        "failed",
        "declined",
    )
    reason = _last_line(str(item.get("aggregated_output") or "")) if failed else ""
    out.append(DigestEvent("command", written, call_id))
    out.append(DigestEvent("result", reason, call_id, failed=failed, exit_code=exit_code))
    return out


def _first_line(text: str) -> str:
    return next((line.strip() for line in text.splitlines() if line.strip()), "")


def _last_line(text: str) -> str:
    # a failing command says why at the end of what it printed
    return next((line.strip() for line in reversed(text.splitlines()) if line.strip()), "")
