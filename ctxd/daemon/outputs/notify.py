"""Desktop notifications when a session crosses a line (`crossings.py` decides which), on
when `[notify] enabled = true`.

Where they go: on Linux the freedesktop Notifications service on the session bus
(`org.freedesktop.Notifications.Notify`, through jeepney: the `ctxd[notify]` extra), else
`notify-send` when it is on PATH; on macOS `osascript -e 'display notification …'`; and the
user's `[notify] command` (argv, never a shell), given the notification as JSON on stdin.

Off the event loop, bounded: every POLL seconds the loop has the status document put
together in slices, a worker thread decodes it and compares each session's row with its
previous one; what crossed goes into a queue of QUEUE notifications (more are dropped, with a
log line) that one sending thread empties. Each send is bounded (the D-Bus call and the
command by the timeout), so a missing bus or a hung command costs that thread its timeout
and nothing else. The first document only sets the baseline: a daemon restart does not
announce again what the previous daemon already did.

Never for the session the user is typing in, as far as ctxd can know it: the session that got
the latest prompt of all (its agent's prompt hook, e.g. UserPromptSubmit), if that was at most
TYPING seconds ago, and its subagents. The user is at that terminal and its own warnings reach
them there; what it crosses meanwhile is not announced later. Which window has the focus is not
knowable from a daemon (no terminal says, a tmux pane's focus is no desktop's), and an agent
without a prompt hook is never taken as the one typed in.
"""

from __future__ import annotations

import contextlib
import logging
import queue
import shutil
import signal
import subprocess
import sys
import threading
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import anyio
import anyio.to_thread
import orjson

from ctxd.daemon.config import NotifySettings, load_notify_settings
from ctxd.daemon.outputs.crossings import Crossing, crossings
from ctxd.errors import ConfigError

__all__ = [
    "POLL",
    "QUEUE",
    "TYPING",
    "Notifier",
    "dbus_notify",
    "osascript_argv",
    "run",
    "typed_in",
    "watch",
]

logger = logging.getLogger(__name__)

#: Seconds between two looks at the status rows: a notification need not be faster, and at
#: 10,000 sessions a status document costs the daemon tens of ms (docs/benchmarks.md §21).
POLL = 2.0
#: Notifications waiting to be sent, at most.
QUEUE = 32
#: Seconds after a prompt during which its session counts as the one the user is typing in.
TYPING = 120.0
#: Seconds a D-Bus call may take.
DBUS_TIMEOUT = 2.0
APP_NAME = "ctxd"

Rows = dict[tuple[str, str], Mapping[str, Any]]


def _key(row: Mapping[str, Any]) -> tuple[str, str]:
    return str(row.get("agent")), str(row.get("session_id"))


def watch(
    previous: Rows | None, then: float, document: Mapping[str, Any], now: float
) -> tuple[Rows, list[Crossing]]:
    """The rows of `document` by session, and what crossed since `previous` (pure; nothing
    when `previous` is None: the baseline)."""
    rows: Rows = {}
    for row in document.get("sessions") or ():
        if isinstance(row, Mapping):
            rows[_key(row)] = row
    if previous is None:
        return rows, []
    found: list[Crossing] = []
    typing = typed_in(rows.values(), now)
    for key, row in rows.items():
        if typing is not None and typing in (row.get("transcript_path"), row.get("parent"), key):
            continue
        found += crossings(previous.get(key), then, row, now)
    return rows, found


def typed_in(rows: Iterable[Mapping[str, Any]], now: float) -> object:
    """The session the user is typing in (see the module's docstring), as its transcript path
    (which its subagents' rows name as their `parent`) or, without one, its key; None when no
    session had a prompt in the last TYPING seconds."""
    latest: Mapping[str, Any] | None = None
    for row in rows:
        at = row.get("prompted_at")
        recent = isinstance(at, int | float) and not isinstance(at, bool) and now - at <= TYPING
        if recent and (latest is None or at > latest["prompted_at"]):
            latest = row
    if latest is None:
        return None
    return latest.get("transcript_path") or _key(latest)


def _applescript_string(text: str) -> str:
    """`text` as an AppleScript string literal: backslashes and quotes escaped, line breaks
    as spaces (a literal cannot hold them)."""
    flat = " ".join(text.splitlines())
    return '"' + flat.replace("\\", "\\\\").replace('"', '\\"') + '"'


def osascript_argv(crossing: Crossing) -> list[str]:
    """The command that shows `crossing` on macOS (one argv: no shell sees the text)."""
    script = (
        f"display notification {_applescript_string(crossing.body)}"
        f" with title {_applescript_string(APP_NAME)}"
        f" subtitle {_applescript_string(crossing.summary)}"
    )
    return ["osascript", "-e", script]


def _fields(crossing: Crossing) -> dict[str, str]:
    return {
        "kind": crossing.kind,
        "agent": crossing.agent,
        "session_id": crossing.session_id,
        "project": crossing.project,
        "summary": crossing.summary,
        "body": crossing.body,
    }


