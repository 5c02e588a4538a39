"""Files others can plant where ctxd reads on an agent's behalf: a FIFO, a link to a device, a
directory. A real daemon, real files, the real hook client and CLI: every hook still answers in
its normal time, `ctxd status` answers and names the file it did not read, `ctxd doctor` names
it, the daemon's memory stays flat, and another session keeps its warnings.

Each test makes its own shared folder inside the world's private root (never `/tmp` itself):
a "shared" folder outside HOME and outside git stands for `/tmp` or a cloned repository.
"""

from __future__ import annotations

import json
import os
import resource
import subprocess
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from daemon_proc import (
    HOOK_CODE,
    PAYLOADS,
    PYTHON,
    ClaudeSession,
    Home,
    proc_status_kib,
    wait_for,
)

#: A hook answers within this, a daemon that waits on nothing included (the client's own
#: timeout is 2 s: a hook that took longer was not answered).
HOOK_BOUND = 1.5
#: Memory a daemon may gain while it is handed a link to /dev/zero on every hook.
RSS_BOUND_KIB = 64 * 1024
#: The daemon's address space, capped so that a daemon that does read /dev/zero fails its own
#: allocation instead of taking the machine's memory.
ADDRESS_SPACE = 3 * 1024**3


def _capped() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (ADDRESS_SPACE, ADDRESS_SPACE))


def _payload(relative: str, **fields: Any) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((PAYLOADS / relative).read_text())
    data.pop("transcript_path", None)
    data.update(fields)
    return data


def _tool_call(agent: str, session_id: str, cwd: Path) -> tuple[dict[str, Any], str | None]:
    """A real tool-call hook payload of `agent` for a session in `cwd`, and the event name its
    installed command passes (None: the payload names it)."""
    where = {"session_id": session_id, "cwd": str(cwd)}
    if agent == "claude":
        return _payload("claude/2.1.332/print/04-PostToolUse.json", **where), None
    if agent == "gemini":
        return _payload("gemini/0.61.0/print/05-AfterTool.json", **where), None
    if agent == "qwen":
        return _payload("qwen/0.24.4/print/05-PostToolUse.json", **where), None
    if agent == "pi":
        return _payload("pi/0.73.1/print/02-tool_result.json", **where), None
    if agent == "codex":
        return _payload("codex/0.171.0/exec/04-PostToolUse.json", **where), None
    if agent == "copilot":
        data = _payload("copilot/1.0.102/print/04-postToolUse.json", cwd=str(cwd))
        data["sessionId"] = session_id
        return data, "postToolUse"
    if agent == "opencode":  # what its plugin sends (clients/opencode/ctxd.js)
        return {**where, "tool_use_id": "call_1"}, "tool_execute_after"
    raise AssertionError(agent)


def _hook(
    home: Home,
    agent: str,
    payload: dict[str, Any],
    event: str | None,
    env: dict[str, str] | None = None,
) -> tuple[float, subprocess.CompletedProcess[bytes]]:
    """The real hook client, run as the agent's installed command runs it; (seconds, result)."""
    argv = [PYTHON, "-S", "-I", "-c", HOOK_CODE, agent, *([event] if event else [])]
    started = time.monotonic()
    result = subprocess.run(
        argv,
        input=json.dumps(payload).encode(),
        env={**home.env, **(env or {})},
        cwd=home.work,
        capture_output=True,
        timeout=30,
        check=False,
    )
    return time.monotonic() - started, result


def _status_names(home: Home, path: Path) -> dict[str, Any]:
    """The status document, which must come within a second and name `path` as not read."""
    doc = home.status(timeout=1.0)
    named = [r for r in doc.get("refused_files", []) if r.get("path") == str(path)]
    assert named, f"{path} not named in status: {doc.get('refused_files')}"
    return dict(named[0])


def _probe_still_warned(home: Home, probe: ClaudeSession) -> None:
    """Another session, untouched by the planted file, still gets its warning, in time."""
    started = time.monotonic()
    out = home.hook_out(probe.payload("PostToolUse"))
    assert time.monotonic() - started < HOOK_BOUND
    assert out is not None and "CONTEXT WARNING" in json.dumps(out), out


