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
from ctxd.core.digest import DigestEvent, is_request

__all__ = ["CodexDigestReader", "CodexFacts"]

_ITEM_TYPE = b'"item":{"type":"'
_ITEMS = (b'UserMessage"', b'AgentMessage"', b'CommandExecution"', b'FileChange"')
# An item's kind by its first byte.
_USER, _AGENT, _COMMAND = ord("U"), ord("A"), ord("C")
# A command that succeeded and read no file, known from its bytes (quotes inside strings are
# escaped, so these are keys and values of the item itself).
_EXIT_0 = (b'"exit_code":0,', b'"exit_code":0}')
_NOT_PLAIN = (b'"type":"read"', b'"status":"failed"', b'"status":"declined"')
#: What a command that is counted and pushed out later folds in.
_STAND_IN = (DigestEvent("command"),)
_HEAD = 400


class CodexDigestReader(UsageDigestReader):
    """A Codex CLI rollout's digest (a `CodexReader` carrying `CodexFacts`)."""

    __slots__ = ()

    def __init__(self) -> None:
        super().__init__(CodexReader(CodexFacts()))


class CodexFacts(Facts):
    """The digest side of a `CodexReader`; see the module docstring.

    Finished items are folded in at the end of each `feed` (`flush`), in order; those a later
    item of the same feed makes invisible are not decoded: all replies but the last, the
    requests between the session's first and its last `Limits.asks`, and a command that
    succeeded and read no file when `Limits.commands` more follow (it only counts: a stand-in
    is pushed, and pushed out by them). A replay of a long rollout is mostly such items.
    """

    __slots__ = ("_batch",)

    def __init__(self) -> None:
        super().__init__()
        self._batch: list[tuple[int, bytes]] = []  # (the item kind's first byte, its line)

    def reset(self) -> None:
        super().reset()
        self._batch.clear()

    def take_item(self, line: bytes) -> None:
        """An `item_completed` event line: kept for `flush` when its item is of a kind that
        holds a fact (`"item":{"type":"<kind>"` in its head)."""
        at = line.find(_ITEM_TYPE, 0, _HEAD)
        if at >= 0 and line.startswith(_ITEMS, at + len(_ITEM_TYPE)):
            self._batch.append((line[at + len(_ITEM_TYPE)], line))

    def flush(self) -> None:
        """Fold in the items taken since the last flush (see the class docstring)."""
        batch = self._batch
        if not batch:
            return
        self._batch = []
        lim = self.limits
        known: dict[int, list[DigestEvent]] = {}  # items decoded ahead
        skipped: set[int] = set()
        replies = [i for i, (kind, _) in enumerate(batch) if kind == _AGENT]
        for n in range(len(replies) - 1, -1, -1):
            i = replies[n]
            known[i] = _events(batch[i][1])
            if any(e.text.strip() for e in known[i]):
                skipped.update(replies[:n])
                break
        asks = [i for i, (kind, _) in enumerate(batch) if kind == _USER]
        if len(asks) > lim.asks + 1:
            kept: set[int] = set()
            for i in asks if self.digest.first_ask is None else ():
                known[i] = _events(batch[i][1])
                if _is_ask(known[i]):
                    kept.add(i)
                    break
            found = 0
            for i in reversed(asks):
                if found == lim.asks:
                    break
                if i not in known:
                    known[i] = _events(batch[i][1])
                if _is_ask(known[i]):
                    kept.add(i)
                    found += 1
            skipped.update(i for i in asks if i not in kept)
        commands = [i for i, (kind, _) in enumerate(batch) if kind == _COMMAND]
        counted = {
            i
            for i in commands[: max(0, len(commands) - lim.commands)]
            if _succeeded_reading_nothing(batch[i][1])
        }
        for i, (_, line) in enumerate(batch):
            if i in skipped:
                continue
            if i in counted:
                self.fold(_STAND_IN)
                continue
            events = known.get(i)
            if events is None:
                events = _events(line)
            if events:
                self.fold(events)

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


def _events(line: bytes) -> list[DigestEvent]:
    record = decode(line)
    payload = record.get("payload") if record is not None else None
    item = payload.get("item") if isinstance(payload, dict) else None
    return _item(item) if isinstance(item, dict) else []


def _is_ask(events: list[DigestEvent]) -> bool:
    return bool(events) and is_request(events[0].text)


def _succeeded_reading_nothing(line: bytes) -> bool:
    return (_EXIT_0[0] in line or _EXIT_0[1] in line) and not any(m in line for m in _NOT_PLAIN)


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
