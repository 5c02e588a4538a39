"""The digest as values: what `apply` keeps, its bounds, and the two renderings' limits."""

from __future__ import annotations

import pytest

from ctxd.core.digest import (
    COMPACT_HEADER,
    Digest,
    DigestBook,
    DigestEvent,
    Limits,
    Todo,
    apply,
    estimate_tokens,
    render_compact,
    render_markdown,
    without_injected,
)


def fold(*events: DigestEvent, limits: Limits | None = None) -> Digest:
    d = Digest()
    for e in events:
        d = apply(d, e, limits or Limits())
    return d


def test_files_are_counted_per_kind_most_recent_last() -> None:
    d = fold(
        DigestEvent("read", "a.py"),
        DigestEvent("read", "b.py"),
        DigestEvent("edit", "a.py"),
        DigestEvent("write", "c.md"),
    )
    assert [(f.path, f.reads, f.edits, f.writes) for f in d.files] == [
        ("b.py", 1, 0, 0),
        ("a.py", 1, 1, 0),
        ("c.md", 0, 0, 1),
    ]
    assert d.tool_calls == 4


def test_commands_get_their_outcome_and_failures_are_kept_apart() -> None:
    d = fold(
        DigestEvent("command", "make", "c1"),
        DigestEvent("command", "pytest", "c2"),
        DigestEvent("result", "", "c1", exit_code=0),
        DigestEvent("result", "Exit code 1\nE assert 1 == 2", "c2", failed=True, exit_code=1),
        DigestEvent("result", "again", "c2", failed=True, exit_code=1),  # a repeat: ignored
        *(DigestEvent("command", f"echo {i}", f"e{i}") for i in range(30)),
    )
    assert len(d.commands) == Limits().commands
    assert d.commands_run == 32 and d.commands_failed == 1
    (failed,) = d.failed
    assert (failed.text, failed.exit_code, failed.error) == ("pytest", 1, "Exit code 1")


def test_an_error_of_another_tool_is_a_tool_error() -> None:
    d = fold(DigestEvent("result", "Edit a.py: string not found", "x", failed=True))
    assert d.errors == ("Edit a.py: string not found",)


def test_todos_whole_list_and_item_by_item() -> None:
    d = fold(DigestEvent("todos", todos=(Todo("a"), Todo("b", "completed"))))
    assert [(t.text, t.status) for t in d.todos or ()] == [("a", "pending"), ("b", "completed")]
    d = fold(
        DigestEvent("todo", todos=(Todo("x", key="1"),)),
        DigestEvent("todo", todos=(Todo("y", key="2"),)),
        DigestEvent("todo", todos=(Todo("", "in_progress", "2"),)),
        DigestEvent("todo", todos=(Todo("", "completed", "9"),)),  # never created: ignored
    )
    assert [(t.text, t.status) for t in d.todos or ()] == [("x", "pending"), ("y", "in_progress")]


def test_asks_first_and_last_few_clipped() -> None:
    lim = Limits()
    d = fold(*(DigestEvent("ask", f"ask {i} " + "x" * 2000) for i in range(9)))
    assert d.first_ask is not None and d.first_ask.startswith("ask 0")
    assert len(d.first_ask) == lim.first_ask_chars
    assert [a.split()[1] for a in d.asks] == ["4", "5", "6", "7", "8"]
    assert all(len(a) == lim.ask_chars and a.endswith("…") for a in d.asks)


def test_every_list_is_bounded() -> None:
    lim = Limits()
    events = []
    for i in range(500):
        events += [
            DigestEvent("edit", f"src/file_{i}.py"),
            DigestEvent("command", f"false {i}", f"c{i}"),
            DigestEvent("result", "boom", f"c{i}", failed=True, exit_code=1),
            DigestEvent("result", f"err {i}", f"t{i}", failed=True),
            DigestEvent("subagent", f"sub {i}"),
            DigestEvent("todo", todos=(Todo(f"t {i}", key=str(i)),)),
        ]
    d = fold(*events)
    assert len(d.files) == lim.files and d.files_dropped == 500 - lim.files
    assert len(d.commands) == lim.commands and len(d.failed) == lim.failed
    assert len(d.errors) == lim.errors and len(d.subagents) == lim.subagents
    assert len(d.todos or ()) == lim.todos
    assert d.subagents_spawned == 500 and d.commands_failed == 500


def _big() -> Digest:
    events = [DigestEvent("ask", "Refactor the parser")]
    for i in range(40):
        events += [DigestEvent("edit", f"src/module_{i:02}.py"), DigestEvent("read", f"r{i}.py")]
    for i in range(8):
        events += [
            DigestEvent("command", f"pytest tests/test_{i}.py", f"c{i}"),
            DigestEvent("result", "x" * 300, f"c{i}", failed=True, exit_code=1),
        ]
    events.append(
        DigestEvent("todos", todos=tuple(Todo(f"todo {i} " + "y" * 100) for i in range(30)))
    )
    events.append(DigestEvent("ask", "Now fix the failing tests " + "z" * 500))
    return fold(*events)


def test_markdown_within_its_limit_longest_sections_trimmed_first() -> None:
    d = _big()
    md = render_markdown(d, "S", 2000)
    assert estimate_tokens(md) <= 2000
    small = render_markdown(d, "S", 600)
    assert estimate_tokens(small) <= 600
    # what is kept whole: the purpose and where it stands
    assert "Refactor the parser" in small and "Now fix the failing tests" in small
    assert "more" in small  # trimmed sections say so


