"""What a newcomer meets in the first hour with `ctxd`, each as a real process: bare `ctxd`, each
verb's `--help`, windows written as ctxd prints them, plurals, reasons in words."""

from __future__ import annotations

import json
import subprocess
from typing import TYPE_CHECKING, Any

import pytest

from ctxd.cli import VERBS

if TYPE_CHECKING:
    from conftest import World


def test_bare_ctxd_prints_a_short_usage_with_every_verb(world: World) -> None:
    done = world.cli()

    assert done.returncode == 2
    assert "error:" not in done.stderr and "required" not in done.stderr, done.stderr
    assert done.stderr.startswith("usage: ctxd VERB"), done.stderr
    assert len(done.stderr.splitlines()) <= len(VERBS) + 3
    for verb, (text, _, _) in VERBS.items():
        assert f"  {verb} " in done.stderr and text in done.stderr, verb


@pytest.mark.parametrize("verb", ["status", "replay", "install", "stop", "doctor"])
def test_each_verbs_help_says_what_it_does(world: World, verb: str) -> None:
    done = world.cli(verb, "--help")

    assert done.returncode == 0, done.stderr
    text, _, _ = VERBS[verb]
    # usage, a blank line, then the description (argparse printed no description at all)
    assert done.stdout.split("\n\n")[1].strip() == text[0].upper() + text[1:] + ".", done.stdout


@pytest.mark.parametrize("window", ["200k", "200K", "200_000", "200,000", "200000"])
def test_replay_takes_a_window_as_ctxd_prints_one(world: World, window: str) -> None:
    t = world.claude()
    t.assistant(150_000)

    done = world.cli("replay", "--json", "--window", window, str(t.path))

    assert done.returncode == 0, done.stderr
    final = json.loads(done.stdout.splitlines()[-1])
    assert (final["window"], final["used_pct"]) == (200_000, 75.0)


@pytest.mark.parametrize("window", ["1M", "1m"])
def test_replay_takes_a_window_in_millions(world: World, window: str) -> None:
    t = world.claude()
    t.assistant(150_000)

    done = world.cli("replay", "--json", "--window", window, str(t.path))

    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout.splitlines()[-1])["window"] == 1_000_000


def test_a_window_that_is_no_number_is_one_line(world: World) -> None:
    t = world.claude()
    t.assistant(150_000)

    done = world.cli("replay", "--window", "lots", str(t.path))

    assert done.returncode == 2
    assert "not a number of tokens: 'lots' (e.g. 200000, 200k, 1M)" in done.stderr


def test_status_says_why_a_session_ended_in_words_and_json_keeps_the_code(ctxd: World) -> None:
    t = ctxd.claude()
    t.assistant(300_000)
    ctxd.hook_out("claude", t.payload("PostToolUse"))
    ctxd.hook_out("claude", t.payload("SessionEnd", reason="prompt_input_exit"))

    text = ctxd.cli("status")
    one = ctxd.cli("status", t.session_id[:8])
    doc = json.loads(ctxd.cli("status", "--json").stdout)

    assert text.returncode == 0, text.stderr
    assert "ended (the user quit)" in text.stdout, text.stdout
    assert "prompt_input_exit" not in text.stdout + one.stdout
    assert "ended:" in one.stdout and "the user quit" in one.stdout, one.stdout
    assert [r["ended_reason"] for r in doc["sessions"]] == ["prompt_input_exit"]
    # One session, and the used share says what it is a share of.
    assert " · 1 session · " in text.stdout.splitlines()[0]
    assert "USED OF WINDOW" in text.stdout


def test_a_forecast_of_one_call_is_said_in_the_singular() -> None:
    from ctxd.cli.report import session_lines

    row = {
        "session_id": "s1",
        "agent": "claude",
        "window": 200_000,
        "window_source": "table",
        "severity": "warning",
        "updated_at": 0.0,
        "forecast": {
            "tokens_per_call": 5_000.0,
            "calls_to_next_threshold": 1,
            "calls_to_compaction": 1,
        },
    }

    (forecast,) = (line for line in session_lines(row, now=1.0) if line.startswith("forecast"))

    assert forecast.endswith("~1 call to next threshold, ~1 call to compaction"), forecast


def test_backups_are_pruned_to_the_first_and_the_newest_five(world: World) -> None:
    settings = world.claude_dir / "settings.json"
    settings.parent.mkdir(parents=True, exist_ok=True)
    original = '{"theme": "dark"}\n'
    settings.write_text(original)

    for _ in range(5):
        for verb in ("install", "uninstall"):
            done = world.cli(verb, "claude")
            assert done.returncode == 0, done.stderr

    backups = sorted(settings.parent.glob("settings.json.ctxd-backup-*"), key=_mtime)
    assert len(backups) == 1 + 5, backups  # ten changes, ten backups made
    # The first is the file as it was before ctxd ever changed it.
    assert backups[0].read_text() == original
    assert json.loads(settings.read_text()) == json.loads(original)  # the last uninstall


def _mtime(path: Any) -> int:
    return int(path.stat().st_mtime_ns)


USER_LINE = {"type": "command", "command": "my-line --fancy 'a b'", "padding": 2}


@pytest.mark.parametrize(
    "remove", [["uninstall", "claude"], ["uninstall", "claude", "--statusline"]]
)
def test_statusline_replaced_then_uninstalled_is_the_users_own_again(
    ctxd: World, remove: list[str]
) -> None:
    settings = ctxd.claude_dir / "settings.json"
    settings.parent.mkdir(parents=True, exist_ok=True)
    settings.write_text(json.dumps({"statusLine": USER_LINE}))

    first = ctxd.cli("install", "claude")  # the user's line kept, run by ctxd's client
    replaced = ctxd.cli("install", "claude", "--statusline")
    again = ctxd.cli("install", "claude")  # a later plain reinstall keeps what it carries

    for done in (first, replaced, again):
        assert done.returncode == 0, done.stderr
    assert "puts it back exactly as it was" in replaced.stdout, replaced.stdout
    line = json.loads(settings.read_text())["statusLine"]
    assert "my-line" in line["command"]  # carried, not run: ctxd's own line is drawn
    t = ctxd.claude()
    t.assistant(300_000)
    shown = subprocess.run(
        line["command"],
        shell=True,
        input=json.dumps(t.payload("PostToolUse")).encode(),
        env=ctxd.env,
        capture_output=True,
        timeout=30,
        check=False,
    )
    assert shown.returncode == 0 and b"300k/1M" in shown.stdout, shown

    done = ctxd.cli(*remove)

    assert done.returncode == 0, done.stderr
    assert json.loads(settings.read_text())["statusLine"] == USER_LINE


def test_copilot_statusline_replaced_then_uninstalled_is_the_users_own_again(world: World) -> None:
    assert world.cli("install", "copilot").returncode == 0
    settings = next(world.root.rglob(".copilot/settings.json"))
    doc = json.loads(settings.read_text())
    settings.write_text(json.dumps({**doc, "statusLine": USER_LINE}))

    assert world.cli("install", "copilot", "--statusline").returncode == 0
    assert world.cli("uninstall", "copilot").returncode == 0

    assert json.loads(settings.read_text())["statusLine"] == USER_LINE


def test_the_daemons_log_counts_in_the_singular(world: World) -> None:
    world.start()
    t = world.claude()
    t.assistant(100_000)
    world.hook_out("claude", t.payload("PostToolUse"))
    world.stop()

    world.start()

    assert "restored 1 session\n" in world.log(), world.log()
