"""A session's digest: the facts of a session, drafted from its transcript with no model call.

What a compaction summary or a hurried handoff note loses is the thread: which files were
touched, which commands failed, what the user last asked, which todos are open. Each agent's
digest reader (`ctxd.agents.<agent>.digest`) folds the facts of its transcript lines into a
`DigestBook` (in place, one method per kind of fact, or `add` for a `DigestEvent`), whose
`digest` is the `Digest` value; `apply` is one event folded into a value. `render_markdown` and
`render_compact` turn a digest into the handoff note and the note injected after a compaction.

`Digest` and its parts are values, the book the one mutable thing, and every collection is
bounded (`Limits`): a session's digest stays the same size however long the session runs.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from operator import attrgetter
from typing import Any, Literal, NamedTuple, TypeVar

__all__ = [
    "COMPACT_HEADER",
    "Command",
    "Digest",
    "DigestBook",
    "DigestEvent",
    "DigestKind",
    "FileUse",
    "Limits",
    "Todo",
    "apply",
    "as_json",
    "estimate_tokens",
    "is_request",
    "render_compact",
    "render_markdown",
    "without_injected",
]

T = TypeVar("T")

DigestKind = Literal[
    "ask",  # a request the user typed (`text`)
    "reply",  # the assistant's text to the user (`text`)
    "read",  # a file read (`text`: its path)
    "edit",  # a file edited in place
    "write",  # a file written whole (created or replaced)
    "command",  # a shell command run (`text`), its result to come under `call_id`
    "result",  # a tool call's outcome (`call_id`, `failed`, `exit_code`, `text`: the error)
    "todos",  # the whole todo list, as the agent wrote it (`todos`)
    "todo",  # todo items added or changed one by one, by their `key` (`todos`: those items)
    "subagent",  # a subagent spawned (`text`: what for)
    "tool",  # any other tool call (`text`: the tool's name)
    "compaction",  # the agent compacted its context
]

#: How the note injected after a compaction begins (so a reader can tell ctxd wrote it).
COMPACT_HEADER = "[ctxd continuity]"

_CHARS_PER_TOKEN = 4  # the usual rough rate for English text and code
#: How ctxd's own texts begin: an agent that records a hook's text as a user message (Gemini CLI
#: does, for a Stop hook's reason) must not make it the user's last request.
_FILE_KINDS = frozenset({"read", "edit", "write"})
_OWN_TEXTS = ("CONTEXT HANDOFF:", "CONTEXT WARNING:", "CONTEXT CRITICAL:", COMPACT_HEADER)


@dataclass(frozen=True, slots=True)
class Limits:
    """How much a digest keeps: the newest items of each kind, each text clipped."""

    asks: int = 5
    files: int = 30
    commands: int = 10
    failed: int = 6
    errors: int = 6
    todos: int = 20
    subagents: int = 8
    ask_chars: int = 600
    first_ask_chars: int = 1200
    reply_chars: int = 600
    command_chars: int = 240
    error_chars: int = 240
    todo_chars: int = 160
    path_chars: int = 300


DEFAULT_LIMITS = Limits()


class Todo(NamedTuple):
    text: str
    #: "pending", "in_progress" or "completed" (the agents' own words are mapped to these).
    status: str = "pending"
    #: The agent's id for the item, when it updates items one by one.
    key: str | None = None

    @property
    def open(self) -> bool:
        return self.status != "completed"


class DigestEvent(NamedTuple):
    kind: DigestKind
    text: str = ""
    call_id: str | None = None
    #: For "result": the tool failed (a non-zero exit, an error the tool returned).
    failed: bool = False
    exit_code: int | None = None
    todos: tuple[Todo, ...] = ()


class FileUse(NamedTuple):
    path: str
    reads: int = 0
    edits: int = 0
    writes: int = 0


class Command(NamedTuple):
    text: str
    call_id: str | None = None
    #: None until its result is seen.
    failed: bool | None = None
    exit_code: int | None = None
    #: The first line of what it printed when it failed.
    error: str = ""
    #: It failed, and a later run of the same command succeeded.
    fixed: bool = False


class Digest(NamedTuple):
    """The facts of one session so far; `Digest()` is a session with nothing yet."""

    first_ask: str | None = None
    #: The last few requests, oldest first.
    asks: tuple[str, ...] = ()
    #: Files touched, least recently touched first.
    files: tuple[FileUse, ...] = ()
    files_dropped: int = 0
    #: The last commands, oldest first, with their outcome once known.
    commands: tuple[Command, ...] = ()
    commands_run: int = 0
    #: The last failed commands, oldest first (kept apart: a run of good commands must not
    #: push a failure out).
    failed: tuple[Command, ...] = ()
    commands_failed: int = 0
    #: The latest todo list (None: the agent never kept one).
    todos: tuple[Todo, ...] | None = None
    #: Errors tools returned (other than failed commands), oldest first.
    errors: tuple[str, ...] = ()
    last_reply: str | None = None
    subagents: tuple[str, ...] = ()
    subagents_spawned: int = 0
    compactions: int = 0
    tool_calls: int = 0


def _clip(text: str, limit: int) -> str:
    """`text` stripped, cut to `limit` characters (the last one "…" when cut)."""
    if len(text) > 2 * limit:
        # A long text (a file's worth of reply or output) is stripped only as far as it is
        # kept: if its first 2 * limit characters hold more than `limit` once stripped, so
        # does the whole, and the cut is the same.
        head = text[: 2 * limit].strip()
        if len(head) > limit:
            return head[: limit - 1].rstrip() + "…"
    text = text.strip()
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


def _first_line(text: str, limit: int) -> str:
    """The first line of `text` that is not blank, clipped to `limit`."""
    text = text.lstrip()  # its first line is then not blank, if it has one
    # Split only a window of it, unless the first line runs past the window.
    window = text[: 4 * limit]
    lines = window.splitlines()
    if len(lines) == 1 and len(window) < len(text):
        lines = text.splitlines()
    return _clip(lines[0], limit) if lines else ""


_todo_key = attrgetter("key")


def _pushed(items: tuple[T, ...], item: T, keep: int) -> tuple[T, ...]:
    """`items` with `item` added at the end, the oldest dropped beyond `keep`."""
    return (*items[max(0, len(items) - keep + 1) :], item)


@lru_cache(maxsize=8)
def _injected_blocks(tags: frozenset[str]) -> re.Pattern[str]:
    names = "|".join(sorted(map(re.escape, tags)))
    # A block closed by its own tag, or one never closed (cut short): to the end of the text.
    return re.compile(rf"<({names})(?:\s[^>]*)?>(?:.*?</\1\s*>|.*\Z)", re.DOTALL)


def without_injected(text: str, tags: frozenset[str]) -> str:
    """`text` without the blocks that an agent's harness wraps in one of `tags` (`<tag>…</tag>`:
    reminders, notifications, a local command's echo and output) and adds to a user message,
    stripped: what the user typed, or "" when all of it was the harness's."""
    if not tags or "<" not in text:
        return text.strip()
    return _injected_blocks(tags).sub("", text).strip()


