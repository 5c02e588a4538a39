"""The Claude Code digest's floor in CPython (issue 14): the same digest, its hot rules fused
into the usage reader's loop. An experiment for `digest_floor.py`, not code ctxd runs.

`FusedReader` is `ClaudeReader` carrying `ClaudeFacts` with everything a replay does per fact
inlined in one loop, written for speed and nothing else: one walk of an assistant message's
blocks folds its tool calls and remembers their ids; id-first and type-first results, Bash
commands and their outcomes and file touches write the `DigestBook`'s slots directly; the
book's counters are kept as local counts and added once per feed; `Command`s are built with
`tuple.__new__`. Rare paths (requests, todo lists, subagents, other tools' failures, odd
layouts) call the real code. It must compute exactly the digest and the usage updates of the
real readers: `check()` compares them on every sample and public Claude Code transcript, fed
whole, in 1 MiB and in 1,000-byte pieces, and `digest_floor.py` runs it before timing (this
file is written against the private names of `ctxd.agents.claude` and `ctxd.core.digest` as of
777f757: when they change, the check says so rather than a wrong figure being printed).
`FusedUsageReader` is the same loop without the facts: how much of the saving is the usage
side's.
"""

from __future__ import annotations

from pathlib import Path

from orjson import JSONDecodeError, loads

from ctxd.agents.claude import digest as cd
from ctxd.agents.claude import transcript as ct
from ctxd.agents.claude.digest import ClaudeFacts
from ctxd.agents.claude.transcript import ClaudeReader, context_tokens, judge_head
from ctxd.agents.digest import todo_status, todos_from
from ctxd.agents.lines import count, decode, epoch_seconds
from ctxd.core.digest import DEFAULT_LIMITS, Command, _clip, _first_line
from ctxd.core.events import UsageUpdate

_tnew = tuple.__new__
_SUMMARY = ct._SUMMARY
_USAGE_KEY = ct._USAGE_KEY
_BOUNDARY = ct._BOUNDARY
_SYNTH = ct._SYNTHETIC_MODEL
_USER_CONTENT = cd._USER_CONTENT
_UCE = cd._USER_CONTENT_END
_TYF = cd._TYPE_FIRST_LIST
_TYFE = len(_TYF)
_RESULT_TYPE = cd._RESULT_TYPE
_ID_KEY = cd._ID_KEY
_IDKE = len(_ID_KEY)
_ERR = cd._ERROR_FLAG
_TXT = cd._TEXT_BLOCK
_ECHO_TEXTS = cd._ECHO_TEXTS
_task_key = cd._task_key
_KIND = {
    "TaskUpdate": 3,
    "TaskCreate": 4,
    "TodoWrite": 5,
    "Task": 6,
    "Agent": 6,
    "Read": 0,
    "Edit": 1,
    "MultiEdit": 1,
    "NotebookEdit": 1,
    "Write": 2,
}
_UC_IDF = cd._USER_CONTENT + cd._ID_FIRST_LIST
_UC_IDFE = len(_UC_IDF)
_STRING_CONTENT = cd._STRING_CONTENT
_SCE = len(_STRING_CONTENT) - 1
_FAILED_ID = cd._FAILED_ID
_FIE = len(_FAILED_ID)
_ONE_BLOCK_END = cd._ONE_BLOCK_END
_EXIT = cd._EXIT
_STATUS_WORDS = {"pending": "pending", "in_progress": "in_progress", "completed": "completed"}
_BASH_P = ("Bash", "")
_CONTENT_KEYS = ("content",)
_L = DEFAULT_LIMITS
assert (_L.files, _L.commands, _L.todos, _L.todo_chars, _L.command_chars, _L.path_chars) == (
    30,
    10,
    20,
    160,
    240,
    300,
)