def _shared(home: Home) -> Path:
    """A folder outside HOME and outside git, as `/tmp` or a cloned repository is."""
    shared = home.root / "shared"
    shared.mkdir(mode=0o755)
    return shared


# (agent, where its project settings file is, relative to the session's folder, and the
# variables its hook passes: codex and copilot read theirs from a home folder the hook names)
PROJECT_SETTINGS = [
    ("claude", ".claude/settings.json", {}),
    ("claude", ".claude/settings.local.json", {}),
    ("gemini", ".gemini/settings.json", {}),
    ("qwen", ".qwen/settings.json", {}),
    ("pi", ".pi/settings.json", {}),
    ("opencode", "opencode.json", {}),
    ("opencode", ".opencode/opencode.json", {}),
    ("codex", "codex-home/config.toml", {"CODEX_HOME": "codex-home"}),
    ("copilot", "copilot-home/settings.json", {"COPILOT_HOME": "copilot-home"}),
]


def _plant(kind: str) -> Callable[[Path], None]:
    def fifo(path: Path) -> None:
        os.mkfifo(path, 0o666)

    def dev_zero(path: Path) -> None:
        path.symlink_to("/dev/zero")  # what `git clone` keeps: size 0 by stat, endless

    def directory(path: Path) -> None:
        path.mkdir()

    def huge(path: Path) -> None:
        with path.open("wb") as f:
            f.truncate(1024**3)  # sparse: costs no disk

    kinds = {"fifo": fifo, "dev_zero": dev_zero, "directory": directory, "huge": huge}
    return kinds[kind]


#: What status says of each kind of planted settings file.
REASONS = {
    "fifo": "not a regular file (a FIFO)",
    "dev_zero": "not a regular file (a character device)",
    "directory": "not a regular file (a directory)",
    "huge": "larger than 4 MiB",
}


@pytest.mark.parametrize("kind", ["fifo", "dev_zero", "huge"])
@pytest.mark.parametrize(
    ("agent", "relative", "variables"),
    PROJECT_SETTINGS,
    ids=[f"{a}:{r}" for a, r, _ in PROJECT_SETTINGS],
)
def test_a_planted_settings_file_neither_hangs_nor_fills_the_daemon(
    home: Home, agent: str, relative: str, variables: dict[str, str], kind: str
) -> None:
    """A FIFO as a project's settings file hung the daemon for good (a blocking read on the
    event loop); a link to /dev/zero read gigabytes into memory (its size is 0 by `stat`); a
    file too big to be settings was skipped without a word."""
    proc = home.start(preexec_fn=_capped)
    probe = home.claude()
    probe.assistant(650_000)
    project = _shared(home) / "project"
    planted = project / relative
    planted.parent.mkdir(parents=True)
    _plant(kind)(planted)
    env = {name: str(project / value) for name, value in variables.items()}
    rss_before = proc_status_kib(proc.pid, "VmRSS")
    try:
        timings = []
        for n in range(3):
            payload, event = _tool_call(agent, f"ses-planted-{n}", project)
            seconds, result = _hook(home, agent, payload, event, env)
            assert result.returncode == 0, result
            timings.append(round(seconds, 2))
        assert max(timings) < HOOK_BOUND, f"hooks took {timings} s"
        named = _status_names(home, planted)
        assert named["reason"] == REASONS[kind], named
        _probe_still_warned(home, probe)
        grown = proc_status_kib(proc.pid, "VmHWM") - rss_before
        assert grown < RSS_BOUND_KIB, f"the daemon's peak memory grew by {grown:,} KiB"
        assert proc.poll() is None
        assert home.log().count(f"not reading {planted}") == 1, home.log_tail()
    finally:
        home.kill()  # a daemon stuck on a FIFO does not take SIGTERM