def is_request(text: str) -> bool:
    """Whether an "ask" event's text counts as a request (not empty, not one of ctxd's own
    texts that an agent recorded as a user message)."""
    text = text.strip()
    return bool(text) and not text.startswith(_OWN_TEXTS)


class DigestBook:
    """A session's digest being kept: facts are folded in place, in O(1) each (a transcript
    replay folds one per tool call, and rebuilding an immutable `Digest` for each cost more
    than reading the line did); `digest` is the value, built when asked for and kept until the
    next fact. Every collection is bounded by `Limits`, as in the `Digest` it builds."""

    __slots__ = (
        "_asks",
        "_commands",
        "_commands_failed",
        "_commands_run",
        "_compactions",
        "_errors",
        "_failed",
        "_files",
        "_files_dropped",
        "_first_ask",
        "_last_reply",
        "_mark_fixed",
        "_snapshot",
        "_subagents",
        "_subagents_spawned",
        "_todos",
        "_tool_calls",
        "limits",
    )

    def __init__(
        self,
        limits: Limits = DEFAULT_LIMITS,
        start: Digest | None = None,
        *,
        mark_fixed: bool = False,
    ) -> None:
        self.limits = limits
        #: A failed command is marked `fixed` when a later run of the same command succeeds.
        self._mark_fixed = mark_fixed
        d = start or Digest()
        self._first_ask = d.first_ask
        # The bounded lists are tuples: the digest value shares them, and they take the
        # least memory (a daemon keeps a book per session).
        self._asks = d.asks
        #: path -> [reads, edits, writes], least recently touched first.
        self._files: dict[str, list[int]] = {f.path: [f.reads, f.edits, f.writes] for f in d.files}
        self._files_dropped = d.files_dropped
        # The commands change with every command run and result: a list, changed in place.
        self._commands: list[Command] = list(d.commands)
        self._commands_run = d.commands_run
        self._failed = d.failed
        self._commands_failed = d.commands_failed
        self._todos: list[Todo] | None = None if d.todos is None else list(d.todos)
        self._errors = d.errors
        self._last_reply = d.last_reply
        self._subagents = d.subagents
        self._subagents_spawned = d.subagents_spawned
        self._compactions = d.compactions
        self._tool_calls = d.tool_calls
        self._snapshot: Digest | None = start

    @property
    def digest(self) -> Digest:
        snapshot = self._snapshot
        if snapshot is None:
            files = tuple(FileUse(path, *uses) for path, uses in self._files.items())
            todos = None if self._todos is None else tuple(self._todos)
            snapshot = self._snapshot = Digest(
                self._first_ask,
                self._asks,
                files,
                self._files_dropped,
                tuple(self._commands),
                self._commands_run,
                self._failed,
                self._commands_failed,
                todos,
                self._errors,
                self._last_reply,
                self._subagents,
                self._subagents_spawned,
                self._compactions,
                self._tool_calls,
            )
        return snapshot

    @property
    def compactions(self) -> int:
        return self._compactions

    @property
    def first_ask(self) -> str | None:
        return self._first_ask

    # ------------------------------------------------------------------ facts

    def ask(self, text: str) -> None:
        """A request the user typed (ctxd's own texts and empty ones are not)."""
        if not is_request(text):
            return
        text = text.strip()
        if self._first_ask is None:
            self._first_ask = _clip(text, self.limits.first_ask_chars)
        self._asks = _pushed(self._asks, _clip(text, self.limits.ask_chars), self.limits.asks)
        self._snapshot = None

    def reply(self, text: str) -> None:
        if text.strip():
            self._last_reply = _clip(text, self.limits.reply_chars)
            self._snapshot = None

    def touch(self, path: str, kind: str) -> None:
        """A file read ("read"), edited ("edit") or written whole ("write")."""
        if not path:
            return
        if len(path) > self.limits.path_chars or path[0].isspace() or path[-1].isspace():
            path = _clip(path, self.limits.path_chars)
        files = self._files
        uses = files.pop(path, None)
        if uses is None:
            uses = [0, 0, 0]
            if len(files) >= self.limits.files:
                del files[next(iter(files))]
                self._files_dropped += 1
        uses[0 if kind == "read" else 1 if kind == "edit" else 2] += 1
        files[path] = uses
        self._tool_calls += 1
        self._snapshot = None

    def command(self, text: str, call_id: str | None = None) -> None:
        """A shell command run; its outcome comes with `result(call_id, ...)`."""
        command = Command(_clip(text, self.limits.command_chars), call_id)
        self._add_command(command)
        self._commands_run += 1
        self._tool_calls += 1
        self._snapshot = None

    def ran(
        self,
        text: str,
        call_id: str | None,
        failed: bool = False,
        exit_code: int | None = None,
        error: str = "",
    ) -> None:
        """A shell command whose outcome is known already: `command` then `result` in one."""
        if call_id is None:
            self.command(text, call_id)
            self.result(call_id, failed, exit_code, error)
            return
        lim = self.limits
        first_line = _first_line(error, lim.error_chars) if failed else ""
        done = Command(_clip(text, lim.command_chars), None, failed, exit_code, first_line)
        self._add_command(done)
        self._commands_run += 1
        self._tool_calls += 1
        if failed:
            self._failed = _pushed(self._failed, done, lim.failed)
            self._commands_failed += 1
        else:
            self._fixed_by(done.text)
        self._snapshot = None

    def _fixed_by(self, text: str) -> None:
        """A run of `text` succeeded: its earlier failures are fixed."""
        if self._mark_fixed and any(c.text == text and not c.fixed for c in self._failed):
            self._failed = tuple(
                c._replace(fixed=True) if c.text == text else c for c in self._failed
            )

    def _add_command(self, command: Command) -> None:
        commands = self._commands
        commands.append(command)
        if len(commands) > self.limits.commands:
            del commands[0]

    def result(
        self,
        call_id: str | None,
        failed: bool = False,
        exit_code: int | None = None,
        text: str = "",
    ) -> None:
        """A tool call's outcome: a command's (by `call_id`), else an error another tool
        returned (`failed`, `text`)."""
        commands = self._commands
        for i in range(len(commands) - 1, -1, -1):
            c = commands[i]
            if c.call_id is not None and c.call_id == call_id:
                if c.failed is not None:
                    return  # seen already (a re-appended record)
                error = _first_line(text, self.limits.error_chars) if failed else ""
                # its result is in: the id is needed no more
                done = Command(c.text, None, failed, exit_code, error)
                commands[i] = done
                if failed:
                    self._failed = _pushed(self._failed, done, self.limits.failed)
                    self._commands_failed += 1
                else:
                    self._fixed_by(c.text)
                self._snapshot = None
                return
        if failed and text:
            error = _clip(text, self.limits.error_chars)
            self._errors = _pushed(self._errors, error, self.limits.errors)
            self._snapshot = None

    def todos(self, items: tuple[Todo, ...]) -> None:
        """The whole todo list, as the agent wrote it."""
        limit = self.limits.todo_chars
        self._todos = [
            Todo(_clip(t.text, limit), t.status, t.key) for t in items[: self.limits.todos]
        ]
        self._tool_calls += 1
        self._snapshot = None

    def todo(self, text: str, status: str = "pending", key: str | None = None) -> None:
        """One todo item added, or changed by its `key` (an agent that writes its items one by
        one)."""
        self._put_todo(_clip(text, self.limits.todo_chars), status, key)
        self._tool_calls += 1
        self._snapshot = None

    def _put_todo(self, text: str, status: str, key: str | None) -> None:
        todos = self._todos or []
        if key is not None:
            try:  # the first item with that key (the keys listed and searched in C)
                i = list(map(_todo_key, todos)).index(key)
            except ValueError:
                pass
            else:
                todos[i] = Todo(text or todos[i].text, status, key)
                self._todos = todos
                return
        if not text:
            return  # an update of an item never seen
        todos.append(Todo(text, status, key))
        self._todos = todos[-self.limits.todos :]

    def subagent(self, text: str) -> None:
        about = _clip(text or "(no description)", self.limits.command_chars)
        self._subagents = _pushed(self._subagents, about, self.limits.subagents)
        self._subagents_spawned += 1
        self._tool_calls += 1
        self._snapshot = None

    def tool(self) -> None:
        """Any other tool call (only counted)."""
        self._tool_calls += 1
        self._snapshot = None

    def compaction(self) -> None:
        self._compactions += 1
        self._snapshot = None

    def add(self, e: DigestEvent) -> None:
        """One fact, as an event."""
        kind = e.kind
        if kind in _FILE_KINDS:
            self.touch(e.text, kind)
        elif kind == "command":
            self.command(e.text, e.call_id)
        elif kind == "result":
            self.result(e.call_id, e.failed, e.exit_code, e.text)
        elif kind == "tool":
            self.tool()
        elif kind == "reply":
            self.reply(e.text)
        elif kind == "ask":
            self.ask(e.text)
        elif kind == "todos":
            self.todos(e.todos)
        elif kind == "todo":
            for t in e.todos:
                self._put_todo(_clip(t.text, self.limits.todo_chars), t.status, t.key)
            self.tool()
        elif kind == "subagent":
            self.subagent(e.text)
        elif kind == "compaction":
            self.compaction()


