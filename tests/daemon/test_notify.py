"""Desktop notifications on a real daemon: a session crossing critical raises one
notification on a real D-Bus session bus (a private `dbus-daemon`, with a notification
server stand-in that owns `org.freedesktop.Notifications` and records each Notify call), and
the user's command gets it as JSON on stdin; nothing at all when `[notify]` is not on.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from jeepney import MessageType, message_bus, new_method_return  # type: ignore[import-untyped]
from jeepney.io.blocking import open_dbus_connection  # type: ignore[import-untyped]

if TYPE_CHECKING:
    from conftest import World

pytestmark = pytest.mark.skipif(
    shutil.which("dbus-daemon") is None, reason="no dbus-daemon (apt-get install dbus)"
)

BUS_CONFIG = """<!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN"
 "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
<busconfig>
  <type>session</type>
  <listen>unix:path={socket}</listen>
  <auth>EXTERNAL</auth>
  <policy context="default">
    <allow send_destination="*" eavesdrop="true"/>
    <allow eavesdrop="true"/>
    <allow own="*"/>
  </policy>
</busconfig>
"""


class NotificationServer:
    """What a desktop's notification daemon does on the bus, recording each Notify call."""

    def __init__(self, address: str) -> None:
        self.connection = open_dbus_connection(address)
        reply = self.connection.send_and_get_reply(
            message_bus.RequestName("org.freedesktop.Notifications"), timeout=5
        )
        assert reply.body == (1,), reply.body  # the primary owner
        self.calls: list[tuple[Any, ...]] = []
        self._stop = threading.Event()
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        while not self._stop.is_set():
            try:
                message = self.connection.receive(timeout=0.1)
            except TimeoutError:
                continue
            header = message.header
            if header.message_type != MessageType.method_call:
                continue
            if header.fields.get(3) == "Notify":  # 3: the member field
                self.calls.append(message.body)
                self.connection.send(new_method_return(message, "u", (len(self.calls),)))

    def close(self) -> None:
        self._stop.set()
        self.thread.join(5)
        self.connection.close()


@pytest.fixture
def bus(tmp_path: Path) -> Iterator[str]:
    """A private session bus of the test's own; its address."""
    config = tmp_path / "bus.conf"
    config.write_text(BUS_CONFIG.format(socket=tmp_path / "bus"))
    proc = subprocess.Popen(
        ["dbus-daemon", "--nofork", "--print-address", f"--config-file={config}"],
        stdout=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
    )
    try:
        assert proc.stdout is not None
        address = proc.stdout.readline().decode().strip()
        assert address.startswith("unix:"), address
        yield address
    finally:
        proc.terminate()
        proc.wait(5)
        if proc.stdout is not None:
            proc.stdout.close()


@pytest.fixture
def server(bus: str) -> Iterator[NotificationServer]:
    s = NotificationServer(bus)
    try:
        yield s
    finally:
        s.close()


def _cross_critical(world: World) -> None:
    """A Claude Code session: fine, then critical, then a little further (still critical)."""
    t = world.claude()
    for tokens in (100_000, 760_000, 765_000):
        t.assistant(tokens)
        world.hook_out("claude", t.payload("PostToolUse"))
        # The notifier looks at the rows every 2 s: let it see each step.
        time.sleep(2.5)
    row = world.row(t)
    assert row is not None and row["severity"] == "critical", row


def _recorder(tmp_path: Path) -> tuple[list[str], Path]:
    """A user command that appends what it gets on stdin to a file (one JSON per line)."""
    out = tmp_path / "received.jsonl"
    script = tmp_path / "record.py"
    script.write_text(
        "import sys\n"
        "with open(sys.argv[1], 'ab') as f:\n"
        "    f.write(sys.stdin.buffer.read() + b'\\n')\n"
    )
    return [sys.executable, str(script), str(out)], out


