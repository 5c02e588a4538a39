"""Claude Code, the real CLI, with ctxd's hooks installed by `ctxd install claude --transport
http`: every event but SessionStart is posted to the daemon's loopback listener.

The same scripted sessions as test_claude_e2e.py give the same warnings, escalation and handoff;
`strace -f` of the CLI counts the processes started, and only SessionStart starts one of ctxd's.
"""

from __future__ import annotations

import json
import re
import shlex
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from pathlib import Path

import pytest
from e2e_support import (
    CLAUDE_STREAM,
    Ctxd,
    Json,
    Mock,
    RunDir,
    Tmux,
    claude_prepare,
    claude_tool_steps,
    run,
    wait_for,
)
from loopback import free_port
from test_claude_e2e import (
    CRITICAL,
    HANDOFF,
    TOOL_SECONDS,
    WARNING,
    WINDOW_BASIS,
    Rig,
    at_calls,
    handoff_messages,
    session_id,
    stream_events,
)

pytestmark = pytest.mark.e2e

#: The trace of test_claude_e2e.test_warnings_follow_the_debounce_escalate_and_hand_off_once.
CACHE_READ = [
    95_000,
    295_000,
    655_000,
    660_000,
    665_000,
    670_000,
    675_000,
    685_000,
    755_000,
    765_000,
    775_000,
]


def http_config(port: int, extra: str = WINDOW_BASIS) -> str:
    return f"{extra}[http]\nenabled = true\nport = {port}\n"


@pytest.fixture
def make_http_rig(claude_bin: Path, tmp_path: Path) -> Iterator[Callable[..., Rig]]:
    cleanup = ExitStack()

    def make(steps: list[Json], config: str = WINDOW_BASIS, *, start: bool = True) -> Rig:
        rd = RunDir.create(tmp_path)
        settings = claude_prepare(rd)
        ctxd = Ctxd(rd, http_config(free_port(), config), {"CLAUDE_CONFIG_DIR": str(rd.config)})
        ctxd.install("claude", settings, "--transport", "http")
        cleanup.callback(ctxd.stop)
        if start:
            ctxd.start()
        mock = Mock("mock_anthropic", rd.root, {"steps": steps})
        cleanup.callback(mock.stop)
        mock.start()
        return Rig(claude_bin, rd, ctxd, mock, settings)

    with cleanup:
        yield make


def installed_hooks(rig: Rig) -> dict[str, list[Json]]:
    doc = json.loads(rig.settings.read_text())
    hooks = doc["hooks"].items()
    return {event: [h for g in groups for h in g["hooks"]] for event, groups in hooks}


def strace_prefix(trace: Path) -> list[str]:
    """`strace -f` writing every execve of the command after it (and its children) to `trace`."""
    options = ["-f", "-qq", "-e", "trace=execve", "-e", "signal=none", "-s", "4096"]
    return ["strace", *options, "-o", str(trace)]


def executed(trace: Path) -> list[list[str]]:
    """The argv of every process a `strace_prefix` trace saw executed."""
    execs = []
    for line in trace.read_text(errors="replace").splitlines():
        found = re.search(r'execve\("[^"]*", \[(.*?)\](?:, 0x[0-9a-f]+| /\*)', line)
        if found and "= -1" not in line:
            execs.append(re.findall(r'"((?:[^"\\]|\\.)*)"', found.group(1)))
    return execs


def traced(rig: Rig, trace: Path, *args: str, **env: str) -> tuple[list[Json], list[list[str]]]:
    """`claude -p ARGS` under `strace -f`: its stream events, and the argv of every process it
    (or anything under it) executed."""
    argv = [
        *strace_prefix(trace),
        str(rig.bin),
        "-p",
        *args,
        *CLAUDE_STREAM,
    ]
    res = run(argv, cwd=rig.rd.work, env=rig.env(**env))
    assert res.returncode == 0, res.describe()
    return stream_events(res), executed(trace)


def is_client(word: str) -> bool:
    """A word of a hook client's command line: the Python client or the native one."""
    return "ctxd_hook" in word or Path(word).name == "ctxd-hook"


def ctxd_processes(execs: list[list[str]]) -> list[list[str]]:
    """The processes that ran ctxd's code: its hook client, or ctxd itself (not the shell
    Claude Code runs a command hook in)."""
    return [
        argv
        for argv in execs
        if Path(argv[0]).name not in ("sh", "bash", "dash")
        and (
            any(is_client(word) or Path(word).name == "ctxd" for word in argv)
            or "-m ctxd" in " ".join(argv)
        )
    ]