def test_status_and_doctor_name_the_file_and_its_session(home: Home) -> None:
    home.start()
    project = _shared(home) / "repo"
    (project / ".pi").mkdir(parents=True)
    planted = project / ".pi" / "settings.json"
    planted.symlink_to("/dev/zero")
    payload, event = _tool_call("pi", "ses-pi", project)
    try:
        seconds, result = _hook(home, "pi", payload, event)
        assert result.returncode == 0 and seconds < HOOK_BOUND
        text = home.cli("status", timeout=5)
        assert text.returncode == 0, text.stderr
        assert f"{planted}: not a regular file (a character device)" in text.stdout, text.stdout
        row = [r for r in home.status_json()["sessions"] if r["session_id"] == "ses-pi"]
        assert row and row[0]["refused_files"][0]["path"] == str(planted), row
        doctor = home.cli("doctor", timeout=30)
        assert f"{planted}: not a regular file (a character device)" in doctor.stdout, doctor.stdout
        assert doctor.returncode != 0
        # made a regular file again: read again, no longer named
        planted.unlink()
        planted.write_text("{}")
        time.sleep(1.1)  # settings are looked at again at most once a second
        _hook(home, "pi", payload, event)
        assert not home.status(timeout=1.0)["refused_files"]
    finally:
        home.kill()


def test_opencode_outside_home_and_git_reads_nothing_above_its_folder(home: Home) -> None:
    """OpenCode's config walk climbed from the session's folder to `/` outside git, so a FIFO
    any local user made at `/tmp/opencode.json` hung every hook. Here the session is in
    `shared/p` and the FIFO is in `shared/`, where the old walk went: the walk stops at the
    session's own folder (outside HOME and git) and never opens it."""
    home.start()
    probe = home.claude()
    probe.assistant(650_000)
    shared = _shared(home)
    (shared / "p").mkdir()
    fifo = shared / "opencode.json"
    os.mkfifo(fifo, 0o666)
    (shared / ".opencode").mkdir()
    os.mkfifo(shared / ".opencode" / "opencode.json", 0o666)
    try:
        for n in range(3):
            payload, event = _tool_call("opencode", f"ses_{n}", shared / "p")
            seconds, result = _hook(home, "opencode", payload, event)
            assert result.returncode == 0
            assert seconds < HOOK_BOUND, f"an OpenCode hook took {seconds:.2f} s"
        doc = home.status(timeout=1.0)
        assert {r["session_id"] for r in doc["sessions"]} >= {"ses_0", "ses_1", "ses_2"}
        assert not doc["refused_files"], "a file above the session's folder was looked at"
        _probe_still_warned(home, probe)
    finally:
        home.kill()


@pytest.mark.parametrize("kind", ["fifo", "dev_zero", "directory"])
def test_a_hook_naming_a_transcript_that_is_no_file(home: Home, kind: str) -> None:
    """A payload's `transcript_path` naming a FIFO, a link to a device or a directory: the hook
    answers in time, the session is kept without it, and status names what was not read."""
    proc = home.start(preexec_fn=_capped)
    probe = home.claude()
    probe.assistant(650_000)
    session = home.claude()
    planted = _shared(home) / f"{session.session_id}.jsonl"
    _plant(kind)(planted)
    rss_before = proc_status_kib(proc.pid, "VmRSS")
    try:
        for _ in range(3):
            payload = session.payload("PostToolUse", transcript_path=str(planted))
            started = time.monotonic()
            result = home.hook(payload)
            assert result.returncode == 0
            assert time.monotonic() - started < HOOK_BOUND
        named = _status_names(home, planted)
        assert named["what"] == "transcript"
        assert named["reason"].startswith("not a regular file ("), named
        rows = [r for r in home.status()["sessions"] if r["session_id"] == session.session_id]
        assert rows and rows[0]["refused_files"], rows
        _probe_still_warned(home, probe)
        grown = proc_status_kib(proc.pid, "VmHWM") - rss_before
        assert grown < RSS_BOUND_KIB, f"the daemon's peak memory grew by {grown:,} KiB"
    finally:
        home.kill()


