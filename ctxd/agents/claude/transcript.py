"""Claude Code transcripts (`projects/<slug>/<session id>.jsonl`) -> usage updates.

Context tokens are `input_tokens + cache_creation_input_tokens + cache_read_input_tokens` of the
last main-chain assistant message: output tokens are excluded, which matches Claude Code's own
`context_window.current_usage` / `used_percentage` (checked against the statusline samples).

- Sidechain lines (`isSidechain: true`) inside a session's transcript belong to its subagents
  and are skipped; a subagent's own transcript (`<session>/subagents/agent-*.jsonl`) is made of
  nothing but sidechain lines, so its reader is opened with `subagent=True` and keeps them.
- API-error messages (`isApiErrorMessage: true`, or
  model `<synthetic>`, whose usage is all zeros) are skipped.
- A streamed message can be written several times with the same `message.id`; every copy is
  reported with `turn_id` = that id, so a consumer keeps only the newest. Once the final copy (the
  one with a `stop_reason`) has been seen, later partial copies of it are ignored.
- Each update carries the response's `output_tokens` as `pending`: Claude Code counts them
  towards its compaction point (`compaction.py`), though not in its `used_percentage`.
- Each update names the Claude Code version that wrote its line (`version`): the compaction
  rule differs between versions for some models.
- A `system`/`compact_boundary` line reports `compactMetadata.postTokens` with
  `compaction=True`; the next assistant message replaces it. An automatic one (`trigger:
  "auto"`) also reports its `preTokens` as `compacted_from`, from which the window can be
  inferred. Claude Code 2.1.3x writes no `postTokens`: the figure is then an estimate
  (`estimated=True`), the session's first context (system prompt, tools, first prompt) until
  the summary line (`isCompactSummary`) follows, then that plus the summary's length / 4.

One pass over the lines serves the usage and the reader's `FactListener` (the session digest,
`digest.py`). Most of a 2.1.x transcript's bytes are lines that hold neither usage nor a fact:
attachments, request shapes and blobs of 10-60 KB, snapshots, and in a session's transcript its
subagents' sidechain lines. Their first bytes, in Claude Code's own layout, tell them
(`_holds_nothing`), and they are never decoded; a line of any other layout is. Given a listener
that wants records, every other line is decoded once and each record of the reader's chain is
handed to it after its usage is read. Without one (`ctxd replay`), only the lines a substring
test says may carry usage are decoded: `"usage"` with its quotes can only occur as a real key,
since quotes inside JSON strings are escaped; the lines that merely contain one of the words are
decoded and then dropped. Opened for the facts alone (`usage=False`, `ctxd handoff`), it hands
the records over and reads none for usage (nor the tool call ids `saw_tool_use` answers from).

`saw_tool_use` answers from the ids of the recent tool calls (`RecentCalls`): all of the newest
model turn's and the last `RECENT_CALLS` overall. That is enough: Claude Code runs a
PostToolUse hook before it sends the call's result back to the model, so no later turn can be
written before the hook is answered; the hook asks about a call of the newest turn that made
calls (a turn's parallel calls are written one line per call, under one message id), or of one
not written yet. The older ids are slack that argument does not need, kept small because a
daemon holds one reader per session.
"""

from __future__ import annotations

from typing import Any

from ctxd.agents.lines import Changes, LineSplitter, count, decode, epoch_seconds
from ctxd.agents.reader import NO_FACTS, FactListener
from ctxd.core.events import UsageUpdate

__all__ = ["RECENT_CALLS", "ClaudeReader", "RecentCalls", "context_tokens"]

#: How many recent tool calls `RecentCalls` keeps beyond the newest turn's.
RECENT_CALLS = 16
# What a line must contain to be decoded when no listener wants the records.
_USAGE_KEY = b'"usage"'
_BOUNDARY = b"compact_boundary"
_SUMMARY_KEY = b'"isCompactSummary"'
# What `_holds_nothing` looks for.
_KIND_FIRST = b'{"type":"'
_KIND_END = len(_KIND_FIRST)
_KINDS = (b'user"', b'assistant"', b'system"')
#: Right after the chain's (`{"parentUuid":…,"isSidechain":…,`), within `_HEAD` bytes.
_ATTACHMENT = b',"attachment":{'
_SIDECHAIN = b'"isSidechain":true'
_HEAD = 128
#: The usual rough rate for English text and code: about four characters per token.
_CHARS_PER_TOKEN = 4
_SYNTHETIC_MODEL = "<synthetic>"
_NO_USAGE = object()
_CONTEXT_KEYS = ("input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens")


