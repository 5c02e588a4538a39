"""Qwen Code, the real CLI, with ctxd's hooks installed by `ctxd install qwen --transport http`:
every event but SessionStart is posted to the daemon's loopback listener (Qwen Code 0.24.4's
HttpHookRunner), which runs in the mock's network namespace beside the CLI.

The same scripted sessions as test_qwen_e2e.py give the same warnings at the same calls, the
same handoff and the same reset after a real compression; `strace -f` of the CLI counts the
processes started, and only SessionStart starts one of ctxd's.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from pathlib import Path

import pytest
from e2e_support import Json
from loopback import free_port
from test_claude_http_e2e import (
    ctxd_processes,
    executed,
    is_client,
    requires_strace,
    strace_prefix,
)
from test_qwen_e2e import (
    Rig,
    block_handoff_session,
    rig_maker,
    tool_steps,
    warnings_session,
)

pytestmark = pytest.mark.e2e

#: What `ctxd install qwen` registers, and over which transport with --transport http.
HTTP_EVENTS = ("UserPromptSubmit", "PostToolUse", "Stop", "PostCompact", "SessionEnd")


def http_config(port: int, extra: str = "") -> str:
    return f"{extra}[http]\nenabled = true\nport = {port}\n"


@pytest.fixture
def make_http_rig(qwen_bin: Path, netns: bool, tmp_path: Path) -> Iterator[Callable[..., Rig]]:
    with ExitStack() as cleanup:
        port = free_port()
        make = rig_maker(qwen_bin, netns, tmp_path, cleanup, "--transport", "http")

        def make_http(steps: list[Json], config: str = "", **kwargs: bool) -> Rig:
            return make(steps, http_config(port, config), **kwargs)

        yield make_http


def installed_hooks(rig: Rig) -> dict[str, list[Json]]:
    doc = json.loads(rig.settings.read_text())
    return {
        event: [h for g in groups for h in g["hooks"]] for event, groups in doc["hooks"].items()
    }


def hook_lines(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if "hook" in line.lower()]


def test_http_hooks_warn_escalate_and_hand_off_like_command_hooks(
    make_http_rig: Callable[..., Rig], tmp_path: Path
) -> None:
    requires_strace()
    trace = tmp_path / "strace.txt"
    answered: list[int] = []

    def ready(rig: Rig) -> None:
        hooks = installed_hooks(rig)
        assert [h["type"] for h in hooks["SessionStart"]] == ["command"]
        for event in HTTP_EVENTS:
            (handler,) = hooks[event]
            assert handler["type"] == "http" and handler["name"] == "ctxd", (event, handler)
            assert handler["url"].endswith("/ctxd/hook/qwen"), handler
        answered.append(rig.ctxd.status()["hooks_answered"])
        rig.prefix = strace_prefix(trace)

    # the assertions of test_qwen_e2e's command-hook session, call for call
    rig, res = warnings_session(make_http_rig, ready)

    assert hook_lines(res.stderr) == [], res.describe()  # no hook failed
    # 10 PostToolUse, 11 UserPromptSubmit (one per request), a Stop, a SessionEnd: all answered
    status = rig.ctxd.status()
    assert status["hooks_answered"] - answered[0] >= 23, status
    # processes: one hook client, for SessionStart; nothing of ctxd's for the 20-odd others
    execs = executed(trace)
    ours = ctxd_processes(execs)
    assert len(ours) == 1, ours
    assert any(is_client(word) for word in ours[0]), ours
    assert len(execs) > 10, "strace saw no process at all"  # the shell tool calls ran


def test_compression_and_a_blocked_stop_over_http(make_http_rig: Callable[..., Rig]) -> None:
    """Stop's `{"decision": "block"}` answered over HTTP starts the new turn, and PostCompact
    over HTTP resets the debounce, as with command hooks."""
    rig, res = block_handoff_session(make_http_rig)
    assert hook_lines(res.stderr) == [], res.describe()
    assert [h["type"] for h in installed_hooks(rig)["PostCompact"]] == ["http"]


def test_without_a_daemon_the_session_completes(
    make_http_rig: Callable[..., Rig], tmp_path: Path
) -> None:
    """Nothing on the port: the session completes, nothing of ctxd's in it, and in -p mode
    Qwen Code 0.24.4 says nothing of the HTTP hooks that found no listener (it logs them to its
    debug log only; stderr recorded in tmp_path/daemon-down.txt)."""
    rig = make_http_rig(tool_steps(3, [560_000, 640_000, 645_000, 650_000]))
    rig.ctxd.stop_with_cli()
    res = rig.qwen("Run the steps", CTXD_NO_SPAWN="1")
    (tmp_path / "daemon-down.txt").write_text(res.stderr)
    assert res.stdout.strip() == "Done.", res.describe()
    assert "CONTEXT " not in json.dumps([r["body"] for r in rig.main()]) + res.stderr
    assert hook_lines(res.stderr) == [], res.describe()