def requires_strace() -> None:
    if shutil.which("strace") is None:
        pytest.skip("strace not installed (apt-get install strace)")
    probe = subprocess.run(["strace", "-f", "-o", "/dev/null", "true"], capture_output=True)
    if probe.returncode != 0:
        pytest.skip(f"strace cannot trace here: {probe.stderr.decode(errors='replace')[:200]}")


def test_http_hooks_warn_escalate_and_hand_off_like_command_hooks(
    make_http_rig: Callable[..., Rig], tmp_path: Path
) -> None:
    requires_strace()
    rig = make_http_rig(claude_tool_steps(10, CACHE_READ, TOOL_SECONDS))
    hooks = installed_hooks(rig)
    assert [h["type"] for h in hooks["SessionStart"]] == ["command"]
    for event in ("PostToolUse", "Stop", "SubagentStop", "PreCompact", "PostCompact", "SessionEnd"):
        assert [h["type"] for h in hooks[event]] == ["http"], event

    events, execs = traced(rig, tmp_path / "strace.txt", "Run the steps")

    # the trace of the command transport (test_claude_e2e), call for call
    main = rig.main()
    assert len(main) == 11
    assert at_calls(main, WARNING) == [2, 7]
    assert at_calls(main, CRITICAL) == [8]
    shown = [
        e.get("content", "")
        for e in events
        if e.get("type") == "system" and HANDOFF in str(e.get("content", ""))
    ]
    assert len(shown) == 1, events
    assert not any(HANDOFF in json.dumps(r["body"]) for r in main)
    sid = next(e["session_id"] for e in events if e.get("session_id"))
    row = rig.ctxd.session(sid)
    assert (row["tokens"], row["window"], row["severity"]) == (780_000, 1_000_000, "critical")

    # the hooks that ran: 10 PostToolUse, a Stop and a SessionEnd over HTTP, none failed
    responses = [e for e in events if e.get("subtype") == "hook_response"]
    names = [e.get("hook_event") or e.get("hook_name") for e in responses]
    assert all(e.get("outcome") == "success" for e in responses), responses
    assert sum("PostToolUse" in str(n) for n in names) == 10, names
    status = rig.ctxd.status()
    assert status["hooks_answered"] >= 12, status

    # processes: one hook client, for SessionStart; nothing of ctxd's for the 12 others
    ours = ctxd_processes(execs)
    assert len(ours) == 1, ours
    assert any(is_client(word) for word in ours[0]), ours
    assert len(execs) > 10, "strace saw no process at all"  # the Bash tool calls ran


def test_a_resumed_session_is_not_asked_for_a_handoff_again(
    make_http_rig: Callable[..., Rig],
) -> None:
    rig = make_http_rig(
        [
            *claude_tool_steps(1, [755_000, 765_000], TOOL_SECONDS)[:1],
            {"text": "Done.", "usage": claude_tool_steps(1, [765_000])[1]["usage"]},
            {"text": "Still here."},
        ]
    )
    res = rig.claude("Run the step")
    assert len(handoff_messages(res)) == 1, res.describe()
    again = rig.claude("Anything else?", "--resume", session_id(res))
    assert handoff_messages(again) == [], again.describe()


def test_daemon_down_during_http_hooks(make_http_rig: Callable[..., Rig], tmp_path: Path) -> None:
    """The daemon stops after SessionStart: what does the user see of the HTTP hooks that then
    find nothing on the port? Recorded in docs/benchmarks.md; the session must complete."""
    rig = make_http_rig(claude_tool_steps(3, [655_000, 755_000, 765_000, 775_000], TOOL_SECONDS))
    rig.ctxd.stop_with_cli()
    res = rig.claude("Run the steps", CTXD_NO_SPAWN="1")
    events = stream_events(res)
    responses = [e for e in events if e.get("subtype") == "hook_response"]
    failed = [e for e in responses if e.get("outcome") != "success"]
    record = {
        "hook_responses": responses,
        "stderr": res.stderr,
        "result": events[-1].get("result"),
    }
    (tmp_path / "daemon-down.json").write_text(json.dumps(record, indent=1))
    print(json.dumps(record, indent=1)[:6000])
    assert events[-1]["result"] == "Done."
    assert "CONTEXT " not in json.dumps([r["body"] for r in rig.main()])
    assert failed, "expected the HTTP hooks to fail with nothing listening"


