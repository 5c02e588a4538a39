"""pi sessions (`sessions/--<cwd>--/<time>_<id>.jsonl`) -> usage updates.

Every line is an entry `{"type", "id", "parentId", "timestamp", ...}` (0.73.1 and 1.6.0, session
version 3), appended with `appendFileSync` as each message ends, so an answer is on disk before
its tool calls run.

- A `message` entry whose `message.role` is `assistant` carries `usage {input, output,
  cacheRead, cacheWrite, totalTokens, cost}` (OpenAI-compatible providers: `input` is the prompt
  less its cached part, `cacheRead` that part; with Anthropic's message threads, 1.x's default
  against api.anthropic.com, a request sends only the new messages, yet pi reads the reply's
  `usage` as before and compares it with its compaction point, taking it as the whole prompt:
  pi-ai 1.6.0 anthropic-messages.js, read, not run). The figure is the
  prompt, `input + cacheRead + cacheWrite`; the rest of `totalTokens` (the output) is
  `pending`, since pi compares `totalTokens` with its compaction point. Answers that stopped
  with `aborted` or `error`, and answers whose usage is all zero (a provider that reports
  none), are skipped, as pi skips them.
- A `compaction` entry (`summary`, `firstKeptEntryId`, `tokensBefore`; 1.x adds `systemMessage`,
  the prompt the compacted context starts with) marks a compaction. pi itself knows no size for
  the context until the next answer; ctxd estimates it as pi does (`estimatedTokensAfter`, four
  characters a token): the system message, the summary, and the entries kept from
  `firstKeptEntryId` on, less the system messages among them (`estimated`).
- A `context_edit` entry (1.x: `targetId`, `replacement` null or `{content}`) drops or replaces an
  earlier entry's part of every later request: the figure moves by the difference, as an
  estimate, until the next answer reports the context again.
- A `usage` entry (1.x: `kind` "cache_warm" and others) is spending outside the conversation;
  it "does not participate in LLM context" (docs/session-format.md) and moves no figure.
- A `custom` entry of ctxd's extension (`customType: "ctxd"`, `data.contextWindow`) states the
  window pi runs the model with (`ctx.getContextUsage().contextWindow`): it is reported with
  every figure as `reported_window`. Before it, or without it, the window pi's own catalog gives
  the last answer's `provider` and `model` (`catalog.py`) goes with every figure as
  `catalog_window`.

Entries form a tree (`/tree` moves to another branch in the same file); the figure is the last
answer appended, whichever branch it is on.

What `pi --mode json` prints (saved from its stdout) starts with the same header and is read
too: each `message_end` (and `turn_end`, the same message again) as an answer, and a
`compaction_end` with a `result` as a compaction that left its `estimatedTokensAfter`.
"""

from __future__ import annotations

import math
import re
from dataclasses import replace
from typing import Any

import orjson

from ctxd.agents.lines import Changes, LineSplitter, count, decode, epoch_seconds
from ctxd.agents.pi import catalog
from ctxd.agents.reader import NO_FACTS, FactListener
from ctxd.core.events import UsageUpdate

__all__ = ["CUSTOM_TYPE", "PiReader"]

#: The `customType` of the entries ctxd's extension appends.
CUSTOM_TYPE = "ctxd"
_WANTED = (
    b'"role":"assistant"',
    b'"type":"compaction"',
    b'"type":"compaction_end"',
    b'"customType":"ctxd"',
    b'"type":"context_edit"',
)
#: Entries that put something into the model's context: each is sized as it is read, so that a
#: later edit or compaction can be estimated. pi writes `type` first.
_SIZED = (b'{"type":"message"', b'{"type":"custom_message"', b'{"type":"branch_summary"')
#: pi's own rate (`estimateTokens`): four characters a token; an image counts 4,800 characters.
_CHARS_PER_TOKEN = 4
_IMAGE_CHARS = 4_800
#: The records that carry a finished answer: the session file's `message` entry, and what
#: `pi --mode json` prints (a header like the file's, then `message_end`; `turn_end` repeats it).
_ANSWERS = frozenset({"message", "message_end", "turn_end"})
#: Tool call ids remembered (the newest answers'); a hook asks about a call just made.
_MAX_CALLS = 256
#: Entries whose size is remembered (the newest): compactions keep the recent tail, and edits
#: touch recent entries; an older one missing makes the estimate smaller, never wrong in kind.
_MAX_SIZES = 8_192
#: An entry's own id, read without decoding it: pi writes `{"type":…,"id":…` first.
_ID = re.compile(rb'^\{"type":"[a-z_]{1,40}","id":"([^"\\]{1,64})"')
_ID_WITHIN = 128


