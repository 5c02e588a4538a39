"""Cline CLI's `<id>.messages.json` -> usage updates, and its compactions.

The figure is the one Cline itself takes for the context in use (`getCurrentContextSize`,
@cline/core 0.0.86, shipped with 3.0.65): `metrics.inputTokens` of the last assistant message.
Cline normalises every provider's usage so that `inputTokens` is the whole prompt of that request,
its cache reads and writes included (`cacheReadTokens` is a part of it, never an addition): with
the mock's `prompt_tokens` 12,000 of which 8,000 cached, the record says `inputTokens` 12000.

The file is one JSON document rewritten whole at every change, so the reader keeps the bytes
until they parse as a whole (a half-written file waits for the next change; a whole one is let
go) and reports the assistant messages it has not reported yet, in order. It holds at most
`MAX_DOCUMENT` bytes: a bigger document is passed over until the file is written again.

A compaction leaves the messages as they were (the file keeps the whole history) and writes
`<id>.compaction.json` beside it: `{updated_at, source_message_count, messages: [the summary,
the messages kept]}`, what Cline sends from then on in place of the first
`source_message_count` messages. The reader looks at that record's head each time it reads the
messages (bounded, through `ctxd.untrusted`) and reports a compaction once per record, at its
place among the messages: `tokens` the record's size / 4 (an estimate, until the next answer
states the figure), `compacted_from` the last figure before it.
"""

from __future__ import annotations

import re
from typing import Any

import orjson

from ctxd.agents.cline.digest import COMPACTION
from ctxd.agents.cline.files import compaction_path
from ctxd.agents.lines import epoch_seconds
from ctxd.agents.reader import NO_FACTS, FactListener
from ctxd.core.events import UsageUpdate
from ctxd.untrusted import RefusedFile, read_head, stat_regular

__all__ = ["MAX_DOCUMENT", "ClineReader", "compaction_mark"]

#: The largest messages document read; a session past it is not followed until it shrinks.
MAX_DOCUMENT = 128 * 1024 * 1024
#: How much of the compaction record's head is read for its fields (they come first).
_HEAD = 4096
_COUNT = re.compile(rb'"source_message_count"\s*:\s*(\d{1,9})')
_UPDATED = re.compile(rb'"updated_at"\s*:\s*"([^"\\]{1,64})"')
#: The usual rough rate for English text and code: about four characters per token.
_CHARS_PER_TOKEN = 4


def _cli_version(origin: object) -> str | None:
    """The CLI's version the document's `origin` names (None for another Cline: the desktop app
    writes the same document, with its own version)."""
    if not isinstance(origin, dict) or origin.get("source") != "cli":
        return None
    version = origin.get("version")
    return version if isinstance(version, str) and version else None


def compaction_mark(head: bytes) -> tuple[int, str] | None:
    """(source_message_count, updated_at) of a compaction record's head, else None."""
    count, updated = _COUNT.search(head), _UPDATED.search(head)
    if count is None or updated is None:
        return None
    return int(count.group(1)), updated.group(1).decode("ascii", "replace")


