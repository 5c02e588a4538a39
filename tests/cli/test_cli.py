"""The `ctxd` command line as a user runs it: a real subprocess, a real daemon behind it."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

SCHEMA = Path(__file__).resolve().parents[2] / "ctxd" / "schemas" / "status.v1.schema.json"

if TYPE_CHECKING:
    from conftest import World

STATUS_FIELDS = {
    "session_id",
    "agent",
    "model",
    "window",
    "window_source",
    "tokens",
    "used_pct",
    "severity",
    "tokens_to_compaction",
    "transcript_path",
    "updated_at",
}


def one_line(text: str) -> str:
    lines = text.strip().splitlines()
    assert len(lines) == 1, text
    return lines[0]


# ---------------------------------------------------------------------- status


def test_status_json_fields(ctxd: World) -> None:
    t = ctxd.claude()
    t.assistant(650_000)
    before = time.time()
    ctxd.hook_out("claude", t.payload("PostToolUse"))

    result = ctxd.cli("status", "--json")

    assert result.returncode == 0, result.stderr
    doc = json.loads(result.stdout)
    (row,) = (r for r in doc["sessions"] if r["session_id"] == t.session_id)
    assert set(row) >= STATUS_FIELDS
    assert row["agent"] == "claude"
    assert row["model"] == "claude-opus-5-5"
    # Opus 5.5 is in Claude Code's model table; Claude Code compacts at 1,000,000 - 20,000
    # (output reserve) - 13,000, and counts the last turn's 100 output tokens towards it.
    assert (row["window"], row["window_source"]) == (1_000_000, "table")
    assert row["tokens"] == 650_000
    assert row["used_pct"] == 65.0  # of the whole window
    assert row["severity"] == "warning"  # 67 % of the room before compaction
    assert row["tokens_to_compaction"] == 967_000 - 100 - 650_000
    assert row["transcript_path"] == str(t.path)
    assert before - 1 <= row["updated_at"] <= time.time() + 1
    assert doc["daemon"]["pid"] == (ctxd.proc.pid if ctxd.proc else None)


def test_status_json_for_one_session(ctxd: World) -> None:
    a, b = ctxd.claude(), ctxd.claude()
    for t in (a, b):
        t.assistant(100_000)
        ctxd.hook_out("claude", t.payload("PostToolUse"))
    result = ctxd.cli("status", "--json", b.session_id)
    assert result.returncode == 0, result.stderr
    assert [r["session_id"] for r in json.loads(result.stdout)["sessions"]] == [b.session_id]


def test_status_for_an_unknown_session_is_an_error(ctxd: World) -> None:
    result = ctxd.cli("status", "no-such-session")
    assert result.returncode != 0
    assert "no-such-session" in one_line(result.stderr)
    assert result.stdout == ""


def test_status_text_lists_sessions(ctxd: World) -> None:
    t = ctxd.claude()
    t.assistant(760_000)
    ctxd.hook_out("claude", t.payload("PostToolUse"))
    result = ctxd.cli("status")
    assert result.returncode == 0, result.stderr
    line = next(x for x in result.stdout.splitlines() if t.session_id[:8] in x)
    assert "claude" in line and "760,000" in line and "CRITICAL" in line


def test_status_without_daemon_gives_the_next_step_in_one_line(world: World) -> None:
    result = world.cli("status")
    assert result.returncode == 3
    line = one_line(result.stderr)
    assert line.startswith("ctxd status: ctxd is not running") and str(world.socket) in line
    assert "start it with `ctxd serve`" in line and "first hook starts it" in line
    assert result.stdout == ""
    # A stale socket (the daemon was killed): the same.
    world.socket.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as stale:
        stale.bind(str(world.socket))
    again = world.cli("status")
    assert (again.returncode, again.stderr) == (3, result.stderr)


def test_watch_without_daemon_gives_the_next_step_as_status_does(world: World) -> None:
    screen = world.root / "watch.out"
    with screen.open("wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "ctxd", "watch", "--interval", "0.1"],
            env=world.env,
            stdout=out,
            stderr=subprocess.PIPE,
        )
    try:
        world.wait_for(lambda: screen.read_bytes().count(b"\x1b[H") >= 2 or None, 10, "redraws")
    finally:
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=10)

    assert proc.returncode == 0, err
    status = one_line(world.cli("status").stderr).removeprefix("ctxd status: ")
    frames = screen.read_text().split("\x1b[H\x1b[2J")[1:]
    # Each redraw says what `ctxd status` says, and is asked again (a daemon may start).
    assert frames[:2] == [status + "\n"] * 2
    assert "start it with `ctxd serve`" in status


def test_status_json_without_daemon_is_a_json_error_object(world: World) -> None:
    # A tool parsing `ctxd status --json` gets JSON whatever happens, with the schema's version
    # first, as the document has it.
    result = world.cli("status", "--json")

    assert result.returncode == 3
    assert result.stderr == ""
    error = json.loads(one_line(result.stdout))
    assert list(error) == ["schema", "error"]
    assert error["schema"] == "ctxd.status/v1"
    assert error["error"].startswith("ctxd is not running") and "`ctxd serve`" in error["error"]
    _validate(error, "#/$defs/error")


def test_status_json_for_an_unknown_session_is_a_json_error_object(ctxd: World) -> None:
    result = ctxd.cli("status", "--json", "no-such-session")

    assert result.returncode == 2
    error = json.loads(one_line(result.stdout))
    assert error["schema"] == "ctxd.status/v1" and "no-such-session" in error["error"]
    _validate(error, "#/$defs/error")


def _validate(value: object, part: str) -> None:
    """`value` against `part` of ctxd/schemas/status.v1.schema.json, found by its `$id`."""
    import jsonschema
    from referencing import Registry, Resource

    schema = json.loads(SCHEMA.read_text())
    registry: Registry[Any] = Registry().with_resource(
        schema["$id"], Resource.from_contents(schema)
    )
    validator = jsonschema.Draft202012Validator({"$ref": schema["$id"] + part}, registry=registry)
    validator.validate(value)


def test_stop_without_daemon(world: World) -> None:
    result = world.cli("stop")
    assert result.returncode != 0
    assert "no ctxd daemon is running" in one_line(result.stderr)


def test_stop_stops_the_daemon(ctxd: World) -> None:
    assert ctxd.proc is not None
    pid = ctxd.proc.pid
    result = ctxd.cli("stop")
    assert result.returncode == 0, result.stderr
    assert str(pid) in one_line(result.stdout)
    # By the time `ctxd stop` returns, the daemon has saved its state and removed its socket.
    assert not os.path.lexists(ctxd.socket)
    assert ctxd.state_file.exists()
    assert ctxd.proc.wait(5) == 0


def test_ctxd_socket_overrides_the_socket_for_every_command(world: World) -> None:
    sock = world.root / "elsewhere" / "d.sock"
    sock.parent.mkdir(mode=0o700)
    world.env["CTXD_SOCKET"] = str(sock)
    world.start()
    assert sock.exists() and not (world.runtime_dir / "ctxd.sock").exists()
    t = world.claude()
    t.assistant(650_000)
    assert world.hook_out("claude", t.payload("PostToolUse")) is not None
    assert world.cli("status", "--json").returncode == 0
    assert world.cli("stop").returncode == 0
    assert not sock.exists()


# ---------------------------------------------------------------------- replay


def test_replay_missing_file(world: World) -> None:
    result = world.cli("replay", str(world.root / "missing.jsonl"))
    assert result.returncode == 2
    assert "missing.jsonl" in one_line(result.stderr)
    assert result.stdout == ""


@pytest.mark.parametrize(
    "content", [b"hello\n", b'{"a": 1}\n', b"\x00\x01\x02binary", b""], ids=repr
)
def test_replay_not_a_transcript(world: World, content: bytes) -> None:
    path = world.root / "notes.jsonl"
    path.write_bytes(content)
    result = world.cli("replay", str(path))
    assert result.returncode == 2
    assert "not a" in one_line(result.stderr)


def test_replay_a_directory(world: World) -> None:
    result = world.cli("replay", str(world.root))
    assert result.returncode == 2
    one_line(result.stderr)


def test_replay_json_timeline(world: World) -> None:
    t = world.claude()
    for tokens in (100_000, 300_000, 700_000):
        t.assistant(tokens)
    t.compact_boundary(post_tokens=20_000, pre_tokens=700_000)
    t.assistant(50_000)

    result = world.cli("replay", "--json", str(t.path))

    assert result.returncode == 0, result.stderr
    rows = [json.loads(line) for line in result.stdout.splitlines()]
    assert [r["tokens"] for r in rows[:-1]] == [100_000, 300_000, 700_000, 20_000, 50_000]
    assert [r["severity"] for r in rows[:-1]] == ["ok", "ok", "warning", "ok", "ok"]
    final = rows[-1]
    assert final["tokens"] == 50_000
    assert (final["window"], final["window_source"]) == (1_000_000, "table")
    assert final["used_pct"] == 5.0
    assert final["severity"] == "ok"
    assert final["compactions"] == 1
    assert final["tokens_to_compaction"] == 967_000 - 100 - 50_000


def test_replay_real_codex_rollout(world: World) -> None:
    path = world.repo / "tests/data/transcripts/codex-cli-0.171.0/rollout.autocompact.jsonl"
    result = world.cli("replay", "--json", str(path))
    assert result.returncode == 0, result.stderr
    final = json.loads(result.stdout.splitlines()[-1])
    assert final["agent"] == "codex" and final["compactions"] == 1
    assert (final["window"], final["window_source"]) == (258_400, "agent")


def test_replay_text(world: World) -> None:
    t = world.claude()
    t.assistant(700_000)
    result = world.cli("replay", str(t.path))
    assert result.returncode == 0, result.stderr
    assert "700,000" in result.stdout and result.stdout.splitlines()[-1].startswith("final ")


def test_python_m_ctxd_and_the_console_script_agree(world: World) -> None:
    script = world.repo / ".venv" / "bin" / "ctxd"
    if not script.exists():
        pytest.skip("no console script in this environment")
    via_script = subprocess.run(
        [str(script), "status"], env=world.env, capture_output=True, text=True, check=False
    )
    via_module = world.cli("status")
    assert (via_script.returncode, via_script.stderr) == (via_module.returncode, via_module.stderr)


def test_socket_path_too_long_is_one_clear_line(world: World) -> None:
    # AF_UNIX paths are limited to about 107 bytes; a long CTXD_SOCKET must not end in a
    # traceback (serve) or a message ending in "None" (status).
    long_dir = world.root / ("d" * 120)
    long_dir.mkdir(mode=0o700)
    world.env["CTXD_SOCKET"] = str(long_dir / "ctxd.sock")

    serve = world.cli("serve")
    assert serve.returncode != 0
    assert "Traceback" not in serve.stderr
    line = serve.stderr.strip().splitlines()[-1]
    assert line.startswith("ctxd serve:") and "too long" in line

    status = world.cli("status")
    assert status.returncode != 0
    line = one_line(status.stderr)
    assert not line.endswith("None") and "too long" in line


def test_watch_redraws_the_status_until_interrupted(ctxd: World) -> None:
    t = ctxd.claude()
    t.assistant(250_000)
    ctxd.hook("claude", t.payload("PostToolUse"))
    proc = subprocess.Popen(
        [sys.executable, "-m", "ctxd", "watch", "--interval", "0.2"],
        env=ctxd.env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    time.sleep(1.2)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=10)
    assert proc.returncode == 0, err
    frames = out.decode().split("\x1b[H\x1b[2J")[1:]
    assert len(frames) >= 3  # redrawn, not printed once
    assert all(t.session_id[:8] in frame and "250,000" in frame for frame in frames)


@pytest.mark.parametrize("interval", ["-1", "0", "nan"])
def test_watch_takes_a_positive_interval_only(world: World, interval: str) -> None:
    """A negative interval was a traceback after the first redraw, 0 a busy loop redrawing as
    fast as the daemon answers: each is refused up front, in one line."""
    done = subprocess.run(
        [sys.executable, "-m", "ctxd", "watch", f"--interval={interval}"],
        env=world.env,
        capture_output=True,
        text=True,
        timeout=10,
    )
    assert done.returncode == 2
    assert done.stdout == ""
    assert "Traceback" not in done.stderr
    assert done.stderr.splitlines()[-1].startswith("ctxd watch: error: argument --interval: ")
