"""`ctxd status` as the daemon renders it: in the reader's words (its clock, its home), and the
same from a daemon that predates the rendering (the CLI then renders it itself)."""

from __future__ import annotations

import contextlib
import json
import re
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING

import ctxd_wire as wire

if TYPE_CHECKING:
    from collections.abc import Iterator

    from conftest import World

STATUSLINE = Path(__file__).parents[1] / "data" / "payloads" / "statusline" / "claude-2.1.332.jsonl"


def _idle_session(world: World) -> tuple[str, float]:
    """A Claude session that the agent compacts if it stays idle; its id and that moment."""
    t = world.claude()
    t.model = "claude-opus-5-5"
    t.assistant(300_000)
    world.hook_out("claude", t.payload("PostToolUse"))
    doc = json.loads(STATUSLINE.read_text().splitlines()[2])
    doc.update(session_id=t.session_id, transcript_path=str(t.path), cwd=str(world.work))
    usage = doc["context_window"]["current_usage"]
    usage.update(input_tokens=300_000, cache_creation_input_tokens=0, cache_read_input_tokens=0)
    doc["prompt_cache"].update(ttl="1h", expires_at=int(time.time()) + 3600, warm=True)
    world.hook("claude", json.dumps(doc).encode(), "statusline")
    row = world.wait_for(
        lambda: (r := world.row(t)) and r.get("idle_compaction_at") and r, 5, "idle time"
    )
    return t.session_id, float(row["idle_compaction_at"])


def test_the_stdlib_client_prints_what_ctxd_status_does(ctxd: World) -> None:
    """`python -S -I -c "import ctxd_status ..."`: no site-packages, no ctxd package; the same
    bytes."""
    t = ctxd.claude()
    t.assistant(120_000)
    ctxd.hook_out("claude", t.payload("PostToolUse"))
    clients = str(Path(__file__).parents[2] / "clients")
    bare_run = (
        f"import sys; sys.path[:0] = [{clients!r}]; import ctxd_status as s; "
        "raise SystemExit(s.status_main())"
    )

    for words in ([], ["--json"], [t.session_id[:8]], ["--json", t.session_id[:8]]):
        bare = subprocess.run(
            [sys.executable, "-S", "-I", "-c", bare_run, *words],
            env=ctxd.env,
            capture_output=True,
            timeout=20,
            check=False,
        )
        cli = ctxd.cli("status", *words)
        assert bare.returncode == 0 == cli.returncode, bare.stderr
        assert b"120,000" in bare.stdout or b'"tokens":120000' in bare.stdout
        assert _steady(bare.stdout.decode()) == _steady(cli.stdout)


def _steady(out: str) -> str:
    """`out` without what changes from one request to the next (the daemon's request count and
    uptime, how long ago a session was heard or a file was looked at)."""
    return re.sub(
        r"[\d,]+ requests? served|updated \S+ ago|\"(requests|uptime_s|age_s)\":[\d.]+", "", out
    )


def _field(text: str, name: str) -> str:
    return next(line for line in text.splitlines() if line.startswith(name + ":")).split(":", 1)[1]


def test_times_of_day_and_paths_are_the_readers(ctxd: World) -> None:
    sid, at = _idle_session(ctxd)
    # The daemon runs in the world's zone (none set: the machine's); two readers in others.
    for tz, offset in (("UTC0", 0), ("<+0545>-5:45", 5 * 3600 + 45 * 60)):
        env = {**ctxd.env, "TZ": tz, "HOME": str(ctxd.work.parent)}
        done = subprocess.run(
            [sys.executable, "-m", "ctxd", "status", sid[:8]],
            env=env,
            capture_output=True,
            text=True,
            timeout=20,
            check=False,
        )
        assert done.returncode == 0, done.stderr
        expected = time.strftime("%H:%M", time.gmtime(at + offset))
        assert _field(done.stdout, "idle compaction").strip() == f"compacted if idle at {expected}"
        # Under the reader's home, not the daemon's: `~/work`.
        assert _field(done.stdout, "cwd").strip() == "~/" + ctxd.work.name


@contextlib.contextmanager
def _old_daemon(path: str, document: bytes) -> Iterator[None]:
    """A daemon from before the rendered status: `status` answers `document`, an unknown op an
    error, as the server always has."""
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(path)
    server.listen()

    def serve() -> None:
        while True:
            try:
                conn, _ = server.accept()
            except OSError:
                return
            with conn:
                header = json.loads(wire.read_frame(conn, wire.MAX_REQUEST).partition(b"\n")[0])
                if header["op"] == "status":
                    conn.sendall(wire.frame(wire.OK_HEADER + b"\n" + document))
                else:
                    error = {"v": 1, "ok": False, "error": f"unknown op {header['op']!r}"}
                    conn.sendall(wire.frame(json.dumps(error).encode() + b"\n"))

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield
    finally:
        server.shutdown(socket.SHUT_RDWR)
        server.close()
        thread.join(5)


def test_a_daemon_older_than_the_rendering_still_gets_its_status_printed(world: World) -> None:
    daemon = {"version": "0.0.9", "pid": 7, "requests": 2, "config_error": None}
    document: dict[str, object] = {
        "schema": "ctxd.status/v1",
        "sessions": [],
        "config_error": None,
        "daemon": daemon,
    }
    world.socket.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    with _old_daemon(str(world.socket), json.dumps(document).encode()):
        text = world.cli("status")
        as_json = world.cli("status", "--json")

    assert text.returncode == 0, text.stderr
    assert text.stdout == "ctxd 0.0.9 (pid 7) · 0 sessions · 2 requests served\n" + (
        "no sessions tracked yet\n"
    )
    assert as_json.returncode == 0, as_json.stderr
    # The daemon's statistics leave out the config error the document gives at its top.
    del daemon["config_error"]
    assert json.loads(as_json.stdout) == document
