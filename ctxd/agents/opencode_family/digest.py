"""OpenCode sessions -> the session digest's facts (`ctxd.core.digest`).

What a session (1.18.33, tests/data/transcripts/opencode-1.18.33/) says, in its parts (table
`part`, JSON in `data`, oldest first), each of a message (`role` user or assistant):
- `text`: on a user message a request, unless OpenCode wrote it itself (`synthetic`, as the
  "continue" after a compaction, or `ignored`); on an assistant message what the model said,
  unless the message is a compaction's summary (`summary: true`; its role here "summary");
- `tool` (`tool`, `callID`, `state {status, input, output, error, metadata}`): `bash`
  (`input.command`; `metadata.exit` its exit code), `read`, `edit`, `write` (`input.filePath`),
  `apply_patch` (`input.patchText`: `*** Add|Update|Delete File: path` lines), `task` (a
  subagent: `input.description`), `todowrite` (`input.todos`: `content`, `status`); others are
  counted. A state `error` is a failed call;
- `compaction` (`auto`, `overflow`): the session was compacted (its summary follows as an
  assistant message with `summary: true`).
A subagent's parts are in its own session: its facts are its own digest, not its parent's.
"""

from __future__ import annotations

import re
import sqlite3
from typing import Any

import orjson

from ctxd.agents.digest import Facts, first_line, last_line, todos_from
from ctxd.core.digest import Digest

__all__ = ["OpenCodeFacts", "decoded_part", "fold_part", "session_digest"]

_FILE_TOOLS = {"read": "read", "edit": "edit", "write": "write"}
_PATCH_FILE = re.compile(r"^\*\*\* (Add|Update|Delete) File: (.+)$", re.MULTILINE)
_PATCH_KIND = {"Add": "write", "Update": "edit", "Delete": "write"}

# The message's role alone, extracted by SQLite (a message's JSON is never decoded here); a
# compaction's summary is no answer to the user: its role is "summary".
_PARTS = (
    "SELECT CASE WHEN json_extract(m.data, '$.summary') = 1 THEN 'summary'"
    " ELSE json_extract(m.data, '$.role') END, p.data FROM part p"
    " JOIN message m ON m.id = p.message_id WHERE p.session_id = ? ORDER BY p.rowid"
)


class OpenCodeFacts(Facts):
    """An OpenCode session's digest, kept from its parts; see the module docstring. A record
    is `{"role": its message's role, "part": the part}`."""

    __slots__ = ()

    def take(self, record: dict[str, Any]) -> None:
        part = record.get("part")
        if not isinstance(part, dict):
            return
        kind = part.get("type")
        if kind == "text" and isinstance(part.get("text"), str):
            role = record.get("role")
            if role == "assistant":
                self.book.reply(part["text"])
            elif role == "user" and not part.get("synthetic") and not part.get("ignored"):
                self.book.ask(part["text"])
        elif kind == "tool":
            self._tool(part)
        elif kind == "compaction":
            self.book.compaction()

    def _tool(self, part: dict[str, Any]) -> None:
        name = part.get("tool")
        state = part.get("state") if isinstance(part.get("state"), dict) else {}
        assert isinstance(state, dict)
        args = state.get("input") if isinstance(state.get("input"), dict) else {}
        assert isinstance(args, dict)
        status = state.get("status")
        failed = status == "error"
        call_id = part.get("callID") if isinstance(part.get("callID"), str) else None
        if name == "bash" and isinstance(args.get("command"), str):
            if status not in ("completed", "error"):
                self.book.command(args["command"], call_id)
                return
            meta = state.get("metadata") if isinstance(state.get("metadata"), dict) else {}
            assert isinstance(meta, dict)
            code = meta.get("exit")
            exit_code = code if type(code) is int else None
            failed = failed or bool(exit_code)
            error = ""
            if failed:
                error = _text(state.get("error")) or last_line(_text(state.get("output"))[-2000:])
            self.book.ran(args["command"], call_id, failed, exit_code, error)
            return
        if name in _FILE_TOOLS and isinstance(args.get("filePath"), str):
            self.book.touch(args["filePath"], _FILE_TOOLS[name])
        elif name == "apply_patch" and isinstance(args.get("patchText"), str):
            for verb, path in _PATCH_FILE.findall(args["patchText"]):
                self.book.touch(path.strip(), _PATCH_KIND[verb])
        elif name == "task":
            about = args.get("description") or args.get("prompt")
            self.book.subagent(about if isinstance(about, str) else "")
        elif name == "todowrite":
            self.book.todos(todos_from(args.get("todos"), ("content",)))
        else:
            self.book.tool()
        if failed:
            self.book.result(None, True, None, f"{name}: {first_line(_text(state.get('error')))}")


def fold_part(facts: OpenCodeFacts, role: object, part: dict[str, Any]) -> None:
    """One decoded part of a message of `role` ("summary" for a compaction's) into `facts`."""
    facts.take({"role": role, "part": part})


def session_digest(path: str, session_id: str) -> Digest:
    """The digest of one session of the database at `path`, its parts read whole (what `ctxd
    handoff` reads; the daemon keeps each session's as its rows arrive, `store.OpenCodeStore`).
    Raises OSError when the database cannot be read."""
    from ctxd.agents.opencode_family.store import connect  # the store keeps digests of these facts

    facts = OpenCodeFacts()
    try:
        db = connect(path)
    except sqlite3.Error as exc:
        raise OSError(f"{path}: {exc}") from None
    try:
        for role, part in db.execute(_PARTS, (session_id,)):
            decoded = decoded_part(part)
            if decoded is not None:
                fold_part(facts, role, decoded)
    except sqlite3.Error as exc:
        raise OSError(f"{path}: {exc}") from None
    finally:
        db.close()
    facts.flush()
    return facts.digest


def decoded_part(data: object) -> dict[str, Any] | None:
    """A part's JSON as a dict (None when it is not one)."""
    try:
        value = orjson.loads(data) if isinstance(data, str | bytes) else None
    except orjson.JSONDecodeError:
        return None
    return value if isinstance(value, dict) else None


def _text(value: object) -> str:
    return value if isinstance(value, str) else ""