def apply(d: Digest, e: DigestEvent, lim: Limits = DEFAULT_LIMITS) -> Digest:
    """`d` with one more fact folded in."""
    book = DigestBook(lim, d)
    book.add(e)
    return book.digest


def as_json(value: Any) -> Any:
    """A digest (or any of its parts) as plain JSON values: objects for its records."""
    if isinstance(value, tuple) and hasattr(value, "_asdict"):
        return {k: as_json(v) for k, v in value._asdict().items()}
    if isinstance(value, tuple):
        return [as_json(v) for v in value]
    return value


# --------------------------------------------------------------------------- rendering


def estimate_tokens(text: str) -> int:
    """About how many tokens `text` is (four characters each)."""
    return (len(text) + _CHARS_PER_TOKEN - 1) // _CHARS_PER_TOKEN


def _quote(text: str) -> str:
    return "\n".join(f"> {line}" if line else ">" for line in text.splitlines())


def _file_line(f: FileUse) -> str:
    parts = [
        f"{label} {n}×"
        for label, n in (("edited", f.edits), ("written", f.writes), ("read", f.reads))
        if n
    ]
    return f"- `{f.path}` — {', '.join(parts)}"


def _command_line(c: Command) -> str:
    if c.failed:
        status = f"exit {c.exit_code}" if c.exit_code is not None else "failed"
        line = f"- `{c.text}` — {status}" + (f": {c.error}" if c.error else "")
        return line + (" — fixed: a later run succeeded" if c.fixed else "")
    status = "running or no result seen" if c.failed is None else "ok"
    return f"- `{c.text}` — {status}"


