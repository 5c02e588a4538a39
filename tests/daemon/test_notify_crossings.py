"""What the notifier says and when, without a daemon: the crossings of two successive status
rows (once per crossing), the macOS command as it would run, and the `[notify]` table."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from ctxd.daemon.config import NotifySettings, load_notify_settings, parse_settings
from ctxd.daemon.outputs.crossings import COMPACTION_NEAR_CALLS, IDLE_SOON_SECONDS, crossings
from ctxd.daemon.outputs.notify import TYPING, osascript_argv, typed_in, watch
from ctxd.errors import ConfigError

NOW = 1_800_000_000.0


def row(**fields: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "agent": "claude",
        "session_id": "s1",
        "cwd": "/home/me/src/shop",
        "severity": "ok",
        "basis_used_pct": 40.0,
        "forecast": None,
        "idle_compaction_at": None,
        "handoff_asked": False,
        "ended_at": None,
    }
    return base | fields


CRITICAL = row(severity="critical", basis_used_pct=80.0)
NEAR = row(forecast={"calls_to_compaction": COMPACTION_NEAR_CALLS})
IDLE = row(idle_compaction_at=NOW + IDLE_SOON_SECONDS - 1)
HANDOFF = row(handoff_asked=True)


@pytest.mark.parametrize(
    ("before", "after", "kinds"),
    [
        (row(), CRITICAL, ["critical"]),
        (None, CRITICAL, ["critical"]),  # a session first seen past the line
        (CRITICAL, CRITICAL, []),  # still past: once per crossing
        (CRITICAL, row(), []),  # back below (a compaction): nothing, and re-armed
        (row(severity="warning"), CRITICAL, ["critical"]),
        (row(), NEAR, ["compaction_near"]),
        (
            row(forecast={"calls_to_compaction": COMPACTION_NEAR_CALLS + 1}),
            NEAR,
            ["compaction_near"],
        ),
        (NEAR, NEAR, []),
        (row(), row(forecast={"calls_to_compaction": COMPACTION_NEAR_CALLS + 1}), []),
        (row(), IDLE, ["idle_compaction_soon"]),
        (row(), row(idle_compaction_at=NOW + IDLE_SOON_SECONDS + 60), []),
        (row(), row(idle_compaction_at=NOW - 1), []),  # already past: the agent compacted
        (row(), HANDOFF, ["handoff_asked"]),
        (HANDOFF, HANDOFF, []),
        (row(), CRITICAL | {"handoff_asked": True}, ["critical", "handoff_asked"]),
        (row(), CRITICAL | {"ended_at": NOW}, []),  # ended: nobody to warn
        (row(), {"agent": "claude", "session_id": "s1", "error": "cannot compute"}, []),
    ],
)
def test_crossings(before: dict[str, Any] | None, after: dict[str, Any], kinds: list[str]) -> None:
    assert [c.kind for c in crossings(before, NOW - 1, after, NOW)] == kinds


def test_an_idle_compaction_crosses_as_time_passes() -> None:
    at = NOW + IDLE_SOON_SECONDS + 30
    same = row(idle_compaction_at=at)
    assert crossings(same, NOW - 60, same, NOW) == []
    (found,) = crossings(same, NOW, same, NOW + 60)
    assert found.kind == "idle_compaction_soon"
    assert found.body == "compacts in 10 min if left idle"  # 9.5, rounded
    assert crossings(same, NOW + 60, same, NOW + 120) == []


def test_the_text_names_project_and_agent() -> None:
    (found,) = crossings(row(), NOW, CRITICAL, NOW)
    assert found.summary == "shop (claude): context critical"
    assert found.body == "20% of the room before compaction left"
    assert (found.project, found.agent, found.session_id) == ("shop", "claude", "s1")
    (windowed,) = crossings(row(), NOW, CRITICAL | {"basis": "window"}, NOW)
    assert windowed.body == "20% of the window left"  # the basis the thresholds count on
    (nameless,) = crossings(row(), NOW, CRITICAL | {"cwd": None}, NOW)
    assert nameless.summary == "a session (claude): context critical"


def test_watch_takes_a_baseline_first() -> None:
    document = {"sessions": [CRITICAL, row(session_id="s2")]}
    rows, found = watch(None, 0.0, document, NOW)
    assert found == [] and set(rows) == {("claude", "s1"), ("claude", "s2")}
    later = {"sessions": [CRITICAL, row(session_id="s2", severity="critical")]}
    _, found = watch(rows, NOW, later, NOW + 1)
    assert [(c.session_id, c.kind) for c in found] == [("s2", "critical")]


def _typing_row(session: str, prompted: float | None, **fields: Any) -> dict[str, Any]:
    return row(session_id=session, transcript_path=f"/t/{session}.jsonl", prompted_at=prompted)


@pytest.mark.parametrize(
    ("prompts", "typed"),
    [
        ({"s1": None, "s2": None}, None),  # no prompt seen (an agent without a prompt hook)
        ({"s1": NOW - 5, "s2": None}, "/t/s1.jsonl"),
        ({"s1": NOW - 50, "s2": NOW - 5}, "/t/s2.jsonl"),  # the latest prompt of all
        ({"s1": NOW - TYPING - 1, "s2": None}, None),  # too long ago: the user may be away
        ({"s1": NOW - TYPING, "s2": NOW - TYPING - 30}, "/t/s1.jsonl"),
    ],
)
def test_the_session_typed_in(prompts: dict[str, float | None], typed: str | None) -> None:
    assert typed_in([_typing_row(s, at) for s, at in prompts.items()], NOW) == typed


def test_nothing_for_the_session_typed_in_nor_its_subagents() -> None:
    calm = [_typing_row("s1", NOW - 5), _typing_row("s2", None)]
    sub = row(session_id="sub", parent="/t/s1.jsonl")
    rows, _ = watch(None, 0.0, {"sessions": [*calm, sub]}, NOW)
    later = [r | {"severity": "critical", "basis_used_pct": 80.0} for r in (*calm, sub)]

    _, found = watch(rows, NOW, {"sessions": later}, NOW + 1)

    assert [c.session_id for c in found] == ["s2"]
    # Once the prompt is older than TYPING, the same session is announced like any other.
    _, found = watch(rows, NOW, {"sessions": later}, NOW + TYPING + 10)
    assert sorted(c.session_id for c in found) == ["s1", "s2", "sub"]


def test_the_macos_command_escapes_what_it_shows() -> None:
    nasty = row(cwd='/src/a "quoted" \\ dir', severity="critical", basis_used_pct=80.0)
    (found,) = crossings(None, NOW, nasty, NOW)
    argv = osascript_argv(found)
    assert argv == [
        "osascript",
        "-e",
        'display notification "20% of the room before compaction left" with title "ctxd"'
        ' subtitle "a \\"quoted\\" \\\\ dir (claude): context critical"',
    ]


@pytest.mark.skipif(shutil.which("osascript") is None, reason="macOS only")
def test_the_macos_command_runs() -> None:  # pragma: no cover - macOS
    (found,) = crossings(None, NOW, CRITICAL, NOW)
    subprocess.run(osascript_argv(found), check=True, timeout=10)


def test_notify_table(tmp_path: Path) -> None:
    config = tmp_path / "config.toml"
    assert load_notify_settings(config) == NotifySettings()  # no file: off
    config.write_text('[notify]\nenabled = true\ncommand = ["push", "--to", "me"]\n')
    on = load_notify_settings(config)
    assert on == NotifySettings(enabled=True, command=("push", "--to", "me"))
    for bad, says in (
        ('command = "push --to me"', "notify.command must be a list of words"),
        ("enabled = 1", "notify.enabled must be true or false"),
        ("timeout_seconds = 0", "notify.timeout_seconds must be a number"),
        ("colour = 1", "colour"),
    ):
        with pytest.raises(ConfigError, match=says):
            parse_settings(f"[notify]\n{bad}\n")