def test_the_counts_in_where_it_stands_read_as_english() -> None:
    """The note said "1 tool calls, ... 1 compactions, 1 subagents"."""
    one = Digest(tool_calls=1, commands_run=1, files_dropped=1, compactions=1, subagents_spawned=1)
    md = render_markdown(one, "S")
    assert "- 1 tool call, 1 command (0 failed), 1 file, 1 compaction, 1 subagent\n" in md
    md = render_markdown(Digest(tool_calls=2, commands_run=3, commands_failed=2), "S")
    assert "- 2 tool calls, 3 commands (2 failed), 0 files, 0 compactions, 0 subagents" in md


def test_compact_within_its_limit_and_empty_without_facts() -> None:
    d = _big()
    note = render_compact(d, 1000)
    assert note.startswith(COMPACT_HEADER)
    assert estimate_tokens(note) <= 1000
    assert "Open todos" in note and "Failed commands" in note and "Files touched" in note
    assert render_compact(Digest()) == ""
    assert render_compact(fold(DigestEvent("reply", "hi"))) == ""


@pytest.mark.parametrize(
    ("call_id", "failed", "exit_code", "error"),
    [
        ("c1", False, 0, ""),
        ("c2", True, 2, "boom\nmore"),
        (None, True, None, "x"),
        (None, False, 0, ""),
    ],
)
def test_ran_is_a_command_and_its_result(
    call_id: str | None, failed: bool, exit_code: int | None, error: str
) -> None:
    lim = Limits(commands=2, failed=2)
    one, two = DigestBook(lim), DigestBook(lim)
    for book in (one, two):
        book.command("earlier", "c0")
    one.ran("make", call_id, failed, exit_code, error)
    two.command("make", call_id)
    two.result(call_id, failed, exit_code, error)
    assert one.digest == two.digest


_TAGS = frozenset({"system-reminder", "task-notification", "command-name", "local-command-stdout"})


@pytest.mark.parametrize(
    ("text", "typed"),
    [
        ("fix the login bug", "fix the login bug"),
        ("  padded \n", "padded"),
        ("is a < b and b > c?", "is a < b and b > c?"),
        ("<system-reminder>The file changed.</system-reminder>", ""),
        ("<system-reminder>\nA\n</system-reminder>\n\nnow run the tests", "now run the tests"),
        ("run them <system-reminder>x</system-reminder>", "run them"),
        (
            "<task-notification>\n<task-id>b1</task-id>\n<status>completed</status>\n"
            "</task-notification>",
            "",
        ),
        ("<command-name>/clear</command-name>", ""),
        ('<local-command-stdout kind="x">Cleared</local-command-stdout>', ""),
        ("<local-command-stdout>cut short, never closed", ""),
        (
            "<other-tag>kept: not the harness's</other-tag>",
            "<other-tag>kept: not the harness's</other-tag>",
        ),
        ("<system-reminder>a</system-reminder><system-reminder>b</system-reminder>", ""),
    ],
)
def test_without_injected_keeps_what_the_user_typed(text: str, typed: str) -> None:
    assert without_injected(text, _TAGS) == typed


def test_without_injected_with_no_tags_only_strips() -> None:
    assert without_injected(" <system-reminder>x</system-reminder> ", frozenset()) == (
        "<system-reminder>x</system-reminder>"
    )


def _runs(book: DigestBook, *runs: tuple[str, bool]) -> Digest:
    """`book` told each (command, failed) in turn, a result after each command."""
    for n, (text, failed) in enumerate(runs):
        book.command(text, f"c{n}")
        book.result(f"c{n}", failed, 1 if failed else 0, "Exit code 1\nE boom" if failed else "")
    return book.digest


@pytest.mark.parametrize(
    ("runs", "fixed"),
    [
        ((("pytest", True),), [False]),  # failed, never run again
        ((("pytest", True), ("pytest", False)), [True]),  # fixed by a later run
        ((("pytest", True), ("pytest -x", False)), [False]),  # another command
        ((("pytest", True), ("pytest", True)), [False, False]),  # failed again
        ((("pytest", True), ("pytest", True), ("pytest", False)), [True, True]),
        ((("pytest", False), ("pytest", True)), [False]),  # a success before proves nothing
        ((("make", True), ("pytest", True), ("make", False)), [True, False]),
    ],
)
def test_a_failed_command_a_later_run_fixed_is_marked_fixed(
    runs: tuple[tuple[str, bool], ...], fixed: list[bool]
) -> None:
    d = _runs(DigestBook(mark_fixed=True), *runs)
    assert [c.fixed for c in d.failed] == fixed
    assert d.commands_failed == len(fixed)  # still counted as failures
    ran = DigestBook(mark_fixed=True)
    for n, (text, failed) in enumerate(runs):  # the outcome known at once: the same
        ran.ran(text, f"r{n}", failed, 1 if failed else 0, "Exit code 1\nE boom" if failed else "")
    assert [c.fixed for c in ran.digest.failed] == fixed


def test_fixed_failures_are_shown_as_fixed_and_left_alone_when_not_asked_for() -> None:
    runs = (("pytest", True), ("pytest", False))
    marked = _runs(DigestBook(mark_fixed=True), *runs)
    for text in (render_markdown(marked, "t"), render_compact(marked)):
        assert "- `pytest` — exit 1: Exit code 1 — fixed: a later run succeeded" in text
    plain = _runs(DigestBook(), *runs)
    assert [c.fixed for c in plain.failed] == [False]
    assert "fixed" not in render_markdown(plain, "t")