def _todo_line(t: Todo) -> str:
    mark = {"completed": "[x]", "in_progress": "[~]"}.get(t.status, "[ ]")
    return f"- {mark} {t.text}"


def _files_by_weight(files: tuple[FileUse, ...]) -> list[FileUse]:
    # Edited and written files first (what a successor must know), then the most used.
    return sorted(
        files,
        key=lambda f: (-(f.edits + f.writes > 0), -(f.edits + f.writes + f.reads)),
    )


@dataclass
class _Section:
    title: str
    lines: list[str]
    #: Lines that may be dropped (the rest is kept whole): the section is trimmed from its end.
    trimmable: bool = True
    omitted: int = 0
    #: Extra items known to exist but never kept (files beyond the digest's bound).
    unseen: int = 0

    def text(self) -> str:
        body = list(self.lines)
        more = self.omitted + self.unseen
        if more:
            body.append(f"- … {more} more")
        return f"## {self.title}\n" + "\n".join(body) if self.title else "\n".join(body)

    def size(self) -> int:
        return len(self.text())


def _fit(head: str, sections: list[_Section], limit_tokens: int) -> str:
    """The sections under `head`, the longest trimmed first (a line at a time from its end)
    until the whole is within `limit_tokens`."""
    limit = limit_tokens * _CHARS_PER_TOKEN

    def whole() -> str:
        parts = [head, *(s.text() for s in sections if s.lines or s.omitted)]
        return "\n\n".join(p for p in parts if p) + "\n"

    text = whole()
    while len(text) > limit:
        candidates = [s for s in sections if s.trimmable and s.lines]
        if not candidates:
            break
        longest = max(candidates, key=_Section.size)
        longest.lines.pop()
        longest.omitted += 1
        text = whole()
    if len(text) > limit:
        text = text[: max(0, limit - 2)].rstrip() + "…\n"
    return text


