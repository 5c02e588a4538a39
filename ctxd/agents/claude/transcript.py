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

Only lines that can carry usage are decoded. Claude Code 2.1.332 writes attachment, request-shape
and blob lines of 10-60 KB; a substring test on the raw bytes rejects them before any JSON work.
`"usage"` with its quotes can only occur as a real key, since quotes inside JSON strings are
escaped; other line kinds that happen to contain it (tool results) are decoded and then dropped.

Every line's head is judged first (`judge_head`): most lines (user, progress and attachment
lines, request-shapes, blobs and other bookkeeping) are known from it to carry no usage and are
neither searched for it nor decoded; the rest are searched as above. Given `facts` (the session
digest, `digest.py`), the same pass keeps them too: a user line known from its head is handed
over (`take_user`), an assistant message decoded for usage hands over its content
(`take_assistant`: one walk of its blocks for both, the facts folding the tool calls not
remembered yet and the reader remembering those), any other line decoded is handed over
decoded (`take_record`), any other searched line to `take_unjudged`. While a compaction's
summary is awaited for its usage, a line holding one is decoded as above.

`saw_tool_use` answers from the ids of the recent tool calls: all of the newest model turn's and
the last `_TOOL_USES_KEPT` overall. That is enough: Claude Code runs a PostToolUse hook before it
sends the call's result back to the model, so no later turn can be written before the hook is
answered; the hook asks about a call of the newest turn that made calls (a turn's parallel calls
are written one line per call, under one message id), or of one not written yet. The older ids
are slack that argument does not need. (Before issue 14 the last 256 were kept: about 20 KiB a
session, a third of the daemon's memory with 1,000 tool-heavy sessions.)
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ctxd.agents.lines import Changes, LineSplitter, count, decode, epoch_seconds
from ctxd.core.events import UsageUpdate

if TYPE_CHECKING:
    from ctxd.agents.claude.digest import ClaudeFacts

__all__ = ["HEAD_MAY_CARRY", "HEAD_NOTHING", "ClaudeReader", "context_tokens", "judge_head"]

_USAGE_KEY = b'"usage"'
#: How many recent tool calls a reader remembers (for `saw_tool_use`), beyond the newest turn's.
_TOOL_USES_KEPT = 16
_BOUNDARY = b"compact_boundary"
_SUMMARY = b'"isCompactSummary":true'
#: The usual rough rate for English text and code: about four characters per token.
_CHARS_PER_TOKEN = 4
_SYNTHETIC_MODEL = "<synthetic>"

# What a line's head tells (`judge_head`).
_OTHER = b'{"type":"'  # compact JSON, as Claude Code writes it; any other layout is searched
_PARENT = b'{"parentUuid":'
_OTHER_END = len(_OTHER)
_PARENT_END = len(_PARENT)
_MESSAGE = b'"message":{'
_MAIN_CHAIN = b'"isSidechain":false,'
_SIDE_CHAIN = b'"isSidechain":true,'
_ATTACHMENT_KEY = b'"attachment":'
_TYPE_KEY = b'"type":"'
_USER_KIND = b'user"'
_ASSISTANT_KIND = b'assistant"'
_SYSTEM_KIND = b'system"'
# `{"type":"<kind>"` lines of these kinds are searched and decoded as any line whose head is not
# known.
_OTHER_KINDS_KEPT = (_USER_KIND, _ASSISTANT_KIND, _SYSTEM_KIND)
#: How far an older layout's `"type"` is looked for: after a working directory's path.
_TYPE_WINDOW = 1024
#: `judge_head`: the line may carry usage, or its head does not tell.
HEAD_MAY_CARRY = -1
#: `judge_head`: the line carries neither usage nor a fact of the session.
HEAD_NOTHING = -2


class ClaudeReader:
    """Incremental reader for Claude Code transcripts; see the module docstring."""

    def __init__(self, subagent: bool = False, facts: ClaudeFacts | None = None) -> None:
        self._keep_sidechain = subagent
        #: The session digest kept in the same pass, if any.
        self.facts = facts
        self._lines = LineSplitter()
        self._final_id: str | None = None
        self._reported = Changes()
        self._tool_uses: dict[str, None] = {}  # insertion-ordered set of recent tool_use ids
        self._turn: object = None  # the message id of the newest turn that made tool calls
        self._turn_calls = 0  # how many of the newest `_tool_uses` that turn made
        if facts is not None:
            facts.calls_seen = self._tool_uses
        self._baseline: int | None = None  # the first main-chain context: prompt and tools
        self._estimating: str | None = None  # a boundary without postTokens, until its summary

    def feed(self, data: bytes) -> list[UsageUpdate]:
        """Consume the next bytes of the file; return the usage updates they completed."""
        if self.facts is not None:
            return self._feed_both(data, self.facts)
        updates: list[UsageUpdate] = []
        keep_sidechain = self._keep_sidechain
        for line in self._lines.feed(data):
            estimating = self._estimating is not None
            # Most lines are known from their head to carry no usage: not searched for it.
            # A summary awaited for its usage is decoded.
            if (not estimating or _SUMMARY not in line) and judge_head(
                line, keep_sidechain
            ) != HEAD_MAY_CARRY:
                continue
            wanted = _USAGE_KEY in line or _BOUNDARY in line
            if not wanted and (not estimating or _SUMMARY not in line):
                continue
            update = self._on_record(decode(line))
            if update is None:
                continue
            # Streamed copies repeat the same figure for the same turn: they say nothing new.
            key = (update.tokens, update.pending, update.turn_id, update.model)
            if self._reported.is_new(key, force=update.compaction):
                updates.append(update)
        return updates

    def _feed_both(self, data: bytes, facts: ClaudeFacts) -> list[UsageUpdate]:
        # The loop above, with the digest's lines handed over (see the module docstring).
        updates: list[UsageUpdate] = []
        keep_sidechain = self._keep_sidechain
        take_user = facts.take_user
        take_record = facts.take_record
        for line in self._lines.feed(data):
            estimating = self._estimating is not None
            if not estimating or _SUMMARY not in line:
                head = judge_head(line, keep_sidechain)
                if head >= 0:
                    take_user(line, head)  # a user line: its facts, and no usage
                    continue
                if head == HEAD_NOTHING:
                    continue
            if not (_USAGE_KEY in line or _BOUNDARY in line or (estimating and _SUMMARY in line)):
                if line:
                    facts.take_unjudged(line)
                continue
            record = decode(line)
            if record is None or (record.get("isSidechain") is True and not keep_sidechain):
                continue
            kind = record.get("type")
            if kind == "assistant":
                update = self._on_assistant(record, facts)
            else:
                take_record(record, line)
                update = self._on_other(record, kind)
            if update is None:
                continue
            key = (update.tokens, update.pending, update.turn_id, update.model)
            if self._reported.is_new(key, force=update.compaction):
                updates.append(update)
        facts.flush()
        return updates

    def reset(self) -> None:
        """Forget everything: the file was truncated or replaced and is read again from 0."""
        self._lines.reset()
        self._final_id = None
        self._reported.reset()
        self._tool_uses.clear()
        self._turn = None
        self._turn_calls = 0
        self._baseline = None
        self._estimating = None
        if self.facts is not None:
            self.facts.reset()

    def saw_answer(self) -> bool:
        """Claude Code was not seen answering Stop before its transcript held the answer."""
        return True

    def saw_tool_use(self, tool_use_id: str) -> bool:
        """Whether a recent assistant message of this transcript made tool call `tool_use_id`.

        Claude Code writes its transcript lazily; a PostToolUse hook can arrive before the
        message that made the call is on disk, and is answered only once it is (or a bound).
        """
        return tool_use_id in self._tool_uses

    def _remember_tool_uses(self, turn: object, content: object) -> None:
        if not isinstance(content, list):
            return
        ids = [
            block.get("id")
            for block in content
            if isinstance(block, dict) and block.get("type") == "tool_use"
        ]
        self._remember(turn, [i for i in ids if isinstance(i, str)])

    def _remember(self, turn: object, tool_use_ids: list[str]) -> None:
        """Remember the ids of a message's tool calls (`turn`: its message id)."""
        tool_uses = self._tool_uses
        for tool_use_id in tool_use_ids:
            if tool_use_id not in tool_uses:
                if turn != self._turn:
                    self._turn, self._turn_calls = turn, 0
                tool_uses[tool_use_id] = None
                self._turn_calls += 1
        # The newest turn's ids are the newest entries: all of them stay (see the docstring).
        while len(tool_uses) > max(_TOOL_USES_KEPT, self._turn_calls):
            del tool_uses[next(iter(tool_uses))]

    def _on_record(self, record: dict[str, Any] | None) -> UsageUpdate | None:
        if record is None or (record.get("isSidechain") is True and not self._keep_sidechain):
            return None
        kind = record.get("type")
        if kind == "assistant":
            return self._on_assistant(record)
        return self._on_other(record, kind)

    def _on_other(self, record: dict[str, Any], kind: object) -> UsageUpdate | None:
        # A main-chain record other than an assistant message.
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
        return UsageUpdate(
            tokens=post if post is not None else self._baseline or 0,
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
        return UsageUpdate(
            tokens=(self._baseline or 0) + chars // _CHARS_PER_TOKEN,
            at=epoch_seconds(record.get("timestamp")),
            turn_id=turn_id,
            estimated=True,
        )

    def _on_assistant(
        self, record: dict[str, Any], facts: ClaudeFacts | None = None
    ) -> UsageUpdate | None:
        error = record.get("isApiErrorMessage")
        if error is True:
            return None
        message = record.get("message")
        if not isinstance(message, dict):
            return None
        if facts is None:
            model = message.get("model")
            if model == _SYNTHETIC_MODEL:
                return None
            self._remember_tool_uses(message.get("id"), message.get("content"))
        else:
            # One walk of the blocks for both: the facts fold the calls not remembered yet
            # (a synthetic message's too), and those are the ones to remember.
            folded = None if error else facts.take_assistant(message.get("content"))
            model = message.get("model")
            if model == _SYNTHETIC_MODEL:
                return None
            if folded is not None:
                self._remember(message.get("id"), folded)
        tokens = context_tokens(message.get("usage"))
        if tokens is None:
            return None
        message_id = message.get("id")
        turn_id = message_id if isinstance(message_id, str) else None
        self._estimating = None
        if self._baseline is None and not self._keep_sidechain:
            self._baseline = tokens
        if message.get("stop_reason") is None:
            if turn_id is not None and turn_id == self._final_id:
                return None  # a partial copy written after the final one
        else:
            self._final_id = turn_id
        usage = message.get("usage")
        output = count(usage.get("output_tokens")) if isinstance(usage, dict) else None
        version = record.get("version")
        return UsageUpdate(
            tokens=tokens,
            at=epoch_seconds(record.get("timestamp")),
            model=model if isinstance(model, str) else None,
            turn_id=turn_id,
            pending=output or 0,
            agent_version=version if isinstance(version, str) else None,
        )


def context_tokens(usage: object) -> int | None:
    """Claude Code's context figure for an API `usage` object: input + cache_creation +
    cache_read (output excluded, as in its own `used_percentage`); None when the usage carries
    none of them. The statusline's `current_usage` has the same fields."""
    if not isinstance(usage, dict):
        return None
    parts = [
        count(usage.get("input_tokens")),
        count(usage.get("cache_creation_input_tokens")),
        count(usage.get("cache_read_input_tokens")),
    ]
    if all(part is None for part in parts):
        return None
    return sum(part for part in parts if part is not None)


def judge_head(line: bytes, keep_sidechain: bool) -> int:
    """What a Claude Code transcript line's head tells: `HEAD_MAY_CARRY` (an assistant or
    compaction line, or a head not known: search it for usage), `HEAD_NOTHING` (bookkeeping,
    attachments, progress and other system lines, another chain's lines), or, for a user line
    (which carries no usage), where its own `"type"` value starts."""
    # Compared as slices: cheaper than `startswith` on 3.11.
    if line[:_OTHER_END] == _OTHER:
        # `{"type":"<kind>",…`: request shapes, blobs, snapshots and other bookkeeping.
        return HEAD_MAY_CARRY if line.startswith(_OTHER_KINDS_KEPT, _OTHER_END) else HEAD_NOTHING
    if line[:_PARENT_END] != _PARENT:
        return HEAD_MAY_CARRY
    # `{"parentUuid":null|"<uuid>","isSidechain":…,` then, in Claude Code 2.1.5x and later,
    # `"attachment"`, `"message"`, `"promptId"` or `"type"`; before it, `"userType"`, the
    # working directory and a few more plain strings. The uuid's length is found, not assumed.
    at = 19 if line[_PARENT_END:19] == b"null," else line.find(b'"', 15) + 2
    if line.startswith(_MAIN_CHAIN, at):
        at += len(_MAIN_CHAIN)
    elif line.startswith(_SIDE_CHAIN, at):
        if not keep_sidechain:
            return HEAD_NOTHING  # a subagent's: neither its usage nor its facts are the session's
        at += len(_SIDE_CHAIN)
    else:
        return HEAD_MAY_CARRY
    if line.startswith(_ATTACHMENT_KEY, at):
        return HEAD_NOTHING
    if line.startswith(_MESSAGE, at):
        return HEAD_MAY_CARRY  # an assistant line
    kind = line.find(_TYPE_KEY, at, _TYPE_WINDOW)
    if kind < 0 or line.find(b"{", at, kind) >= 0:
        # No `"type"` in the head, or not the line's own but inside an object: an assistant
        # line (`"message":{` first) or a layout not known.
        return HEAD_MAY_CARRY
    kind += len(_TYPE_KEY)
    if line.startswith(_USER_KIND, kind):
        return kind
    if line.startswith(_ASSISTANT_KIND, kind):
        return HEAD_MAY_CARRY
    if line.startswith(_SYSTEM_KIND, kind):
        # only a compaction's system line carries usage
        return HEAD_MAY_CARRY if _BOUNDARY in line else HEAD_NOTHING
    return HEAD_NOTHING  # progress lines, and any other kind, hold neither usage nor a fact