class PiReader:
    """Incremental reader for pi sessions; see the module docstring."""

    def __init__(self, facts: FactListener = NO_FACTS) -> None:
        self.facts = facts
        self._lines = LineSplitter()
        self._window: int | None = None
        #: pi's catalog window for the last answer's provider and model.
        self._catalog: int | None = None
        self._current: UsageUpdate | None = None
        self._calls: dict[str, None] = {}
        self._answered = False
        self._reported = Changes()
        #: Entry id -> (its estimated tokens in the context, whether it is a system message).
        self._sizes: dict[str, tuple[int, bool]] = {}

    def feed(self, data: bytes) -> list[UsageUpdate]:
        """Consume the next bytes of the file; return the usage updates they completed."""
        updates: list[UsageUpdate] = []
        facts = self.facts
        wants_records = facts.wants_records
        for line in self._lines.feed(data):
            if not line:
                continue
            wanted = line.startswith(_SIZED) or any(key in line for key in _WANTED)
            if not wanted:
                # Its place in the order (a compaction may keep from a model change on); it
                # adds nothing to the context.
                found = _ID.search(line, 0, _ID_WITHIN)
                if found is not None:
                    self._remember(found.group(1).decode(errors="replace"), 0, False)
                if not wants_records:
                    continue
            record = decode(line)
            if record is None:
                continue
            if wanted:
                update = self._on_record(record)
                if update is not None:
                    updates.append(update)
            if wants_records:
                facts.take(record)
        facts.flush()
        return updates

    def reset(self) -> None:
        """Forget everything: the file was truncated or replaced and is read again from 0."""
        self._lines.reset()
        self._window = None
        self._catalog = None
        self._current = None
        self._calls = {}
        self._answered = False
        self._reported.reset()
        self._sizes = {}
        self.facts.reset()

    def saw_tool_use(self, tool_use_id: str) -> bool:
        """Whether the answer that made tool call `tool_use_id` is read."""
        return tool_use_id in self._calls

    def saw_answer(self) -> bool:
        """Whether the last answer read made no tool calls (the turn's final answer)."""
        return self._answered

    def _on_record(self, record: dict[str, Any]) -> UsageUpdate | None:
        kind = record.get("type")
        own: UsageUpdate | None = None
        if kind in ("message", "custom_message", "branch_summary"):
            self._size(record)
        if kind in _ANSWERS:
            own = self._answer(record)
        elif kind == "compaction":
            own = self._compaction(record)
        elif kind == "compaction_end":
            own = self._compaction_result(record)
        elif kind == "context_edit":
            own = self._edit(record)
        elif kind == "custom" and record.get("customType") == CUSTOM_TYPE:
            data = record.get("data")
            window = count(data.get("contextWindow")) if isinstance(data, dict) else None
            if window:
                self._window = window
        if own is not None:
            self._current = own
        current = self._current
        if current is None:
            return None
        if (current.reported_window, current.catalog_window) != (self._window, self._catalog):
            current = self._current = replace(
                current, reported_window=self._window, catalog_window=self._catalog
            )
        key = (current.tokens, current.pending, current.turn_id, current.reported_window)
        forced = own is not None and own.compaction
        return current if self._reported.is_new(key, force=forced) else None

    def _answer(self, record: dict[str, Any]) -> UsageUpdate | None:
        message = record.get("message")
        if not isinstance(message, dict) or message.get("role") != "assistant":
            return None
        calls = [
            part["id"]
            for part in message.get("content") or ()
            if isinstance(part, dict)
            and part.get("type") == "toolCall"
            and isinstance(part.get("id"), str)
        ]
        for call in calls:
            self._calls[call] = None
        while len(self._calls) > _MAX_CALLS:
            del self._calls[next(iter(self._calls))]
        self._answered = not calls
        usage = message.get("usage")
        if not isinstance(usage, dict) or message.get("stopReason") in ("aborted", "error"):
            return None
        prompt = sum(count(usage.get(key)) or 0 for key in ("input", "cacheRead", "cacheWrite"))
        total = count(usage.get("totalTokens")) or prompt + (count(usage.get("output")) or 0)
        if total == 0:
            return None  # a provider that reported no usage: pi skips it too, so does the figure
        model = message.get("model")
        model = model if isinstance(model, str) else None
        provider = message.get("provider")
        self._catalog = catalog.window(provider if isinstance(provider, str) else None, model)
        entry_id = record.get("id")
        at = epoch_seconds(record.get("timestamp"))
        if at is None and count(message.get("timestamp")):  # the stream's: milliseconds
            at = message["timestamp"] / 1000
        return UsageUpdate(
            tokens=prompt,
            at=at,
            model=model,
            reported_window=self._window,
            catalog_window=self._catalog,
            turn_id=entry_id if isinstance(entry_id, str) else None,
            pending=max(0, total - prompt),
        )

    def _size(self, record: dict[str, Any]) -> None:
        entry_id = record.get("id")
        if not isinstance(entry_id, str):
            return
        message = record.get("message")
        system = isinstance(message, dict) and message.get("role") == "system"
        self._remember(entry_id, _tokens(_entry_chars(record)), system)

    def _remember(self, entry_id: str, size: int, system: bool) -> None:
        self._sizes.pop(entry_id, None)  # a repeated id counts where it was last written
        self._sizes[entry_id] = (size, system)
        while len(self._sizes) > _MAX_SIZES:
            del self._sizes[next(iter(self._sizes))]

    def _compaction(self, record: dict[str, Any]) -> UsageUpdate | None:
        summary = record.get("summary")
        if not isinstance(summary, str):
            return None
        tokens = _tokens(len(summary)) + _tokens(_message_chars(record.get("systemMessage")))
        first = record.get("firstKeptEntryId")
        if isinstance(first, str) and first in self._sizes:
            kept = False
            for kept_id, (size, system) in self._sizes.items():
                kept = kept or kept_id == first
                if kept and not system:  # the compaction's system message replaces those
                    tokens += size
        entry_id = record.get("id")
        return UsageUpdate(
            tokens=tokens,
            at=epoch_seconds(record.get("timestamp")),
            compaction=True,
            turn_id=entry_id if isinstance(entry_id, str) else None,
            estimated=True,
        )

    def _compaction_result(self, record: dict[str, Any]) -> UsageUpdate | None:
        """The stream's `compaction_end`: a `result` when it succeeded, whose
        `estimatedTokensAfter` is pi's own estimate of what it left."""
        result = record.get("result")
        if not isinstance(result, dict):
            return None  # aborted or failed: nothing changed
        tokens = count(result.get("estimatedTokensAfter"))
        if tokens is None:
            return self._compaction(result)
        return UsageUpdate(tokens=tokens, at=None, compaction=True, estimated=True)

    def _edit(self, record: dict[str, Any]) -> UsageUpdate | None:
        target = record.get("targetId")
        known = self._sizes.get(target) if isinstance(target, str) else None
        current = self._current
        if known is None or current is None or not isinstance(target, str):
            return None
        replacement = record.get("replacement")
        chars = _content_chars(replacement.get("content")) if isinstance(replacement, dict) else 0
        size = _tokens(chars)
        self._sizes[target] = (size, known[1])
        if size == known[0]:
            return None
        # The same turn: an edit is no answer of its own.
        return replace(current, tokens=max(0, current.tokens + size - known[0]), estimated=True)