def test_a_followed_transcript_replaced_by_a_fifo_is_named_once(home: Home) -> None:
    """A transcript the daemon follows, replaced by a FIFO: not opened for reading (it would
    wait), named in status, logged once however often it is looked at."""
    home.start()
    session = home.claude()
    session.assistant(100_000)
    home.hook_out(session.payload("PostToolUse"))
    wait_for(lambda: home.row(session), 5, "the session's row")
    session.path.unlink()
    os.mkfifo(session.path, 0o600)
    try:
        for _ in range(3):
            started = time.monotonic()
            assert home.hook(session.payload("PostToolUse")).returncode == 0
            assert time.monotonic() - started < HOOK_BOUND
        named = _status_names(home, session.path)
        assert named["reason"] == "not a regular file (a FIFO)"
        assert home.log().count(f"not reading {session.path}") == 1, home.log_tail()
    finally:
        home.kill()


@pytest.mark.parametrize("kind", ["fifo", "dev_zero", "directory"])
@pytest.mark.parametrize("verb", ["replay", "handoff"])
def test_replay_and_handoff_of_what_is_no_transcript_say_so_in_one_line(
    home: Home, verb: str, kind: str
) -> None:
    planted = _shared(home) / f"{uuid.uuid4()}.jsonl"
    _plant(kind)(planted)
    args = [verb, str(planted)] if verb == "replay" else [verb, "--transcript", str(planted)]
    for extra in ([], ["--agent", "claude"]):
        started = time.monotonic()
        result = home.cli(*args, *extra, timeout=10)
        assert time.monotonic() - started < 5
        assert result.returncode != 0
        lines = result.stderr.strip().splitlines()
        assert len(lines) == 1 and str(planted) in lines[0], result.stderr
        assert "not a regular file" in lines[0], result.stderr


def test_a_restarted_daemon_meets_the_fifo_again_and_still_answers(home: Home) -> None:
    """The sessions come back from the snapshot with their folders, and status judges them with
    their settings: a FIFO there hung the new daemon at its first status."""
    home.start()
    project = _shared(home) / "project"
    (project / ".claude").mkdir(parents=True)
    planted = project / ".claude" / "settings.json"
    os.mkfifo(planted, 0o666)
    payload, event = _tool_call("claude", "ses-restarted", project)
    try:
        _hook(home, "claude", payload, event)
        assert home.stop() == 0
        home.start()
        started = time.monotonic()
        _status_names(home, planted)
        assert time.monotonic() - started < 1.0
        seconds, result = _hook(home, "claude", payload, event)
        assert result.returncode == 0 and seconds < HOOK_BOUND
    finally:
        if home.proc is not None:
            home.kill()


def test_a_hook_naming_a_huge_sparse_transcript_keeps_the_daemon_small(home: Home) -> None:
    """A regular file, so it is followed: read in slices in the background (hooks and status
    answer meanwhile), memory bounded by the reader's longest line, not by the file. (A guard:
    this held before the untrusted-file reader too.)"""
    proc = home.start(preexec_fn=_capped)
    probe = home.claude()
    probe.assistant(650_000)
    session = home.claude()
    sparse = _shared(home) / f"{session.session_id}.jsonl"
    with sparse.open("wb") as f:
        f.truncate(4 * 1024**3)  # costs no disk; reads as 4 GiB of zeros
    rss_before = proc_status_kib(proc.pid, "VmRSS")
    try:
        for _ in range(3):
            started = time.monotonic()
            result = home.hook(session.payload("PostToolUse", transcript_path=str(sparse)))
            assert result.returncode == 0
            assert time.monotonic() - started < HOOK_BOUND
            assert home.status(timeout=1.0)["sessions"]
        _probe_still_warned(home, probe)
        grown = proc_status_kib(proc.pid, "VmHWM") - rss_before
        assert grown < 2 * RSS_BOUND_KIB, f"the daemon's peak memory grew by {grown:,} KiB"
    finally:
        home.kill()
