"""Files that are regular and small but that a parser chokes on: JSON nested deeper than the
parser's stack, an integer of thousands of digits, TOML nested as deep. A cloned repository can
hold any of them as a project's settings file. A real daemon, the real hook client: every hook of
the session is still answered as usual (the file counts as no settings, as the agent itself
would not use it), `status` gives the session's figures, and nothing fails in the daemon."""

from __future__ import annotations

import json

import pytest
from daemon_proc import DATA, Home
from test_hardening_untrusted import (
    HOOK_BOUND,
    PROJECT_SETTINGS,
    _hook,
    _probe_still_warned,
    _shared,
    _tool_call,
)

DEEP = 100_000
CONTENTS = {
    "deep-array": (b"[" * DEEP, b"a = " + b"[" * DEEP),
    "deep-object": (b'{"a":' * DEEP, b"a = " + b"{b=" * DEEP),
    "huge-integer": (b'{"a":' + b"9" * 5000 + b"}", b"a = " + b"9" * 5000),
}


@pytest.mark.parametrize("content", sorted(CONTENTS))
def test_settings_a_parser_chokes_on_count_as_none(home: Home, content: str) -> None:
    """Such a file raised out of the settings reader (RecursionError, ValueError): every hook of
    the session failed inside the daemon (no warning, no handoff) and its status row said
    `cannot compute this session's figures`."""
    home.start()
    probe = home.claude()
    probe.assistant(650_000)
    shared = _shared(home)
    sessions = []
    for n, (agent, relative, variables) in enumerate(PROJECT_SETTINGS):
        project = shared / f"project-{n}"
        planted = project / relative
        planted.parent.mkdir(parents=True)
        json_text, toml_text = CONTENTS[content]
        planted.write_bytes(toml_text if relative.endswith(".toml") else json_text)
        env = {name: str(project / value) for name, value in variables.items()}
        payload, event = _tool_call(agent, f"ses-choke-{n}", project)
        seconds, result = _hook(home, agent, payload, event, env)
        assert result.returncode == 0, result
        assert seconds < HOOK_BOUND, f"{agent} {relative}: {seconds:.2f} s"
        sessions.append(f"ses-choke-{n}")
    rows = {row["session_id"]: row for row in home.status()["sessions"]}
    for sid in sessions:
        assert sid in rows and "error" not in rows[sid], rows.get(sid)
    _probe_still_warned(home, probe)
    assert "hook failed" not in home.log(), home.log_tail(12)


def test_a_megabyte_cwd_is_no_folder_to_walk(home: Home) -> None:
    """An OpenCode payload's `cwd` of half a million folders (`/a/a/a/...`, a megabyte) was
    walked up level by level looking for config files, building each parent's path: quadratic,
    on the event loop, and every hook of every agent waited (minutes) behind it. No system call
    takes a path past PATH_MAX: such a cwd is no folder at all."""
    home.start()
    probe = home.claude()
    probe.assistant(650_000)
    payload, event = _tool_call("opencode", "ses-deep-cwd", home.work)
    payload["cwd"] = "/" + "a/" * 500_000
    seconds, result = _hook(home, "opencode", payload, event)
    assert result.returncode == 0, result
    assert seconds < HOOK_BOUND, f"{seconds:.2f} s"
    _probe_still_warned(home, probe)


STATUSLINES = {
    "claude": DATA / "payloads" / "statusline" / "claude-2.1.332.jsonl",
    "copilot": DATA / "payloads" / "copilot" / "1.0.102" / "interactive" / "11-statusline.json",
}


@pytest.mark.parametrize("agent", sorted(STATUSLINES))
def test_a_statusline_reporting_an_absurd_percentage_still_draws(home: Home, agent: str) -> None:
    """`used_percentage: 1.7e308` (finite, so it passed) overflowed the bar's width: the
    statusline hook failed inside the daemon (OverflowError) and the user's statusline went
    blank; Copilot's drew a 309-digit percentage."""
    home.start()
    text = STATUSLINES[agent].read_text()  # a JSON document, or JSON lines: the last one
    payload = json.loads(text if STATUSLINES[agent].suffix == ".json" else text.splitlines()[-1])
    payload["context_window"]["used_percentage"] = 1.7e308
    seconds, result = _hook(home, agent, payload, "statusline")
    assert result.returncode == 0 and seconds < HOOK_BOUND, result
    line = result.stdout.decode()
    assert "%" in line and len(line) < 200, line
    assert "hook failed" not in home.log(), home.log_tail()