class FusedReader(ClaudeReader):
    def __init__(self, subagent: bool = False) -> None:
        super().__init__(subagent, ClaudeFacts(subagent))

    @property
    def digest(self):
        return self.facts.digest

    def feed(self, data: bytes) -> list[UsageUpdate]:
        facts = self.facts
        book = facts.book
        assert facts.limits is _L
        pending = facts.pending
        replies = facts._replies
        asks = facts._asks
        tool_uses = self._tool_uses
        files = book._files
        commands = book._commands
        take_user = facts.take_user
        tnew = _tnew
        Cmd = Command
        tc = cr = fd = cf = 0  # deltas: tool calls, commands run, files dropped, failed
        updates: list[UsageUpdate] = []
        keep_sidechain = self._keep_sidechain
        for line in self._lines.feed(data):
            estimating = self._estimating is not None
            if not estimating or _SUMMARY not in line:
                head = judge_head(line, keep_sidechain)
                if head == ct.HEAD_NOTHING:
                    continue
                if head >= 0:
                    # ---- a user line (take_user, inlined)
                    if line.startswith(_UC_IDF, head):
                        at = head + _UC_IDFE
                        end = line.find(b'"', at)
                        if not line.startswith(_RESULT_TYPE, end):
                            facts._take(line)
                            continue
                    elif not line.startswith(_USER_CONTENT, head):
                        facts._take(line)
                        continue
                    elif line.startswith(_TYF, head + _UCE):
                        at0 = at = head + _UCE + _TYFE
                        end = -1
                        if line.startswith(_ID_KEY, at) and _ERR not in line and _TXT not in line:
                            at += _IDKE
                            end = line.find(b'"', at)
                        if end < 0:
                            # _took_failure, inlined
                            if line.startswith(_STRING_CONTENT, at0):
                                at = at0 + _SCE
                                end = line.find(_FAILED_ID, at)
                                if end >= 0:
                                    id_at = end + _FIE
                                    id_end = line.find(b'"', id_at)
                                    if line.startswith(_ONE_BLOCK_END, id_end):
                                        cid = line[id_at:id_end].decode("utf-8", "replace")
                                        try:
                                            text = loads(line[at:end])
                                        except JSONDecodeError:
                                            text = None
                                        if type(text) is str and "\\" not in cid:
                                            call = pending.pop(cid, None)
                                            if call is None:
                                                continue
                                            tool = call[0]
                                            if tool != "Bash":
                                                facts._failed(cid, tool, call[1], text)
                                                continue
                                            found = _EXIT.match(text)
                                            if found:
                                                exit_code = int(found.group(1))
                                                text = text[found.end() :]
                                            else:
                                                exit_code = None
                                            i = len(commands)
                                            while i:
                                                i -= 1
                                                c = commands[i]
                                                if c[1] == cid:
                                                    if c[2] is None:
                                                        done = tnew(
                                                            Cmd,
                                                            (
                                                                c[0],
                                                                None,
                                                                True,
                                                                exit_code,
                                                                _first_line(text, 240),
                                                            ),
                                                        )
                                                        commands[i] = done
                                                        book._failed = (*book._failed[-5:], done)
                                                        cf += 1
                                                    break
                                            else:
                                                if text:
                                                    book._errors = (
                                                        *book._errors[-5:],
                                                        _clip(text, 240),
                                                    )
                                            continue
                            facts._decoded(line)
                            continue
                    elif line.startswith(b'"', head + _UCE):
                        if not line.startswith(_ECHO_TEXTS, head + _UCE):
                            asks.append((line, head + _UCE))
                        continue
                    else:
                        take_user(line, head)
                        continue
                    # a success: the call's id is line[at:end]
                    cid = line[at:end].decode("utf-8", "replace")
                    if "\\" in cid:  # an escape in the id: the original's fallbacks
                        if line.startswith(_UC_IDF, head):
                            facts._take(line)
                        elif not facts._took_failure(line, at0):
                            facts._decoded(line)
                        continue
                    call = pending.pop(cid, None)
                    if call is not None:
                        tool = call[0]
                        if tool == "Bash":
                            i = len(commands)
                            while i:
                                i -= 1
                                c = commands[i]
                                if c[1] == cid:
                                    if c[2] is None:
                                        commands[i] = tnew(Cmd, (c[0], None, False, 0, ""))
                                    break
                        elif tool == "TaskCreate" and call[1]:
                            book.todo(call[1], "pending", _task_key(line, end))
                    continue
            if not (_USAGE_KEY in line or _BOUNDARY in line or (estimating and _SUMMARY in line)):
                if line:
                    facts.take_unjudged(line)
                continue
            record = decode(line)
            if record is None or (record.get("isSidechain") is True and not keep_sidechain):
                continue
            kind = record.get("type")
            if kind != "assistant":
                facts.take_record(record, line)
                update = self._on_other(record, kind)
            else:
                # ---- _on_assistant with take_assistant and _remember fused in
                error = record.get("isApiErrorMessage")
                if error is True:
                    continue
                message = record.get("message")
                if not isinstance(message, dict):
                    continue
                model = message.get("model")
                if not error:
                    content = message.get("content")
                    if type(content) is list:
                        remember = model != _SYNTH
                        mine = 0
                        for block in content:
                            try:
                                kind = block.get("type")
                            except AttributeError:
                                continue  # not an object
                            if kind == "text":
                                text = block.get("text")
                                if type(text) is str:
                                    replies.append(text)
                                continue
                            if kind != "tool_use":
                                continue
                            cid = block.get("id")
                            if type(cid) is not str or not cid:
                                if type(cid) is not str:
                                    facts._tool_use(block, None)
                                elif cid not in tool_uses:  # "" : folded, remembered
                                    facts._tool_use(block, cid)
                                    if remember:
                                        tool_uses[cid] = None
                                        mine += 1
                                elif mine and cid in list(tool_uses)[-mine:]:
                                    facts._tool_use(block, cid)
                                continue
                            if cid in tool_uses:
                                # a streamed copy folded in already, unless this message's own
                                if mine and cid in list(tool_uses)[-mine:]:
                                    facts._tool_use(block, cid)
                                continue
                            if remember:
                                tool_uses[cid] = None
                                mine += 1
                            name = block.get("name")
                            args = block.get("input")
                            if type(args) is not dict:
                                args = {}
                            if name == "Bash":
                                pending[cid] = _BASH_P
                                if len(pending) > 16:
                                    del pending[next(iter(pending))]
                                text = args.get("command") or ""
                                if type(text) is not str:
                                    text = str(text)
                                if len(text) > 480:
                                    text = _clip(text, 240)
                                else:
                                    text = text.strip()
                                    if len(text) > 240:
                                        text = text[:239].rstrip() + "…"
                                commands.append(tnew(Cmd, (text, cid, None, None, "")))
                                if len(commands) > 10:
                                    del commands[0]
                                cr += 1
                                tc += 1
                                continue
                            path = args.get("file_path") or args.get("notebook_path")
                            if type(path) is not str:
                                path = ""
                            if path:
                                pending[cid] = (name, path)
                            else:
                                about = args.get("subject") or ""
                                pending[cid] = (name, about if type(about) is str else str(about))
                            if len(pending) > 16:
                                del pending[next(iter(pending))]
                            try:
                                use = _KIND.get(name)
                            except TypeError:
                                use = None
                            if use is None:
                                if type(name) is not str:  # as the original names it
                                    pending[cid] = (str(name or ""), pending[cid][1])
                                tc += 1
                            elif use < 3:
                                if path:
                                    if len(path) > 300 or path.strip() is not path:
                                        path = _clip(path, 300)
                                    uses = files.pop(path, None)
                                    if uses is None:
                                        uses = [0, 0, 0]
                                        if len(files) >= 30:
                                            del files[next(iter(files))]
                                            fd += 1
                                    uses[use] += 1
                                    files[path] = uses
                                    tc += 1
                            elif use == 3:  # TaskUpdate
                                key = args.get("taskId")
                                if isinstance(key, str | int):
                                    subject = args.get("subject")
                                    status = args.get("status")
                                    status = (
                                        _STATUS_WORDS.get(status) if type(status) is str else None
                                    ) or todo_status(status)
                                    book.todo(
                                        subject if isinstance(subject, str) else "",
                                        status,
                                        str(key),
                                    )
                                else:
                                    tc += 1
                            elif use == 4:  # TaskCreate
                                pass
                            elif use == 5:  # TodoWrite
                                book.todos(todos_from(args.get("todos"), _CONTENT_KEYS))
                            else:  # Task, Agent
                                about = (
                                    args.get("description")
                                    or args.get("subagent_type")
                                    or args.get("prompt")
                                )
                                book.subagent(str(about or ""))
                        if mine:
                            turn = message.get("id")
                            if turn != self._turn:
                                self._turn = turn
                                self._turn_calls = mine
                            else:
                                self._turn_calls += mine
                            keep = self._turn_calls if self._turn_calls > 16 else 16
                            while len(tool_uses) > keep:
                                del tool_uses[next(iter(tool_uses))]
                if model == _SYNTH:
                    continue
                update = self._usage_tail(record, message, model)
            if update is None:
                continue
            key = (update.tokens, update.pending, update.turn_id, update.model)
            if self._reported.is_new(key, force=update.compaction):
                updates.append(update)
        if tc:
            book._tool_calls += tc
        if cr:
            book._commands_run += cr
        if fd:
            book._files_dropped += fd
        if cf:
            book._commands_failed += cf
        book._snapshot = None
        facts.flush()
        return updates

    def _usage_tail(self, record, message, model):
        # `_on_assistant` from its context figure on, unchanged.
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
                return None
        else:
            self._final_id = turn_id
        usage = message.get("usage")
        output = count(usage.get("output_tokens")) if isinstance(usage, dict) else None
        return UsageUpdate(
            tokens=tokens,
            at=epoch_seconds(record.get("timestamp")),
            model=model if isinstance(model, str) else None,
            turn_id=turn_id,
            pending=output or 0,
        )