def dbus_notify(address: str, crossing: Crossing, timeout: float = DBUS_TIMEOUT) -> int:
    """Send `crossing` to the notification server on the bus at `address`; its id for it.
    ImportError without jeepney; OSError or jeepney's errors when the bus or server fails."""
    from jeepney import DBusAddress, MessageType, new_method_call  # type: ignore[import-untyped]
    from jeepney.io.blocking import open_dbus_connection  # type: ignore[import-untyped]

    server = DBusAddress(
        "/org/freedesktop/Notifications",
        bus_name="org.freedesktop.Notifications",
        interface="org.freedesktop.Notifications",
    )
    urgency = 2 if crossing.kind == "critical" else 1  # the spec's hint: critical, normal
    message = new_method_call(
        server,
        "Notify",
        "susssasa{sv}i",
        (
            APP_NAME,
            0,
            "",
            crossing.summary,
            crossing.body,
            [],
            {"urgency": ("y", urgency), "category": ("s", "ctxd." + crossing.kind)},
            -1,
        ),
    )
    with open_dbus_connection(address, auth_timeout=timeout) as connection:
        reply = connection.send_and_get_reply(message, timeout=timeout)
    if reply.header.message_type == MessageType.error:
        raise OSError(f"notification server: {reply.header.fields} {reply.body}")
    return int(reply.body[0])


class Notifier:
    """The sending thread and its bounded queue."""

    def __init__(self, settings: NotifySettings, env: Mapping[str, str]) -> None:
        self.settings = settings
        self.env = dict(env)
        self.queue: queue.Queue[Crossing | None] = queue.Queue(QUEUE)
        self._thread = threading.Thread(target=self._send_all, name="ctxd-notify", daemon=True)
        self._warned: set[str] = set()
        self._child: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        self._thread.start()

    def offer(self, crossing: Crossing) -> None:
        """Queue `crossing` (never waits: dropped when the queue is full)."""
        try:
            self.queue.put_nowait(crossing)
        except queue.Full:
            logger.warning("notification dropped (%d waiting): %s", QUEUE, crossing.summary)

    def stop(self) -> None:
        # When the queue is full the thread is left: a daemon thread, it ends with the process.
        with contextlib.suppress(queue.Full):
            self.queue.put_nowait(None)
        child = self._child
        if child is not None:
            with contextlib.suppress(OSError):
                child.kill()

    def _send_all(self) -> None:
        while (crossing := self.queue.get()) is not None:
            try:
                self._desktop(crossing)
            except Exception as exc:  # a missing bus or server: logged once per kind of failure
                self._warn_once(f"desktop notification failed: {exc}")
            if self.settings.command:
                self._command(self.settings.command, crossing)

    def _warn_once(self, text: str) -> None:
        if text not in self._warned and len(self._warned) < 64:
            self._warned.add(text)
            logger.warning("%s", text)

    def _desktop(self, crossing: Crossing) -> None:
        if sys.platform == "darwin":
            self._run(osascript_argv(crossing), b"")
            return
        address = self.env.get("DBUS_SESSION_BUS_ADDRESS")
        if address:
            try:
                dbus_notify(address, crossing)
                return
            except ImportError:
                self._warn_once("no jeepney for D-Bus: pip install 'ctxd[notify]'")
        send = shutil.which("notify-send", path=self.env.get("PATH"))
        if send is not None:
            self._run([send, "--app-name", APP_NAME, crossing.summary, crossing.body], b"")
        elif not address:
            self._warn_once("no desktop to notify: no DBUS_SESSION_BUS_ADDRESS, no notify-send")

    def _command(self, argv: Sequence[str], crossing: Crossing) -> None:
        self._run(list(argv), orjson.dumps(_fields(crossing)))

    def _run(self, argv: list[str], stdin: bytes) -> None:
        try:
            child = subprocess.Popen(
                argv,
                stdin=subprocess.PIPE,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                env=self.env,
            )
        except OSError as exc:
            self._warn_once(f"cannot run {argv[0]}: {exc}")
            return
        self._child = child  # so that `stop` can end it: a daemon's exit must not orphan it
        try:
            child.communicate(stdin, timeout=self.settings.timeout_seconds)
        except subprocess.TimeoutExpired:
            self._warn_once(f"{argv[0]} did not end within {self.settings.timeout_seconds:g} s")
        except OSError:  # it did not read its stdin: what it does with nothing is its business
            pass
        finally:
            if child.poll() is None:
                child.kill()
            child.wait()
            self._child = None
        if child.returncode not in (0, -signal.SIGKILL):
            self._warn_once(f"{argv[0]} exited {child.returncode}")


def _step(
    previous: Rows | None, then: float, data: bytes, now: float
) -> tuple[Rows, list[Crossing]]:
    # In a worker thread: 10,000 rows are megabytes of JSON to decode and compare.
    return watch(previous, then, orjson.loads(data), now)


async def run(
    env: Mapping[str, str],
    config: Path,
    encoded: Callable[[], Awaitable[bytes]],
    clock: Callable[[], float],
) -> None:
    """Notify while the daemon runs, when `[notify] enabled = true`; returns at once (logged)
    otherwise. `encoded`: the status document as JSON bytes, put together in slices."""
    try:
        settings = await anyio.to_thread.run_sync(
            load_notify_settings, config, abandon_on_cancel=True
        )
    except ConfigError as exc:
        logger.error("notifications off: %s", exc)
        return
    if not settings.enabled:
        return
    notifier = Notifier(settings, env)
    notifier.start()
    logger.info("desktop notifications on")
    previous: Rows | None = None
    then = 0.0
    try:
        while True:
            try:
                now = clock()
                data = await encoded()
                previous, found = await anyio.to_thread.run_sync(_step, previous, then, data, now)
                then = now
                for crossing in found:
                    notifier.offer(crossing)
            except Exception:  # a bad document must not end the notifier, nor the daemon
                logger.exception("notifications: reading the status failed")
            await anyio.sleep(POLL)
    finally:
        notifier.stop()