class ClineReader:
    """Reader for one session's messages document; see the module docstring."""

    #: The file is rewritten whole: read it again from the start whenever it changes.
    rewritten_whole = True

    def __init__(
        self, path: str | None = None, facts: FactListener = NO_FACTS, usage: bool = True
    ) -> None:
        self.path = path
        #: Told each message once, and each compaction where it happened (the digest).
        self.facts = facts
        self.usage = usage
        #: How many messages were handed to the listener (the list only grows: a compaction
        #: leaves it whole).
        self._handed = 0
        self._data = bytearray()
        self._oversize = False
        #: Ids of the assistant messages already reported.
        self._reported: set[str] = set()
        #: The compaction records already reported, as `compaction_mark` gives them.
        self._compactions: list[list[Any]] = []
        self._tool_uses: set[str] = set()
        self._last_tokens: int | None = None
        self._version: str | None = None

    def feed(self, data: bytes) -> list[UsageUpdate]:
        """Consume the next bytes of the file; the updates once it parses as a whole."""
        if self._oversize:
            return []
        if len(self._data) + len(data) > MAX_DOCUMENT:
            self._data = bytearray()
            self._oversize = True
            return []
        self._data += data
        if not self._data.rstrip().endswith(b"}"):
            return []  # mid-write
        try:
            doc = orjson.loads(self._data)
        except orjson.JSONDecodeError:
            return []
        # Whole: whatever changes next is a rewrite, read again from 0 (`reset`), so the bytes
        # need not be held (nor kept in every snapshot of the reader).
        self._data = bytearray()
        messages = doc.get("messages") if isinstance(doc, dict) else None
        if not isinstance(messages, list):
            return []
        self._version = _cli_version(doc.get("origin"))
        updates = self._new_updates(messages)
        self.facts.flush()
        return updates if self.usage else []

    def reset(self) -> None:
        """Start the file over (it was rewritten). What was reported stays reported."""
        self._data = bytearray()
        self._oversize = False

    def saw_answer(self) -> bool:
        """Cline writes the answer before its TaskComplete hooks run."""
        return True

    def saw_tool_use(self, tool_use_id: str) -> bool:
        return tool_use_id in self._tool_uses

    def _new_compaction(self, count: int) -> tuple[int, str, int] | None:
        """The compaction record beside the messages, when it is one not reported yet."""
        if self.path is None:
            return None
        record = compaction_path(self.path)
        try:
            size = stat_regular(record).st_size
            mark = compaction_mark(read_head(record, _HEAD))
        except (OSError, RefusedFile):
            return None
        if mark is None or [mark[0], mark[1]] in self._compactions or mark[0] > count:
            return None
        return mark[0], mark[1], size

    def _new_updates(self, messages: list[Any]) -> list[UsageUpdate]:
        updates: list[UsageUpdate] = []
        compaction = self._new_compaction(len(messages))
        take = self.facts.take if self.facts.wants_records else None
        if len(messages) < self._handed:
            self._handed = 0  # another history in its place: told again from its start
        for index, message in enumerate(messages):
            if compaction is not None and index == compaction[0]:
                updates.append(self._compacted(compaction))
                compaction = None
            if take is not None and index >= self._handed and isinstance(message, dict):
                take(message)
                self._handed = index + 1
            if not isinstance(message, dict) or message.get("role") != "assistant":
                continue
            self._note_tool_uses(message.get("content"))
            message_id = message.get("id")
            if not isinstance(message_id, str) or message_id in self._reported:
                continue
            tokens = _input_tokens(message)
            if tokens is None:
                continue  # no usage yet: it may be rewritten with it
            self._reported.add(message_id)
            self._last_tokens = tokens
            info = message.get("modelInfo")
            model = info.get("id") if isinstance(info, dict) else None
            updates.append(
                UsageUpdate(
                    tokens=tokens,
                    at=_seconds(message.get("ts")),
                    model=model if isinstance(model, str) and model else None,
                    turn_id=message_id,
                    agent_version=self._version,
                )
            )
        if compaction is not None:
            updates.append(self._compacted(compaction))
        return updates

    def _compacted(self, compaction: tuple[int, str, int]) -> UsageUpdate:
        count, updated, size = compaction
        self._compactions.append([count, updated])
        if self.facts.wants_records:
            self.facts.take(dict(COMPACTION))
        return UsageUpdate(
            tokens=max(1, size // _CHARS_PER_TOKEN),
            at=epoch_seconds(updated),
            compaction=True,
            turn_id=f"compaction:{count}:{updated}",
            estimated=True,
            compacted_from=self._last_tokens,
        )

    def _note_tool_uses(self, content: object) -> None:
        if isinstance(content, list):
            for part in content:
                if isinstance(part, dict) and part.get("type") == "tool_use":
                    call = part.get("id")
                    if isinstance(call, str) and len(self._tool_uses) < 100_000:
                        self._tool_uses.add(call)


def _input_tokens(message: dict[str, Any]) -> int | None:
    metrics = message.get("metrics")
    value = metrics.get("inputTokens") if isinstance(metrics, dict) else None
    if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
        return None  # Cline too takes only a positive figure
    return int(value)


def _seconds(ts: object) -> float | None:
    # Cline stamps messages in epoch milliseconds.
    if isinstance(ts, bool) or not isinstance(ts, int | float) or ts <= 0:
        return None
    return float(ts) / 1000.0