class FusedUsageReader(ClaudeReader):
    """The fused loop's usage side alone (no facts): the same structure, digest lines removed.
    Not part of the floor: shows how much of `FusedReader`'s saving is usage-side."""

    def feed(self, data: bytes) -> list[UsageUpdate]:
        tool_uses = self._tool_uses
        updates: list[UsageUpdate] = []
        keep_sidechain = self._keep_sidechain
        for line in self._lines.feed(data):
            estimating = self._estimating is not None
            if (not estimating or _SUMMARY not in line) and judge_head(
                line, keep_sidechain
            ) != ct.HEAD_MAY_CARRY:
                continue
            if not (_USAGE_KEY in line or _BOUNDARY in line or (estimating and _SUMMARY in line)):
                continue
            record = decode(line)
            if record is None or (record.get("isSidechain") is True and not keep_sidechain):
                continue
            kind = record.get("type")
            if kind != "assistant":
                update = self._on_other(record, kind)
            else:
                error = record.get("isApiErrorMessage")
                if error is True:
                    continue
                message = record.get("message")
                if not isinstance(message, dict):
                    continue
                model = message.get("model")
                if model == _SYNTH:
                    continue
                content = message.get("content")
                if type(content) is list:
                    mine = 0
                    for block in content:
                        if type(block) is not dict:
                            continue
                        if block.get("type") != "tool_use":
                            continue
                        cid = block.get("id")
                        if type(cid) is not str or cid in tool_uses:
                            continue
                        tool_uses[cid] = None
                        mine += 1
                    if mine:
                        turn = message.get("id")
                        if turn != self._turn:
                            self._turn = turn
                            self._turn_calls = mine
                        else:
                            self._turn_calls += mine
                        keep = self._turn_calls if self._turn_calls > 16 else 16
                        while len(tool_uses) > keep:
                            del tool_uses[next(iter(tool_uses))]
                update = self._usage_tail(record, message, model)
            if update is None:
                continue
            key = (update.tokens, update.pending, update.turn_id, update.model)
            if self._reported.is_new(key, force=update.compaction):
                updates.append(update)
        return updates

    _usage_tail = FusedReader._usage_tail


