"""Codex CLI rollouts -> the session digest's facts (`ctxd.core.digest`).

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

`CodexFacts` is the listener of the usage reader (`transcript.py`, `ctxd.agents.reader`), which
decodes every line once and hands each record over; each fact is folded into the book as its
record comes.
"""

from __future__ import annotations

from typing import Any

import orjson

from ctxd.agents.digest import Facts, first_line, last_line, todos_from
from ctxd.core.digest import DigestBook

__all__ = ["CodexFacts"]


class CodexFacts(Facts):
    """A Codex CLI rollout's digest, kept from its decoded records; see the module docstring."""

    __slots__ = ()

    def take(self, record: dict[str, Any]) -> None:
        # The commonest kinds first: most response items are no call (and have no name).
        kind = record.get("type")
        if kind == "response_item":
            payload = record.get("payload")
            if (
                isinstance(payload, dict)
                and payload.get("name") == "update_plan"
                and payload.get("type") == "function_call"
            ):
                plan = _plan(payload.get("arguments"))
                if plan is not None:
                    self.book.todos(todos_from(plan, ("step",)))
        elif kind == "event_msg":
            payload = record.get("payload")
            if isinstance(payload, dict) and payload.get("type") == "item_completed":
                item = payload.get("item")
                if isinstance(item, dict):
                    self._item(item)
        elif kind == "compacted" and isinstance(record.get("payload"), dict):
            self.book.compaction()

    def _item(self, item: dict[str, Any]) -> None:
        """One finished item."""
        kind = item.get("type")
        if kind == "CommandExecution":
            _command(self.book, item)
        elif kind == "FileChange":
            _file_change(self.book, item)
        elif kind == "UserMessage":
            self.book.ask(_texts(item))
        elif kind == "AgentMessage":
            self.book.reply(_texts(item))


def _plan(arguments: object) -> list[Any] | None:
    """The `plan` of an `update_plan` call's arguments ([] when they have none); None: the
    arguments are no JSON string."""
    arguments = arguments or "{}"
    if not isinstance(arguments, str):
        return None
    try:
        args = orjson.loads(arguments)
    except orjson.JSONDecodeError:
        return None
    plan = args.get("plan") if isinstance(args, dict) else None
    return plan if isinstance(plan, list) else []


def _texts(item: dict[str, Any]) -> str:
    content = item.get("content")
    parts = content if isinstance(content, list) else ()
    return "\n".join(
        p["text"] for p in parts if isinstance(p, dict) and isinstance(p.get("text"), str)
    )


def _file_change(book: DigestBook, item: dict[str, Any]) -> None:
    changes = item.get("changes")
    for path, change in changes.items() if isinstance(changes, dict) else ():
        how = change.get("type") if isinstance(change, dict) else None
        if how == "add":
            book.touch(str(path), "write")
        elif how in ("update", "delete"):
            book.touch(str(path), "edit")
    if item.get("status") not in (None, "completed"):
        reason = first_line(str(item.get("stderr") or item.get("stdout") or ""))
        book.result(None, True, None, f"apply_patch: {reason}")


def _command(book: DigestBook, item: dict[str, Any]) -> None:
    """A command: the files it read, then the command and its outcome."""
    parsed = item.get("parsed_cmd")
    steps = parsed if isinstance(parsed, list) else ()
    base: str | None = None  # the command's directory, once a step read a file
    for p in steps:
        if isinstance(p, dict) and p.get("type") == "read":
            path = p.get("path") or p.get("name")
            if path:
                if base is None:
                    cwd = item.get("cwd")
                    base = cwd.removeprefix("file://") if isinstance(cwd, str) else ""
                book.touch(_joined(base, str(path)), "read")
    code = item.get("exit_code")
    exit_code = code if type(code) is int else None
    failed = (exit_code is not None and exit_code != 0) or item.get("status") in (
        "failed",
        "declined",
    )
    call_id = item.get("id") if isinstance(item.get("id"), str) else None
    written = " && ".join(
        str(p["cmd"]) for p in steps if isinstance(p, dict) and isinstance(p.get("cmd"), str)
    )
    argv = item.get("command")
    if not written and isinstance(argv, list) and argv:
        written = str(argv[-1])
    reason = last_line(str(item.get("aggregated_output") or "")) if failed else ""
    book.ran(written, call_id, failed, exit_code, reason)


def _joined(base: str, path: str) -> str:
    """`posixpath.join(base, path)`, without its generality (called for every file read)."""
    if path.startswith("/"):
        return path
    if not base or base.endswith("/"):
        return base + path
    return f"{base}/{path}"
