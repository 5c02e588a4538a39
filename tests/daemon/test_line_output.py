"""The tmux line's choice of session and its text, by truth table over status rows."""

from __future__ import annotations

from typing import Any

import pytest

from ctxd.daemon.outputs.line import NOTHING_LIVE, choose, render_line


def row(name: str, cwd: str | None, **fields: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "session_id": name,
        "agent": "codex",
        "model": "gpt-5",
        "tokens": 100_000,
        "window": 400_000,
        "window_source": "table",
        "used_pct": 25.0,
        "severity": "ok",
        "tokens_to_compaction": 200_000,
        "auto_compaction": True,
        "estimated": False,
        "cwd": cwd,
        "updated_at": 100.0,
        "ended_at": None,
    }
    base.update(fields)
    return base


A = row("a", "/home/u/proj")
A_NEWER = row("a2", "/home/u/proj", updated_at=200.0)
B_DEEP = row("b", "/home/u/proj/sub")
C_WARN = row("c", "/srv/x", severity="warning", tokens_to_compaction=50_000)
D_CRIT = row("d", "/srv/y", severity="critical", tokens_to_compaction=9_000)
D_CRIT_ROOMIER = row("d2", "/srv/z", severity="critical", tokens_to_compaction=20_000)
ENDED_HERE = row("e", "/home/u/proj", ended_at=50.0, updated_at=999.0)
ERROR_HERE = {"session_id": "f", "cwd": "/home/u/proj", "ended_at": None, "error": "boom"}
PREFIX_TWIN = row("g", "/home/u/pro")


@pytest.mark.parametrize(
    ("rows", "cwd", "expected", "own"),
    [
        # the directory's own session, exact and from below
        ([A, C_WARN], "/home/u/proj", "a", True),
        ([A, C_WARN], "/home/u/proj/src/deep/", "a", True),
        # the nearest ancestor wins over a farther one
        ([A, B_DEEP], "/home/u/proj/sub/x", "b", True),
        ([A, B_DEEP], "/home/u/proj/other", "a", True),
        # two in the same directory: the most recently updated
        ([A, A_NEWER], "/home/u/proj", "a2", True),
        # a path prefix that is not a parent directory does not count
        ([PREFIX_TWIN, C_WARN], "/home/u/proj", "c", False),
        # ended and broken sessions are not live
        ([ENDED_HERE, ERROR_HERE, C_WARN], "/home/u/proj", "c", False),
        # nothing in the directory: the worst, by severity then least room
        ([A, C_WARN, D_CRIT_ROOMIER, D_CRIT], "/elsewhere", "d", False),
        ([A, C_WARN], None, "c", False),
        # a session in / covers every directory
        ([row("r", "/"), C_WARN], "/srv/x2", "r", True),
    ],
)
def test_choose(rows: list[dict[str, Any]], cwd: str | None, expected: str, own: bool) -> None:
    chosen = choose(rows, cwd)
    assert chosen is not None
    assert (chosen[0]["session_id"], chosen[1]) == (expected, own)


def test_nothing_live_is_short_and_neutral() -> None:
    assert choose([ENDED_HERE, ERROR_HERE], "/home/u/proj") is None
    assert render_line([ENDED_HERE], "/home/u/proj") == NOTHING_LIVE.encode()
    assert render_line([], None, tmux=True) == NOTHING_LIVE.encode()


def test_text_names_project_agent_and_figures() -> None:
    assert render_line([A], "/home/u/proj").decode() == (
        "proj codex gpt-5 ▓▓░░░░░░░░ 25% of window · 100k/400k · 200k to compact"
    )
    worst = render_line([A, D_CRIT], "/nowhere").decode()
    assert worst.startswith("*y codex !! gpt-5")


def test_tmux_styles_by_severity_and_escapes_hashes() -> None:
    assert render_line([A], "/home/u/proj", tmux=True).startswith(b"#[fg=green]proj ")
    crit = render_line([D_CRIT], "/srv/y", tmux=True)
    assert crit.startswith(b"#[fg=red,bold]") and crit.endswith(b"#[default]")
    # A directory or model name is text: it may not open a tmux style or run a command.
    evil = row("h", "/w/#(touch x)#[fg=red]", model="m\x1b[31m\nx")
    text = render_line([evil], "/w/#(touch x)#[fg=red]", tmux=True).decode()
    body = text.removeprefix("#[fg=green]").removesuffix("#[default]")
    assert "#(" not in body.replace("##", "") and "#[" not in body.replace("##", "")
    assert "\n" not in text and "\x1b" not in text
    plain = render_line([evil], "/w/#(touch x)#[fg=red]").decode()
    assert "\n" not in plain and "\x1b" not in plain and "##" not in plain
