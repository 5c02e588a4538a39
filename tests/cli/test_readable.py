"""What a newcomer reads: headers, widths, grammar, ids that can
be typed back, refusals that say why, and messages that do not contradict each other."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from ctxd.cli.report import (
    WIDTH,
    pct_text,
    session_lines,
    short_ids,
    status_lines,
    watching_lines,
)

if TYPE_CHECKING:
    from conftest import World

DATA = Path(__file__).parents[1] / "data"
CLAUDE = DATA / "transcripts" / "claude-code-2.1.332" / "transcript.compact.jsonl"


def _row(**fields: Any) -> dict[str, Any]:
    row = {
        "session_id": "04d3bf8b-a779-4dfd-bdf7-d6035c0a0018",
        "agent": "claude",
        "model": "claude-opus-5-5-with-a-very-long-model-name[1m]",
        "tokens": 1_234_567,
        "window": 2_000_000,
        "window_source": "model-id",
        "used_pct": 61.7,
        "severity": "warning",
        "tokens_to_compaction": 1_654_321,
        "compactions": 1,
        "forecast": {
            "tokens_per_call": 12_345.6,
            "calls_to_next_threshold": 12,
            "calls_to_compaction": 134,
        },
        "cwd": "/srv/a/rather/deep/project/directory/that/goes/on/and/on/for/quite/a/while/x",
        "transcript_path": "/x/y.jsonl",
        "updated_at": time.time() - 30,
        "ended_at": time.time(),
        "ended_reason": "transcript replaced",
        "parent": "/x/parent.jsonl",
        "estimated": True,
        "window_too_small": True,
        "auto_compaction": True,
    }
    row.update(fields)
    return row


def test_status_has_a_header_and_no_line_over_100_columns() -> None:
    doc = {
        "daemon": {"version": "0.1.0", "pid": 7, "requests": 1},
        "sessions": [_row(), _row(session_id="04d3bf8b-ffff-0000-0000-000000000000")],
    }
    lines = status_lines(doc)
    assert lines[0] == "ctxd 0.1.0 (pid 7) · 2 sessions · 1 request served"
    assert lines[1].split() == [
        *("AGENT", "SESSION", "MODEL", "USED", "OF", "WINDOW", "TOKENS", "/", "WINDOW", "TO"),
        *("COMPACT", "STATE"),
    ]
    assert max(len(line) for line in lines) <= WIDTH, "\n".join(lines)
    # Two ids sharing 8 characters are shown as long as it takes to tell them apart.
    assert lines[2].split()[1] == "04d3bf8b-a"
    assert "1,234,567 / 2,000,000" in lines[2] and "WARNING" in lines[2]
    assert "window: model-id" in lines[3] and "estimate" in "\n".join(lines)


def test_a_session_the_daemon_could_not_figure_is_shown_with_why_and_the_rest_stand() -> None:
    broken = {
        "session_id": "0badbeef-0000-0000-0000-000000000000",
        "agent": "claude",
        "error": "cannot compute this session's figures: ValueError",
    }
    lines = status_lines({"sessions": [broken, _row()]})
    assert any(
        line.split()[:2] == ["claude", "0badbeef"] and "ValueError" in line for line in lines
    )
    assert any("1,234,567 / 2,000,000" in line for line in lines)


def test_folders_past_the_inotify_limit_are_said_with_the_fix_within_100_columns() -> None:
    watching = {
        "folders": 790,
        "watched": 512,
        "unwatched": 278,
        "measured": True,
        "limit": 8192,
        "limit_text": "fs.inotify.max_user_watches = 8,192",
        "poll_interval_s": 2.0,
        "fix": "sudo sysctl -w fs.inotify.max_user_watches=524288 (and put "
        "`fs.inotify.max_user_watches = 524288` in /etc/sysctl.d/90-inotify.conf to keep it)",
    }
    doc = {"daemon": {"version": "0.1.0", "pid": 7, "requests": 1, "watching": watching}}
    lines = status_lines({**doc, "sessions": []})
    text = " ".join(line.strip() for line in lines)
    assert "inotify limit reached (fs.inotify.max_user_watches = 8,192)" in text
    assert "watching 512 of 790 folders; the other 278 are polled every 2.0 s" in text
    assert "sudo sysctl -w fs.inotify.max_user_watches=524288" in text
    assert all(len(line) <= WIDTH for line in lines), lines
    assert watching_lines({**watching, "unwatched": 0}) == []  # all watched: nothing to say
    failed = {**watching, "watched": 0, "unwatched": 790, "error": "Too many open files"}
    (said, *_) = watching_lines(failed)
    assert said.startswith("cannot watch the agents' folders (Too many open files): all 790")
    assert watching_lines(None) == []  # an older daemon


def test_a_session_in_full_has_every_label_apart_from_its_value_in_one_column() -> None:
    """`ctxd status ID`: "idle compaction:-" ran its value into the longest label."""
    lines = session_lines(_row(idle_compaction_at=None))
    labels = [line.split(":", 1)[0] for line in lines]
    assert "idle compaction" in labels and "subagent of" in labels
    column = {len(line) - len(line.split(":", 1)[1].lstrip()) for line in lines}
    assert len(column) == 1, lines
    assert all(line.split(":", 1)[1].startswith(" ") for line in lines), lines


def test_grammar_of_counts() -> None:
    doc = {"daemon": {"version": "0.1.0", "pid": 7, "requests": 2}, "sessions": [_row()]}
    assert status_lines(doc)[0] == "ctxd 0.1.0 (pid 7) · 1 session · 2 requests served"


def test_a_statusline_percent_is_shown_as_reported_not_as_exact() -> None:
    assert pct_text(90.0, reported=True) == "90%"
    assert pct_text(90.0) == "90.0%" and pct_text(61.74) == "61.7%"
    row = _row(window_source="statusline", used_pct=42.0, window=1_000_000)
    (line,) = [x for x in status_lines({"sessions": [row]}) if x.startswith("claude")]
    assert " 42% " in line and "42.0%" not in line


def test_short_ids_are_unique_prefixes() -> None:
    ids = ["abcdefgh-1", "abcdefgh-2", "zzzzzzzz-9"]
    assert short_ids(ids) == {"abcdefgh-1": "abcdefgh-1", "abcdefgh-2": "abcdefgh-2"} | {
        "zzzzzzzz-9": "zzzzzzzz"
    }


def test_status_accepts_the_id_it_shows_and_any_unique_prefix(ctxd: World) -> None:
    a, b = ctxd.claude("aaaa1111-0000-4000-8000-000000000001"), ctxd.claude()
    for t in (a, b):
        t.assistant(300_000)
        ctxd.hook_out("claude", t.payload("PostToolUse"))
    listing = ctxd.cli("status").stdout
    shown = next(line.split()[1] for line in listing.splitlines() if line.startswith("claude"))
    for prefix in (shown, "aaaa", a.session_id):
        if not a.session_id.startswith(prefix):
            continue
        result = ctxd.cli("status", prefix)
        assert result.returncode == 0, result.stderr
        assert result.stdout.splitlines()[0].split() == ["session:", a.session_id]  # in full
        assert b.session_id not in result.stdout
    doc = json.loads(ctxd.cli("status", "--json", "aaaa").stdout)
    assert [s["session_id"] for s in doc["sessions"]] == [a.session_id]
    missing = ctxd.cli("status", "zzzz")
    assert missing.returncode != 0 and "no tracked session id starts with 'zzzz'" in missing.stderr


def test_an_ambiguous_prefix_is_refused_naming_the_candidates(ctxd: World) -> None:
    ids = ["cafe0000-0000-4000-8000-000000000001", "cafe0000-0000-4000-8000-000000000002"]
    for sid in ids:
        t = ctxd.claude(sid)
        t.assistant(300_000)
        ctxd.hook_out("claude", t.payload("PostToolUse"))
    result = ctxd.cli("status", "cafe")
    assert result.returncode != 0
    assert "is the start of 2 session ids" in result.stderr and all(i in result.stderr for i in ids)


def test_config_error_appears_once_in_json(world: World) -> None:
    world.write_config("[thresholds]\nwarning = 'lots'\n")
    world.start()
    text = world.cli("status", "--json").stdout
    assert text.count('"config_error"') == 1 and "thresholds.warning" in text
    human = world.cli("status").stdout
    assert "the last config that loaded, or the defaults" in human


def test_replay_has_a_header_and_its_final_line_reads_like_a_row() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "ctxd", "replay", str(CLAUDE)],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.splitlines()
    header = ["TURN", "TIME", "TOKENS", "USED", "WINDOW", "TO", "COMPACTION", "STATE"]
    assert out[0].split() == header
    last_row, final = out[-2].split(), out[-1].split()
    assert final[0] == "final" and final[1:7] == last_row[1:7]  # same columns, same figures
    assert "(Claude Code, 7 turns, 2 compactions, window: " in out[-1]


def test_replay_of_a_transcript_without_usage_says_so(tmp_path: Path) -> None:
    path = tmp_path / "started.jsonl"
    path.write_bytes(CLAUDE.read_bytes().splitlines(keepends=True)[0])
    result = subprocess.run(
        [sys.executable, "-m", "ctxd", "replay", str(path)], capture_output=True, text=True
    )
    assert result.returncode != 0 and result.stdout == ""
    assert "Claude Code transcript with no usage in it yet" in result.stderr


def test_replay_refuses_an_agent_that_did_not_write_the_file() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "ctxd", "replay", "--agent", "gemini", str(CLAUDE)],
        capture_output=True,
        text=True,
    )
    assert result.returncode == 2 and result.stdout == ""
    assert "is a Claude Code transcript, not a Gemini CLI one" in result.stderr


@pytest.mark.parametrize(
    ("verb", "says"),
    [
        (["serve"], ["--log-level", "how much the daemon logs"]),
        (["watch"], ["--interval SECONDS", "seconds between redraws"]),
        (["replay"], ["PATH", "a transcript file"]),
        (["service"], ["--dry-run", "print the files and commands"]),
        (["install"], ["AGENT", "one of: claude"]),
        (["uninstall"], ["--statusline", "remove only ctxd's statusline"]),
        (["status"], ["SESSION", "any unique start of it"]),
    ],
)
def test_help_explains_every_argument(verb: list[str], says: list[str]) -> None:
    out = subprocess.run(
        [sys.executable, "-m", "ctxd", *verb, "--help"], capture_output=True, text=True, check=True
    ).stdout
    for text in says:
        assert text in " ".join(out.split()), out


def test_install_says_it_set_the_statusline_and_uninstall_statusline_removes_only_it(
    world: World,
) -> None:
    out = world.cli("install", "claude").stdout
    assert "ctxd's line is now Claude Code's statusline" in out
    result = world.cli("uninstall", "claude", "--statusline")
    assert result.returncode == 0, result.stderr
    assert "removed ctxd's statusline" in result.stdout
    doc = json.loads((world.claude_dir / "settings.json").read_text())
    assert "statusLine" not in doc and doc["hooks"]["PostToolUse"]
    again = world.cli("install", "claude").stdout  # no statusline again: it is set again, and said
    assert "ctxd's line is now Claude Code's statusline" in again


def test_uninstall_without_hooks_says_one_thing(world: World) -> None:
    (world.home / ".gemini").mkdir(exist_ok=True)
    (world.home / ".gemini" / "settings.json").write_text("{}\n")
    out = world.cli("uninstall", "gemini").stdout
    assert "nothing to remove" in out and "up to date" not in out
    assert len(out.strip().splitlines()) == 1


def test_gemini_settings_with_comments_are_handled(world: World) -> None:
    path = world.home / ".gemini" / "settings.json"
    path.parent.mkdir(exist_ok=True)
    original = (DATA / "settings" / "gemini-comments.json").read_text()
    path.write_text(original)
    result = world.cli("install", "gemini")
    assert result.returncode == 0, result.stderr
    assert "has comments: the rewritten file cannot keep them (the backup does)" in result.stdout
    doc = json.loads(path.read_text())
    assert doc["general"] == {"vimMode": True} and doc["hooks"]["AfterTool"]
    (backup,) = path.parent.glob("settings.json.ctxd-backup-*")
    assert backup.read_text() == original


def test_settings_in_a_missing_directory_creates_nothing(world: World) -> None:
    missing = world.root / "nonexistent" / "dir" / "settings.json"
    result = world.cli("install", "claude", "--settings", str(missing))
    assert result.returncode != 0 and result.stdout == ""
    assert "is not a directory: check the --settings path" in result.stderr
    assert not (world.root / "nonexistent").exists()


def test_service_install_without_a_service_manager_fails(world: World) -> None:
    result = world.cli("service", "install")
    assert result.returncode == 1, result.stdout
    assert "nothing was installed" in result.stdout or "hooks start ctxd" in result.stdout
    assert world.cli("service", "install", "--dry-run").returncode == 0


def test_status_names_the_token_limit_passed_and_the_idle_compaction_that_comes_first() -> None:
    at = time.time() + 3000
    hhmm = time.strftime("%H:%M", time.localtime(at))
    row = _row(
        limit_passed="warning_tokens",
        limit_value=150_000,
        idle_compaction_at=at,
        forecast={
            "tokens_per_call": 5_000.0,
            "calls_to_next_threshold": None,
            "calls_to_compaction": 134,
            "idle_compaction_at": at,
            "first_compaction": "idle",
        },
    )
    text = "\n".join(status_lines({"sessions": [row]}))
    assert "past warning_tokens = 150,000" in text
    assert f"~134 calls to compaction, first: compacted if idle at {hhmm}" in text
    by_percent = _row(limit_passed="warning", limit_value=35.0)
    assert "past warning" not in "\n".join(status_lines({"sessions": [by_percent]}))


def test_the_window_claude_code_compacts_against_is_named_with_its_source() -> None:
    """Claude Code 2.1.334+ compacts a 1M model against 400,000 unless something decides
    otherwise: `ctxd status` says which window and who decided, beside the window's source."""
    row = _row(compact_window=400_000, compact_window_source="default")
    doc = {"daemon": {"version": "0.1.0", "pid": 7, "requests": 1}, "sessions": [row]}
    text = "\n".join(status_lines(doc))
    assert "compact window 400,000 (default)" in text
    (line,) = [ln for ln in session_lines(row) if ln.startswith("compacts against")]
    assert line.split(":", 1)[1].strip() == "compact window 400,000 (default)"
    # An agent without such a window: nothing said.
    assert "compact window" not in "\n".join(status_lines({**doc, "sessions": [_row()]}))