def test_a_port_kept_by_systemd_starts_ctxd_on_the_first_http_hook(
    make_http_rig: Callable[..., Rig],
) -> None:
    """What `ctxd service install` sets up when [http] is on (systemd keeps the port; played by
    systemd-socket-activate): no daemon runs and SessionStart's command hook cannot reach one,
    so the first PostToolUse over HTTP is what starts ctxd, and it is answered, not failed."""
    if shutil.which("systemd-socket-activate") is None:
        pytest.skip("systemd-socket-activate not installed (apt-get install systemd)")
    rig = make_http_rig(claude_tool_steps(10, CACHE_READ, TOOL_SECONDS), start=False)
    port = int(re.search(r"port = (\d+)", rig.ctxd.config_path.read_text()).group(1))  # type: ignore[union-attr]
    activated = rig.rd.root / "run" / "activated.sock"
    env = {**rig.ctxd._cmd_env(), "CTXD_SOCKET": str(activated)}
    argv = ["systemd-socket-activate", "-l", str(activated), "-l", f"127.0.0.1:{port}"]
    argv += [f"--setenv={k}={v}" for k, v in env.items()]
    argv += [sys.executable, "-m", "ctxd", "serve", "--log-level", "debug"]
    with (rig.rd.root / "activated.log").open("wb") as log:
        proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, cwd=rig.rd.root)
    try:
        res = rig.claude("Run the steps")
        events = stream_events(res)
        responses = [e for e in events if e.get("subtype") == "hook_response"]
        assert responses and all(e.get("outcome") == "success" for e in responses), responses
        main = rig.main()
        assert at_calls(main, WARNING) == [2, 7]
        assert at_calls(main, CRITICAL) == [8]
        assert "from systemd" in (rig.rd.root / "activated.log").read_text()
        rig.ctxd.env["CTXD_SOCKET"] = str(activated)
        assert rig.ctxd.session(session_id(res))["tokens"] == 780_000
    finally:
        proc.terminate()
        proc.wait(15)


def test_what_the_user_sees_when_the_daemon_is_down(
    make_http_rig: Callable[..., Rig], tmp_path: Path
) -> None:
    """The interactive UI (tmux) with HTTP hooks and no daemon on the port: Claude Code shows
    a failed hook under every tool call. This is why `ctxd doctor` asks for a service manager
    that keeps the port (see the test above) with --transport http."""
    if shutil.which("tmux") is None:
        pytest.skip("tmux not installed (apt-get install tmux)")
    rig = make_http_rig(claude_tool_steps(2, [95_000, 295_000, 300_000], TOOL_SECONDS), start=False)
    doc = json.loads(rig.settings.read_text())
    doc["permissions"] = {"allow": ["Bash"]}
    rig.settings.write_text(json.dumps(doc))
    tmux = Tmux(tmp_path / "tmux.sock", "cc")
    env = " ".join(shlex.quote(f"{k}={v}") for k, v in rig.env().items())
    tmux.start(
        f"cd {shlex.quote(str(rig.rd.work))} && env -i {env} {shlex.quote(str(rig.bin))} "
        "--permission-mode default; echo CLAUDE-EXITED; sleep 30"
    )
    try:
        assert tmux.wait("❯", 40), tmux.pane()
        tmux.send("Run the steps")
        assert wait_for(lambda: len(rig.main()) >= 3, 60), tmux.pane()
        assert tmux.wait("Done.", 30), tmux.pane()
        time.sleep(1.0)
        pane = tmux.pane()
        (tmp_path / "pane.txt").write_text(pane)
        print(pane)
        # one "hook failed" per tool call, with the connection error, and the Stop hook's
        assert pane.count("PostToolUse:Bash hook failed") == 2, pane
        assert pane.count("connect ECONNREFUSED") == 3 and "Stop hook failed" in pane, pane
    finally:
        tmux.kill()


def test_http_hooks_carry_claude_codes_environment(make_http_rig: Callable[..., Rig]) -> None:
    """The variables Claude Code's compaction rule reads reach the daemon through the headers
    the HTTP hooks interpolate (allowedEnvVars): CLAUDE_CODE_MAX_OUTPUT_TOKENS=8000 moves the 1M
    window's compaction point from 967,000 to 979,000, as it does over the command path."""
    rig = make_http_rig(claude_tool_steps(1, [95_000, 100_000], TOOL_SECONDS), "")
    # SessionStart's command hook passes the environment too: without it, only HTTP hooks do.
    doc = json.loads(rig.settings.read_text())
    del doc["hooks"]["SessionStart"]
    rig.settings.write_text(json.dumps(doc))
    res = rig.claude("Run the step", CLAUDE_CODE_MAX_OUTPUT_TOKENS="8000")
    row = rig.ctxd.session(session_id(res))
    assert (row["window"], row["compaction_at"]) == (1_000_000, 979_000), row