DATA = Path(__file__).resolve().parent.parent / "tests" / "data"


def check(extra: list[Path] | None = None) -> list[str]:
    """What differs between `FusedReader` and the real readers (the digest, the usage updates)
    on every sample and public Claude Code transcript and `extra`, as main session and as
    subagent, fed whole, in 1 MiB and in 1,000-byte pieces; [] when nothing does."""
    paths = [
        p
        for p in sorted((DATA / "transcripts").glob("claude-code-*/*.jsonl"))
        if "subagents" not in p.parts
    ]
    paths += sorted((DATA / "public" / "claude").rglob("*.jsonl"))
    paths += extra or []
    differ = []
    for path in paths:
        data = path.read_bytes()
        for subagent in (False, True):
            for size in (len(data) + 1, 1 << 20, 1000):
                real, fused = ClaudeReader(subagent, ClaudeFacts(subagent)), FusedReader(subagent)
                alone = ClaudeReader(subagent)
                same_updates = True
                for i in range(0, len(data), size):
                    piece = data[i : i + size]
                    same_updates &= fused.feed(piece) == alone.feed(piece)
                    real.feed(piece)
                assert real.facts is not None
                if not same_updates or real.facts.digest != fused.digest:
                    differ.append(f"{path.name} (subagent={subagent}, pieces of {size} bytes)")
    return differ