def test_crossing_critical_raises_one_notification(
    world: World, bus: str, server: NotificationServer, tmp_path: Path
) -> None:
    command, received = _recorder(tmp_path)
    world.write_config(
        f"[handoff]\nenabled = false\n[notify]\nenabled = true\ncommand = {json.dumps(command)}\n"
    )
    world.env["DBUS_SESSION_BUS_ADDRESS"] = bus
    world.start()
    _cross_critical(world)

    def critical() -> list[tuple[Any, ...]]:
        return [c for c in server.calls if c[6].get("category") == ("s", "ctxd.critical")]

    (call,) = world.wait_for(critical, 10, "the critical notification")
    app, replaces, _icon, summary, body, actions, hints, _timeout = call
    assert (app, replaces, actions) == ("ctxd", 0, [])
    assert summary == "work (claude): context critical"
    row = world.status()["sessions"][0]
    assert body == f"{100 - row['basis_used_pct']:.0f}% of the room before compaction left"
    assert hints["urgency"] == ("y", 2)
    time.sleep(2.5)  # still critical: no second one
    assert len(critical()) == 1
    # The same jump put its compaction a call away: that line is crossed once too.
    kinds = sorted(c[6]["category"][1] for c in server.calls)
    assert kinds == ["ctxd.compaction_near", "ctxd.critical"]

    # The user's command got the same notification, once, as JSON on stdin.
    def lines() -> list[dict[str, Any]]:
        if not received.exists():
            return []
        found = [json.loads(line) for line in received.read_text().splitlines()]
        return [f for f in found if f["kind"] == "critical"]

    (sent,) = world.wait_for(lines, 10, "the command's call")
    assert sent["summary"] == summary and sent["body"] == body
    assert sent["agent"] == "claude" and sent["project"] == "work"
    assert sent["session_id"] == row["session_id"]


def test_nothing_for_the_session_the_user_just_typed_in(
    world: World, bus: str, server: NotificationServer, tmp_path: Path
) -> None:
    """Two sessions turn critical; the user has just sent one of them a prompt: only the other
    is announced."""
    world.write_config("[handoff]\nenabled = false\n[notify]\nenabled = true\n")
    world.env["DBUS_SESSION_BUS_ADDRESS"] = bus
    world.start()
    typed, other = world.claude(), world.claude()
    for t, project in ((typed, "typed"), (other, "other")):
        t.cwd = world.root / project
        t.assistant(100_000)
        world.hook_out("claude", t.payload("PostToolUse"))
    time.sleep(2.5)  # the notifier's baseline
    world.hook_out("claude", typed.payload("UserPromptSubmit", prompt="go on"))
    for t in (typed, other):
        t.assistant(760_000)
        world.hook_out("claude", t.payload("PostToolUse"))

    def critical() -> list[tuple[Any, ...]]:
        return [c for c in server.calls if c[6].get("category") == ("s", "ctxd.critical")]

    (call,) = world.wait_for(critical, 10, "the other session's critical notification")
    assert call[3] == "other (claude): context critical"
    time.sleep(2.5)
    assert [c[3] for c in critical()] == ["other (claude): context critical"]


def test_nothing_when_not_enabled(
    world: World, bus: str, server: NotificationServer, tmp_path: Path
) -> None:
    command, received = _recorder(tmp_path)
    # The table is read and accepted (a config error would leave notifications off too).
    world.write_config(f"[notify]\nenabled = false\ncommand = {json.dumps(command)}\n")
    world.env["DBUS_SESSION_BUS_ADDRESS"] = bus
    world.start()
    _cross_critical(world)
    assert world.status()["config_error"] is None
    time.sleep(2.5)
    assert server.calls == []
    assert not received.exists()


def test_a_hung_command_costs_the_hooks_nothing(world: World, tmp_path: Path) -> None:
    """A command that never ends is cut at its timeout, in the notifier's thread: the hooks
    answer as fast as ever, and the log says what happened."""
    hang = [sys.executable, "-c", "import time; time.sleep(60)"]
    world.write_config(
        f"[notify]\nenabled = true\ntimeout_seconds = 1\ncommand = {json.dumps(hang)}\n"
    )
    world.env.pop("DBUS_SESSION_BUS_ADDRESS", None)
    world.start()
    t = world.claude()
    slowest = 0.0
    for tokens in (100_000, 760_000, *range(761_000, 770_000, 1_000)):
        t.assistant(tokens)
        started = time.monotonic()
        world.hook_out("claude", t.payload("PostToolUse"))
        slowest = max(slowest, time.monotonic() - started)
        time.sleep(0.3)
    world.wait_for(lambda: "did not end within 1 s" in world.log(), 10, "the timeout's log line")
    assert slowest < 1.0, slowest