class RecentCalls(dict[str, None]):
    """The ids of the recent tool calls, oldest first: every call of the newest turn that made
    any (a turn: one message id) and the last `RECENT_CALLS` overall."""

    __slots__ = ("_turn", "_turn_calls")

    def __init__(self) -> None:
        super().__init__()
        self._turn: object = None  # the message id of the newest turn that made tool calls
        self._turn_calls = 0  # how many of the newest ids that turn made

    def add(self, turn: object, call_id: str) -> None:
        """Tool call `call_id` of the message `turn` (its id), if it is not known already."""
        if call_id in self:
            return
        if turn != self._turn:
            self._turn, self._turn_calls = turn, 0
        self[call_id] = None
        self._turn_calls += 1
        # The newest turn's ids are the newest entries: all of them stay.
        while len(self) > RECENT_CALLS and len(self) > self._turn_calls:
            del self[next(iter(self))]

    def clear(self) -> None:
        super().clear()
        self._turn = None
        self._turn_calls = 0


class ClaudeReader:
    """Incremental reader for Claude Code transcripts; see the module docstring."""

    def __init__(
        self, subagent: bool = False, facts: FactListener = NO_FACTS, usage: bool = True
    ) -> None:
        self._keep_sidechain = subagent
        #: The listener told every record of this reader's chain (the session digest).
        self.facts = facts
        #: False: only the listener's facts are wanted (`ctxd handoff`), no usage work is done.
        self.usage = usage
        self._lines = LineSplitter()
        self._final_id: str | None = None
        self._reported = Changes()
        self._calls = RecentCalls()
        self._baseline: int | None = None  # the first main-chain context: prompt and tools
        self._estimating: str | None = None  # a boundary without postTokens, until its summary

    def feed(self, data: bytes) -> list[UsageUpdate]:
        """Consume the next bytes of the file; return the usage updates they completed (and
        hand the records to the listener, then flush it)."""
        updates: list[UsageUpdate] = []
        facts = self.facts
        every = facts.wants_records
        take = facts.take
        keep_sidechain = self._keep_sidechain
        usage = self.usage
        for line in self._lines.feed(data):
            if _holds_nothing(line, keep_sidechain):  # measured: it pays, with or without facts
                continue
            if not every and not (
                _USAGE_KEY in line
                or _BOUNDARY in line
                or (self._estimating is not None and _SUMMARY_KEY in line)
            ):
                continue
            record = decode(line)
            if record is None or (record.get("isSidechain") is True and not keep_sidechain):
                continue
            update = self._on_record(record) if usage else None
            take(record)
            if update is not None:
                updates.append(update)
        facts.flush()
        return updates

    def reset(self) -> None:
        """Forget everything (the listener too): the file was truncated or replaced and is
        read again from 0."""
        self._lines.reset()
        self._final_id = None
        self._reported.reset()
        self._calls.clear()
        self._baseline = None
        self._estimating = None
        self.facts.reset()

    def saw_answer(self) -> bool:
        """Claude Code was not seen answering Stop before its transcript held the answer."""
        return True

    def saw_tool_use(self, tool_use_id: str) -> bool:
        """Whether a recent assistant message of this transcript made tool call `tool_use_id`.

        Claude Code writes its transcript lazily; a PostToolUse hook can arrive before the
        message that made the call is on disk, and is answered only once it is (or a bound).
        """
        return tool_use_id in self._calls

    def _on_record(self, record: dict[str, Any]) -> UsageUpdate | None:
        # A record of this reader's chain -> the update it makes, if it is to be reported.
        kind = record.get("type")
        if kind == "assistant":
            return self._on_assistant(record)
        if kind == "system" and record.get("subtype") == "compact_boundary":
            return self._on_boundary(record)
        if kind == "user" and record.get("isCompactSummary") is True:
            return self._on_summary(record)
        return None

    def _on_boundary(self, record: dict[str, Any]) -> UsageUpdate:
        metadata = record.get("compactMetadata")
        metadata = metadata if isinstance(metadata, dict) else {}
        post = count(metadata.get("postTokens"))
        uuid = record.get("uuid")
        turn_id = uuid if isinstance(uuid, str) else None
        auto = metadata.get("trigger") == "auto"
        self._estimating = (turn_id or "") if post is None else None
        tokens = post if post is not None else self._baseline or 0
        self._reported.is_new((tokens, 0, turn_id, None), force=True)
        return UsageUpdate(
            tokens=tokens,
            at=epoch_seconds(record.get("timestamp")),
            compaction=True,
            turn_id=turn_id,
            estimated=post is None,
            compacted_from=count(metadata.get("preTokens")) if auto else None,
        )

    def _on_summary(self, record: dict[str, Any]) -> UsageUpdate | None:
        if self._estimating is None:
            return None
        turn_id = self._estimating or None
        self._estimating = None
        message = record.get("message")
        content = message.get("content") if isinstance(message, dict) else None
        chars = len(content) if isinstance(content, str) else 0
        if isinstance(content, list):
            chars = sum(
                len(block["text"])
                for block in content
                if isinstance(block, dict) and isinstance(block.get("text"), str)
            )
        tokens = (self._baseline or 0) + chars // _CHARS_PER_TOKEN
        if not self._reported.is_new((tokens, 0, turn_id, None)):
            return None
        return UsageUpdate(
            tokens=tokens,
            at=epoch_seconds(record.get("timestamp")),
            turn_id=turn_id,
            estimated=True,
        )

    def _on_assistant(self, record: dict[str, Any]) -> UsageUpdate | None:
        if record.get("isApiErrorMessage") is True:
            return None
        message = record.get("message")
        if not isinstance(message, dict):
            return None
        # A message without a usage is none of Claude Code's responses (every one has one).
        usage = message.get("usage", _NO_USAGE)
        model = message.get("model")
        if usage is _NO_USAGE or model == _SYNTHETIC_MODEL:
            return None
        message_id = message.get("id")
        self._note_calls(message_id, message.get("content"))
        tokens = context_tokens(usage)
        if tokens is None:
            return None
        turn_id = message_id if isinstance(message_id, str) else None
        self._estimating = None
        if self._baseline is None and not self._keep_sidechain:
            self._baseline = tokens
        if message.get("stop_reason") is None:
            if turn_id is not None and turn_id == self._final_id:
                return None  # a partial copy written after the final one
        else:
            self._final_id = turn_id
        pending = count(usage.get("output_tokens")) or 0
        model = model if isinstance(model, str) else None
        # Streamed copies repeat the same figure for the same turn: they say nothing new.
        if not self._reported.is_new((tokens, pending, turn_id, model)):
            return None
        version = record.get("version")
        return UsageUpdate(
            tokens=tokens,
            at=epoch_seconds(record.get("timestamp")),
            model=model,
            turn_id=turn_id,
            pending=pending,
            agent_version=version if isinstance(version, str) else None,
        )

    def _note_calls(self, message_id: object, content: object) -> None:
        """Remember the ids of the tool calls in an assistant message's content blocks."""
        if isinstance(content, list):
            for block in content:
                if isinstance(block, dict) and block.get("type") == "tool_use":
                    call_id = block.get("id")
                    if isinstance(call_id, str):
                        self._calls.add(message_id, call_id)


def _holds_nothing(line: bytes, keep_sidechain: bool) -> bool:
    """Whether a line is known from its first bytes to hold neither usage nor a fact (in
    Claude Code's own layout; a line of any other layout is decoded): one that opens with its
    kind (request shapes and blobs, snapshots and other bookkeeping) other than the three that
    can, an attachment, or another chain's line."""
    if line[:_KIND_END] == _KIND_FIRST:
        return not line.startswith(_KINDS, _KIND_END)
    find = line.find
    return find(_ATTACHMENT, 0, _HEAD) >= 0 or (
        not keep_sidechain and find(_SIDECHAIN, 0, _HEAD) >= 0
    )


def context_tokens(usage: object) -> int | None:
    """Claude Code's context figure for an API `usage` object: input + cache_creation +
    cache_read (output excluded, as in its own `used_percentage`); None when the usage carries
    none of them. The statusline's `current_usage` has the same fields."""
    if not isinstance(usage, dict):
        return None
    total: int | None = None
    for key in _CONTEXT_KEYS:
        part = usage.get(key)
        if type(part) is int and part >= 0:  # a count (`lines.count`)
            total = part if total is None else total + part
    return total
