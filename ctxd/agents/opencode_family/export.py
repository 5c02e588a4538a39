"""What `opencode export <session>` prints: one session as one JSON document -> usage updates.

`{"info": {session: id "ses_…", projectID, directory, version, …}, "messages": [{"info":
{message}, "parts": [{part}, …]}, …]}`, indented (1.18.33, tests/data/transcripts/opencode-1.18.33/
export.*.json). Its messages and parts are the rows of the database (`store`), in their order:
each `step-finish` part with its message gives the update `usage.step_usage` makes of it there,
so an export and the database it came from give the same figures; an answer without
`step-finish` parts (an export whose parts a tool dropped) gives its own `tokens`, which
OpenCode sets to its last step's. A part holds no time of its own in an export (the database
keeps it in a column): a step's time is its message's `time.completed` (else `time.created`).

A file saved with `2>&1` starts with the line `opencode export` writes on stderr ("Exporting
session: ses_…"): the document after it is read. It is one document, not lines: the reader
holds the bytes until they parse as a whole, and no more than `MAX_BYTES` of them (a larger
file is refused with `TranscriptError`: the file is untrusted). OpenCode never writes such a
file itself, so the daemon follows none: this reader is what `ctxd replay` runs over a saved
export.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from typing import Any

import orjson

from ctxd.agents.opencode_family.usage import step_usage
from ctxd.core.events import UsageUpdate
from ctxd.errors import TranscriptError

__all__ = ["MAX_BYTES", "ExportReader", "after_exporting_line", "recognises", "recognises_prefix"]

#: The largest export read (bytes). Real exports with long tool outputs run to some MB; the
#: whole document is parsed at once, so this bounds the memory a replay takes.
MAX_BYTES = 128 * 1024 * 1024

_SESSION_ID = "ses_"
#: The line `opencode export` writes before the document (on stderr; a file saved with `2>&1`
#: keeps it: seen with 1.15.13).
_EXPORTING = re.compile(rb"\AExporting session: ses_[A-Za-z0-9]{1,64}\r?\n")


def recognises(record: Mapping[str, Any]) -> bool:
    """The document (or the members of it a file's head holds whole) is an export: its `info`
    is a session's, and its `messages`, when the head reached them, a list."""
    info = record.get("info")
    return (
        isinstance(info, dict)
        and isinstance(info.get("id"), str)
        and info["id"].startswith(_SESSION_ID)
        and any(key in info for key in ("projectID", "directory", "version"))
        and isinstance(record.get("messages", []), list)
    )


def recognises_prefix(prefix: bytes) -> bool:
    """An export saved on one line (re-serialised), too long to decode from its head."""
    return prefix.startswith(b'{"info":{"id":"' + _SESSION_ID.encode())


def after_exporting_line(head: bytes) -> bytes | None:
    """What follows the line `opencode export` writes before the document, where `head`
    starts with it; else None."""
    found = _EXPORTING.match(head)
    return None if found is None else head[found.end() :]


def _finished_at(message: Mapping[str, Any]) -> float | None:
    time = message.get("time")
    if not isinstance(time, dict):
        return None
    for key in ("completed", "created"):
        value = time.get(key)
        if isinstance(value, int) and not isinstance(value, bool):
            return value / 1000
    return None


class ExportReader:
    """Reader of one saved export (see the module docstring)."""

    #: A changed export is a new document: read it again from the start.
    rewritten_whole = True

    def __init__(self, path: str | None = None) -> None:
        self._path = path or "the export"
        self._data = bytearray()
        self._reported: set[str] = set()  # the steps (part ids) already reported
        self._ends_in_brace = False  # the last byte but blanks so far is "}"
        try:
            size = os.stat(path).st_size if path is not None else 0
        except OSError:
            size = 0  # the read says what is wrong
        if size > MAX_BYTES:
            raise self._too_large()  # refused before a byte is read

    def feed(self, data: bytes) -> list[UsageUpdate]:
        """Consume the next bytes of the file; the updates once it parses as a whole."""
        if len(self._data) + len(data) > MAX_BYTES:
            raise self._too_large()  # it grew while read
        self._data += data
        # Looked at in the new bytes alone: the whole buffer, stripped on every feed, made a
        # replay's cost grow with the square of the file.
        stripped = data.rstrip()
        if stripped:
            self._ends_in_brace = stripped.endswith(b"}")
        if not self._ends_in_brace:
            return []  # the document goes on (or is not JSON)
        exporting = _EXPORTING.match(self._data)
        try:
            doc = orjson.loads(memoryview(self._data)[exporting.end() if exporting else 0 :])
        except orjson.JSONDecodeError:
            return []
        messages = doc.get("messages") if isinstance(doc, dict) else None
        return self._updates(messages) if isinstance(messages, list) else []

    def reset(self) -> None:
        """Start the file over. What was reported stays reported."""
        self._data = bytearray()
        self._ends_in_brace = False

    def saw_answer(self) -> bool:
        return True

    def saw_tool_use(self, tool_use_id: str) -> bool:
        return True

    def _too_large(self) -> TranscriptError:
        return TranscriptError(
            f"{self._path} is larger than {MAX_BYTES // (1024 * 1024)} MiB, more than ctxd "
            "reads of an OpenCode export"
        )

    def _updates(self, messages: list[Any]) -> list[UsageUpdate]:
        updates: list[UsageUpdate] = []
        for entry in messages:
            if not isinstance(entry, dict):
                continue
            info, parts = entry.get("info"), entry.get("parts")
            if not isinstance(info, dict) or not isinstance(parts, list):
                continue
            at = _finished_at(info)
            if not any(isinstance(p, dict) and p.get("type") == "step-finish" for p in parts):
                update = self._message_usage(info, at)
                if update is not None:
                    updates.append(update)
                continue
            for index, part in enumerate(parts):
                if not isinstance(part, dict) or part.get("type") != "step-finish":
                    continue
                part_id = part.get("id")
                turn_id = part_id if isinstance(part_id, str) else f"{info.get('id')}#{index}"
                if turn_id in self._reported:
                    continue
                update = step_usage(part, info, turn_id, at)
                if update is not None:
                    self._reported.add(turn_id)
                    updates.append(update)
        return updates

    def _message_usage(self, info: dict[str, Any], at: float | None) -> UsageUpdate | None:
        """An answer whose steps the export does not hold (a tool that kept the messages and
        dropped their parts): OpenCode sets an answer's `tokens` to its last step's, so they
        are that step's figures. An answer that failed, or states nothing, gives none."""
        tokens = info.get("tokens")
        message_id = info.get("id")
        if (
            info.get("role") != "assistant"
            or info.get("error") is not None
            or not isinstance(tokens, dict)
            or not isinstance(message_id, str)
            or message_id in self._reported
        ):
            return None
        update = step_usage({"type": "step-finish", "tokens": tokens}, info, message_id, at)
        if update is None or update.tokens + update.pending == 0:
            return None
        self._reported.add(message_id)
        return update