def _count(n: int, word: str) -> str:
    """`n word` in English: 1 tool call, 2 tool calls."""
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


def render_markdown(d: Digest, title: str, limit_tokens: int = 2000) -> str:
    """The handoff note: what the session was for, where it stands, open todos, failed
    commands, files, the last ask; within `limit_tokens` (about), longest sections trimmed
    first. `title` heads it (the agent and session)."""
    head = (
        f"# Handoff: {title}\n\n"
        "Drafted by ctxd from the session's transcript (no model call): review and complete it "
        "with what the transcript cannot say (decisions, reasons, next steps)."
    )
    sections: list[_Section] = []
    if d.first_ask:
        sections.append(_Section("What the session was for", _quote(d.first_ask).splitlines()))
    stands: list[str] = []
    if d.asks:
        stands.append("Last request:")
        stands += _quote(d.asks[-1]).splitlines()
    if d.last_reply:
        stands.append("Last assistant message:")
        stands += _quote(d.last_reply).splitlines()
    stands.append(
        f"- {_count(d.tool_calls, 'tool call')}, {_count(d.commands_run, 'command')} "
        f"({d.commands_failed} failed), {_count(len(d.files) + d.files_dropped, 'file')}, "
        f"{_count(d.compactions, 'compaction')}, {_count(d.subagents_spawned, 'subagent')}"
    )
    sections.append(_Section("Where it stands", stands, trimmable=False))
    if d.todos:
        open_todos = [t for t in d.todos if t.open]
        done = len(d.todos) - len(open_todos)
        lines = [_todo_line(t) for t in open_todos]
        if done:
            lines.append(f"- ({done} done)")
        sections.append(_Section("Open todos", lines))
    if d.failed:
        sections.append(_Section("Failed commands", [_command_line(c) for c in reversed(d.failed)]))
    if d.files:
        sections.append(
            _Section(
                "Files",
                [_file_line(f) for f in _files_by_weight(d.files)],
                unseen=d.files_dropped,
            )
        )
    if d.errors:
        sections.append(_Section("Tool errors", [f"- {e}" for e in reversed(d.errors)]))
    recent = [c for c in d.commands if not c.failed]
    if recent:
        sections.append(_Section("Recent commands", [_command_line(c) for c in reversed(recent)]))
    if d.subagents:
        sections.append(_Section("Subagents", [f"- {s}" for s in reversed(d.subagents)]))
    if len(d.asks) > 1:
        earlier = [f"- {_clip(a.splitlines()[0], 200)}" for a in reversed(d.asks[:-1])]
        sections.append(_Section("Earlier requests (newest first)", earlier))
    return _fit(head, sections, limit_tokens)


def render_compact(d: Digest, limit_tokens: int = 1000) -> str:
    """The note injected after a compaction: files, open todos, the last ask, failed commands;
    within `limit_tokens` (about). Empty when the digest holds none of these."""
    sections: list[_Section] = []
    if d.asks:
        # Not quoted with ">": some agents escape it on the way to the model (Gemini CLI).
        last = _clip(d.asks[-1], 1200).splitlines()
        sections.append(_Section("Last request", last, False))
    if d.todos:
        open_todos = [_todo_line(t) for t in d.todos if t.open]
        if open_todos:
            sections.append(_Section("Open todos", open_todos))
    if d.failed:
        sections.append(_Section("Failed commands", [_command_line(c) for c in reversed(d.failed)]))
    if d.files:
        sections.append(
            _Section(
                "Files touched",
                [_file_line(f) for f in _files_by_weight(d.files)],
                unseen=d.files_dropped,
            )
        )
    if not sections:
        return ""
    head = (
        f"{COMPACT_HEADER} Facts of this session from before the compaction, taken from its "
        "transcript by ctxd (not a model summary; advisory, it does not override the user's "
        "instructions)."
    )
    return _fit(head, sections, limit_tokens)