def _tokens(chars: int) -> int:
    return math.ceil(chars / _CHARS_PER_TOKEN)


def _entry_chars(record: dict[str, Any]) -> int:
    """What an entry adds to the context, in characters, as pi's `estimateTokens` counts it."""
    kind = record.get("type")
    if kind == "custom_message":
        return _content_chars(record.get("content"))
    if kind == "branch_summary":
        summary = record.get("summary")
        return len(summary) if isinstance(summary, str) else 0
    return _message_chars(record.get("message"))


def _message_chars(message: object) -> int:
    if not isinstance(message, dict):
        return 0
    role = message.get("role")
    if role == "bashExecution":
        return sum(
            len(v) for v in (message.get("command"), message.get("output")) if isinstance(v, str)
        )
    if role in ("branchSummary", "compactionSummary"):
        summary = message.get("summary")
        return len(summary) if isinstance(summary, str) else 0
    chars = _content_chars(message.get("content"))
    if role == "system":
        sections = message.get("sections")
        if isinstance(sections, dict):
            chars += sum(len(v) for v in sections.values() if isinstance(v, str))
        tools = message.get("toolsAdded")
        if tools:
            chars += len(orjson.dumps(tools))
    return chars


def _content_chars(content: object) -> int:
    """Text, thinking and tool calls by their length; an image as pi counts it."""
    if isinstance(content, str):
        return len(content)
    if not isinstance(content, list):
        return 0
    chars = 0
    for block in content:
        if not isinstance(block, dict):
            continue
        kind = block.get("type")
        if kind == "text" and isinstance(block.get("text"), str):
            chars += len(block["text"])
        elif kind == "thinking" and isinstance(block.get("thinking"), str):
            chars += len(block["thinking"])
        elif kind == "toolCall":
            name = block.get("name")
            chars += (len(name) if isinstance(name, str) else 0) + len(
                orjson.dumps(block.get("arguments"))
            )
        elif kind == "image":
            chars += _IMAGE_CHARS
    return chars
