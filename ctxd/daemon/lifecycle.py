"""`ctxd serve`: lock, socket, one task group that owns everything, signals, snapshot, shutdown.

Start-up order matters: the private runtime and state dirs are checked (refused, not fixed up,
when another user could write there), then an exclusive lock is taken *before* the socket is
bound (binding replaces a stale socket file left by a crashed daemon; only the lock makes sure it
is never a live daemon's), the state is restored (snapshot, then journal) and saved again, which
starts a new journal, and readiness is reported only once the socket listens. Shutdown is
cancellation: SIGTERM/SIGINT stop accepting, in-flight requests get a moment to finish, state is
saved, the socket removed.

The config file is read in a worker thread, never on the event loop (a FIFO, a slow or huge
file must not stall hooks); a hook that notices a change waits briefly for the new settings.
"""

from __future__ import annotations

import gc
import logging
import os
import signal
import socket
import time
from collections.abc import Callable, Mapping
from pathlib import Path

import anyio
import anyio.to_thread
import orjson
from anyio.abc import TaskGroup

from ctxd import __version__, agents, paths
from ctxd.core.settings import Settings
from ctxd.daemon import http, poller, snapshot, watcher
from ctxd.daemon.centre import Centre
from ctxd.daemon.config import load_settings
from ctxd.daemon.listeners import connection_limit, notify_systemd, open_listener, systemd_socket
from ctxd.daemon.outputs import line, notify, otlp, status_text
from ctxd.daemon.rundir import AlreadyRunning, DaemonPaths, exclusive_lock
from ctxd.daemon.server import Server, json_result
from ctxd.daemon.status import DaemonStatistics
from ctxd.errors import ConfigError, CtxdError
from ctxd.protocol import Answer, Request, resolve

__all__ = ["AlreadyRunning", "Daemon", "DaemonPaths", "serve"]

logger = logging.getLogger(__name__)

# Housekeeping (config, roots, sweeps, snapshot) runs every TICK seconds, and every QUIET_TICK
# seconds once the watcher is quiet: each wake-up of an idle daemon costs CPU for nothing.
TICK = 1.0
QUIET_TICK = 5.0
SWEEP_INTERVAL = 5.0  # the safety net behind watcher events: one stat per live transcript
FULL_SWEEP_EVERY = 60  # sweeps: quiet transcripts are checked every 5 minutes
SNAPSHOT_INTERVAL = 5.0
#: Readers' states dumped anew at most per snapshot taken while serving (the costliest part of
#: a position): 10,000 transcripts just read are taken in over several snapshots.
STATE_DUMPS_PER_SNAPSHOT = 200
DISCOVERY_INTERVAL = 300.0  # new directories are scanned at once; this is the net behind that
# A request checks the config file if it was last checked this long ago, so an edit applies to
# the next hook even while housekeeping sleeps.
CONFIG_CHECK_INTERVAL = 1.0
# How long a request waits for a config being read (in a worker thread) before it goes on with
# the settings in force; a read still running after this is not waited for again.
CONFIG_WAIT = 0.5
SHUTDOWN_GRACE = 2.0


def _load_settings(path: Path) -> tuple[Settings, bool]:
    """The settings from `path` (the defaults when it does not exist), and whether it existed."""
    settings = load_settings(path)
    return settings, path.exists()


class Daemon:
    def __init__(self, env: Mapping[str, str], clock: Callable[[], float] = time.time) -> None:
        self.env = env
        self.clock = clock
        self.paths = DaemonPaths.from_env(env)
        self.centre = Centre.open(env, agents.transcript_roots(env), clock)
        self.server = Server(
            {
                "hook": self._hook,
                "status": self._status,
                "status_view": self._status_view,
                "line": self._line,
                "stop": self._stop,
                "ping": self._ping,
            }
        )
        self.journal = snapshot.Journal(self.paths.journal)
        self.started_at = time.time()
        #: What came of `[http]` at start (off until the listener is set up).
        self.http = http.HttpListening(False)
        self._stopping = anyio.Event()
        self._config_seen: tuple[int, ...] | None = None
        self._config_checked = -CONFIG_CHECK_INTERVAL  # monotonic time of the last check
        self._config_reading: anyio.Event | None = None  # set when the read under way is done
        self._config_read_started = 0.0
        self._tasks: TaskGroup | None = None  # the root task group, once running
        self._syncing = False  # a journal sync is running in a worker thread
        self._sync_again = False  # lines were written since it started
        self._saving = False  # a snapshot is being written in a worker thread
        self._exporter = snapshot.Exporter()  # each session's bytes, from one save to the next
        self._watcher = watcher.RootsWatcher([], self._on_changes)  # replaced when running
        #: Polls what the watcher could not watch (past the inotify cap).
        self.poller = poller.Poller(
            self.centre.transcripts,
            self.centre.sessions,
            lambda: self.centre.settings().sessions.idle_seconds,
        )

    # -------------------------------------------------------------- handlers

    def _hook(self, request: Request) -> Answer:
        reading = self.check_config()
        if reading is not None:
            return _after(reading, lambda: self._answer_hook(request))
        return self._answer_hook(request)

    def _answer_hook(self, request: Request) -> Answer:
        hint = request.header.get("event")
        return self.centre.answers.handle_hook(
            str(request.header.get("agent")),
            str(hint) if hint else None,
            request.payload,
            request.header.get("env"),
        )

    def _status(self, request: Request) -> Answer:
        reading = self.check_config()
        if reading is not None:
            return _after(reading, lambda: self._answer_status(request))
        return self._answer_status(request)

    async def _answer_status(self, request: Request) -> bytes:
        if self._watcher.quiet:
            # A quiet watcher reports a first change up to two of its slow steps late; a stat per
            # recent transcript costs less than a status that lags (and is nothing when it does
            # not: a busy watcher reports within tens of milliseconds).
            self.centre.transcripts.sweep(everything=False)
        session = request.header.get("session")
        return await self.centre.status.encoded_in_slices(
            str(session) if session else None, self.statistics().as_json()
        )

    def _status_view(self, request: Request) -> Answer:
        reading = self.check_config()
        if reading is not None:
            return _after(reading, lambda: self._answer_status_view(request))
        return self._answer_status_view(request)

    async def _answer_status_view(self, request: Request) -> bytes:
        """What `ctxd status` prints, rendered here so that a poller's process only writes it:
        the header's `prefix` (a session id's start), `json`, and the reader's `home`, `tz` and
        `utc_offset` (its clock, when its TZ is not ours: times of day are the reader's)."""
        header = request.header
        document = orjson.loads(await self._answer_status(request))
        prefix, home, tz = header.get("prefix"), header.get("home"), header.get("tz")
        offset = header.get("utc_offset")
        clock: status_text.Clock = status_text.local_clock
        if tz != os.environ.get("TZ") and isinstance(offset, int) and not isinstance(offset, bool):
            clock = status_text.offset_clock(offset)
        return status_text.printed(
            document,
            str(prefix) if prefix else None,
            as_json=header.get("json") is True,
            now=time.time(),
            home=home if isinstance(home, str) and home else None,
            clock=clock,
        )

    async def _line(self, request: Request) -> bytes:
        """The one-line status for a terminal bar: the session of the directory in the payload
        (raw bytes, so the client need not encode JSON), else the worst live one."""
        document = orjson.loads(await self.centre.status.encoded_in_slices(None))
        cwd = request.payload[:4096].decode(errors="replace") or None
        return line.render_line(document["sessions"], cwd, tmux=request.header.get("tmux") is True)

    def _stop(self, request: Request) -> Answer:
        self._stopping.set()
        return json_result({"stopping": True, "pid": os.getpid()})

    def _ping(self, request: Request) -> Answer:
        return json_result(self.statistics().as_json())

    def statistics(self) -> DaemonStatistics:
        return DaemonStatistics(
            version=__version__,
            pid=os.getpid(),
            uptime_s=round(time.time() - self.started_at, 1),
            socket=str(self.paths.socket),
            config=str(self.paths.config),
            config_error=self.centre.settings.error,
            sessions=len(self.centre.sessions),
            requests=self.server.requests,
            refused=self.server.refused,
            connections=self.server.in_flight,
            evicted=self.server.evicted,
            accept_errors=self.server.accept_errors,
            catching_up=self.centre.transcripts.backlog_size(),
            watching=self.poller.statistics(),
            http=self.http.as_json(),
            store_problems=tuple(self.centre.transcripts.store_problems()),
            refused_files=tuple(self.centre.refused.as_json()),
        )

    # -------------------------------------------------------------- config

    def check_config(self) -> anyio.Event | None:
        """Look at the config file (one stat) at most once per CONFIG_CHECK_INTERVAL and start
        reading it again when it changed. Returns an event to wait on (CONFIG_WAIT at most)
        while a read started moments ago is under way, else None."""
        now = time.monotonic()
        if self._config_reading is None and now - self._config_checked >= CONFIG_CHECK_INTERVAL:
            self._config_checked = now
            seen = self._config_identity()
            if seen != self._config_seen and self._tasks is not None:
                self._config_seen = seen
                self._config_reading = anyio.Event()
                self._config_read_started = now
                self._tasks.start_soon(self._reread_config, self._config_reading)
        if self._config_reading is not None and now - self._config_read_started < CONFIG_WAIT:
            return self._config_reading
        return None

    def _config_identity(self) -> tuple[int, ...] | None:
        try:
            info = self.paths.config.stat()
        except OSError:
            return None
        return (info.st_mtime_ns, info.st_size, info.st_ino, info.st_dev, info.st_mode)

    async def _reread_config(self, done: anyio.Event) -> None:
        try:
            await self.load_config()
        finally:
            self._config_reading = None
            done.set()

    async def load_config(self) -> None:
        """Read the config in a worker thread and apply it; a broken file (or one the core
        rejects) keeps the last good settings and is reported in `config_error`."""
        path = self.paths.config
        try:
            settings, found = await anyio.to_thread.run_sync(
                _load_settings, path, abandon_on_cancel=True
            )
        except ConfigError as exc:
            self.centre.settings.refuse(str(exc))
            logger.error("config not applied, keeping the last good one: %s", exc)
            return
        except Exception as exc:  # a bug in reading it must not take the daemon down
            self.centre.settings.refuse(f"{path}: cannot use it: {exc}")
            logger.exception("config not applied, keeping the last good one")
            return
        self.centre.settings.apply(settings)
        if found:
            logger.info("config loaded from %s", path)
        else:
            logger.info("no config at %s: the defaults", path)

    # -------------------------------------------------------------- run

    async def run(self, ready: Callable[[], None] | None = None) -> None:
        # A daemon started by a hook inherits the agent's project dir: don't keep it busy.
        os.chdir("/")
        adopted = systemd_socket(self.env)
        if adopted is None:
            paths.ensure_private_dir(self.paths.runtime_dir)
        else:
            self.paths.runtime_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
        paths.ensure_private_dir(self.paths.state.parent)
        self.server.max_connections = connection_limit()
        with exclusive_lock(self.paths.lock):
            self._config_seen = self._config_identity()
            self._config_checked = time.monotonic()
            await self.load_config()
            restored = snapshot.restore(
                self.centre.sessions, self.centre.transcripts, self.paths.state, self.journal
            )
            logger.info("restored %d session%s", restored, "" if restored == 1 else "s")
            # A snapshot of what was restored, then a new journal: the old one is not needed
            # once the snapshot holds its lines (and stays as it is when it could not be saved).
            self._save()
            self.centre.answers.persist_now = self._persist
            listener = adopted if adopted is not None else open_listener(self.paths.socket)
            # Every hook allocates short-lived tasks and frames; with the default thresholds the
            # collector runs every few hundred requests and its pauses make the latency tail.
            # What exists now (modules, restored sessions) is never garbage: keep it out of scans.
            gc.freeze()
            gc.set_threshold(50_000, 20, 100)
            try:
                await self._serve(listener, ready)
            finally:
                # Nothing here awaits, so cancellation cannot cut it short: no shield needed.
                self.centre.answers.persist_now = None
                self._save()
                self.journal.close()
                if adopted is None:
                    self.paths.socket.unlink(missing_ok=True)
                logger.info("ctxd stopped")

    async def _serve(self, listener: socket.socket, ready: Callable[[], None] | None) -> None:
        async with anyio.create_task_group() as tg:
            self._tasks = tg
            tg.start_soon(self._signals)
            tg.start_soon(self._watch)
            tg.start_soon(self._housekeeping)
            tg.start_soon(self.centre.transcripts.drain_backlog)
            # Optional ([otlp] or OTEL_* variables): the status rows pushed to a collector.
            status = self.centre.status.encoded_in_slices
            tg.start_soon(otlp.run, self.env, self.paths.config, status)
            # Optional ([notify] enabled): desktop notifications when a session crosses a line.
            tg.start_soon(notify.run, self.env, self.paths.config, status, self.clock)
            async with anyio.create_task_group() as serving:
                # Optional ([http] enabled): Claude Code's HTTP hooks, /metrics, the dashboard;
                # listening before the socket answers, so a daemon that answers serves both.
                self.http = await http.start(
                    self.env,
                    self.paths.config,
                    self.paths.state.parent,
                    self.server.handlers,
                    self.centre.sessions,
                    serving,
                    self._stopping,
                )
                serving.start_soon(self.server.serve, listener, self._stopping)
                logger.info(
                    "ctxd %s serving on %s (pid %d)", __version__, self.paths.socket, os.getpid()
                )
                notify_systemd(self.env, "READY=1")
                if ready is not None:
                    ready()
                await self._stopping.wait()
                notify_systemd(self.env, "STOPPING=1")
                # The server stops accepting and answers what it already read; bounded.
                serving.cancel_scope.deadline = anyio.current_time() + SHUTDOWN_GRACE
            tg.cancel_scope.cancel()

    async def _signals(self) -> None:
        with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
            async for signum in signals:
                logger.info("received %s, shutting down", signal.Signals(signum).name)
                self._stopping.set()
                return

    async def _watch(self) -> None:
        """One recursive watcher over the roots that exist, replaced when that set changes
        (an agent used for the first time creates its root)."""
        while not self._stopping.is_set():
            existing = self._existing_roots()
            self._watcher = watcher.RootsWatcher(
                existing,
                self._on_changes,
                live=lambda: poller.live_folders(self.centre.sessions),
                on_coverage=self.poller.cover,
            )
            async with anyio.create_task_group() as tg:
                await tg.start(self._watcher.run)
                # The watches are in place: a scan now finds what was written before them.
                self.centre.transcripts.discover(existing)
                self.centre.transcripts.sweep(everything=True)

    async def _on_changes(self, batch: list[tuple[str, bool]]) -> None:
        self.centre.transcripts.on_file_changes(batch)

    def _existing_roots(self) -> list[Path]:
        return [root for root in self.centre.transcripts.roots.values() if root.is_dir()]

    async def _housekeeping(self) -> None:
        ticks = _Ticks(time.monotonic())
        while True:
            if not self._watcher.quiet:
                tick = TICK
            else:  # unwatched folders are polled on their own interval, even in a lull
                tick = poller.POLL_INTERVAL if self.poller.active else QUIET_TICK
            await anyio.sleep(tick)
            try:
                self._housekeep(ticks)
            except Exception:  # one bad tick must not end the daemon; the next one retries
                logger.exception("housekeeping failed")

    def _housekeep(self, ticks: _Ticks) -> None:
        self.check_config()
        if self._existing_roots() != self._watcher.roots:
            self._watcher.stop()
        if time.monotonic() - ticks.sweep >= SWEEP_INTERVAL:
            ticks.sweeps += 1
            if ticks.sweeps % FULL_SWEEP_EVERY == 0:
                self.centre.transcripts.sweep(everything=True)
            elif not self._watcher.quiet:  # quiet: nothing changed for a while, anywhere
                self.centre.transcripts.sweep(everything=False)
            ticks.sweep = time.monotonic()
        # (A tick slept for the interval itself may wake a hair early on a coarse clock.)
        if self.poller.active and time.monotonic() - ticks.poll >= poller.POLL_INTERVAL - 0.1:
            self.poller.poll()
            ticks.poll = time.monotonic()
        if self.poller.active and time.monotonic() - ticks.rewatch >= watcher.RETRY_UNWATCHED:
            # Watches another program held may have been freed: a new watcher asks again.
            self._watcher.stop()
            ticks.rewatch = time.monotonic()
        if time.monotonic() - ticks.discovery > DISCOVERY_INTERVAL:
            # inotify misses files created in a directory made the same instant.
            self.centre.transcripts.discover(self._existing_roots())
            ticks.discovery = time.monotonic()
        if (
            (self.centre.sessions.dirty or self.centre.transcripts.states_left_out)
            and not self._saving
            and time.monotonic() - ticks.snapshot >= SNAPSHOT_INTERVAL
            and self._tasks is not None
        ):
            self._saving = True
            self._tasks.start_soon(self._save_off_the_loop)
            ticks.snapshot = time.monotonic()

    async def _save_off_the_loop(self) -> None:
        """`_save` with the file written in a worker thread: the snapshot is taken here, from
        each session's kept bytes, and the answers journaled while it is written begin the next
        journal. A shutdown meanwhile waits for the thread, then saves again itself."""
        try:
            centre = self.centre
            data = snapshot.snapshot(
                centre.sessions,
                centre.transcripts,
                self.journal.mark(),
                self._exporter,
                STATE_DUMPS_PER_SNAPSHOT,
            )
            centre.sessions.dirty = False  # what changes from now on makes it dirty again
            try:
                await anyio.to_thread.run_sync(snapshot.write, self.paths.state, data)
            except (OSError, CtxdError) as exc:
                logger.error("cannot save state to %s: %s", self.paths.state, exc)
                self.journal.unmark()
                centre.sessions.dirty = True
                return
            try:
                self.journal.start(carry=True)
            except (OSError, CtxdError) as exc:  # the old journal goes on, whole
                self.journal.unmark()
                logger.error("cannot start a new journal at %s: %s", self.journal.path, exc)
        finally:
            self._saving = False

    def _save(self) -> bool:
        """Write a snapshot and, once it is on disk, start a new journal; False (logged) when
        the snapshot could not be written: the old snapshot and journal then stay as they are."""
        try:
            snapshot.save(
                self.centre.sessions,
                self.centre.transcripts,
                self.paths.state,
                self.journal.seq,
                self._exporter,
            )
        except (OSError, CtxdError) as exc:
            logger.error("cannot save state to %s: %s", self.paths.state, exc)
            return False
        try:
            self.journal.start()
        except (OSError, CtxdError) as exc:  # the old journal goes on; its lines are numbered
            logger.error("cannot start a new journal at %s: %s", self.journal.path, exc)
        return True

    def _persist(self, key: str) -> None:
        """Journal session `key` before the answer that depends on it leaves."""
        state = self.centre.sessions[key]
        position = self.centre.transcripts.position(key)
        try:
            self.journal.append(state, position)
            self._sync_journal_soon()
        except OSError as exc:
            logger.error(
                "cannot journal %s to %s (%s): a crash before the next snapshot may repeat its "
                "last answer",
                key,
                self.journal.path,
                exc,
            )

    def _sync_journal_soon(self) -> None:
        """Have the journal flushed to disk in a worker thread: one sync at a time, and one more
        for whatever was written while it ran."""
        if self._syncing:
            self._sync_again = True
        elif self._tasks is not None:
            self._syncing = True
            self._tasks.start_soon(self._sync_journal)

    async def _sync_journal(self) -> None:
        try:
            while True:
                self._sync_again = False
                handle = self.journal.sync_handle()
                if handle is not None:
                    await anyio.to_thread.run_sync(snapshot.Journal.sync, handle)
                if not self._sync_again:
                    return
        except OSError as exc:
            logger.error("cannot flush the journal %s to disk: %s", self.journal.path, exc)
        finally:
            self._syncing = False


class _Ticks:
    """When housekeeping last did each of its jobs (monotonic seconds)."""

    def __init__(self, now: float) -> None:
        self.sweep = self.discovery = self.snapshot = self.poll = self.rewatch = now
        self.sweeps = 0


async def _after(reading: anyio.Event, answer: Callable[[], Answer]) -> bytes:
    """`answer()`, once the config being read is applied (or CONFIG_WAIT has passed)."""
    with anyio.move_on_after(CONFIG_WAIT):
        await reading.wait()
    return await resolve(answer())


def return_freed_memory() -> None:
    """Make glibc give big freed buffers back to the system.

    A request of megabytes is buffered, parsed and freed. glibc serves such sizes with mmap and
    unmaps them when freed, but after each such free it raises its mmap threshold (up to 32 MiB),
    so later big buffers come from the heap, which keeps freed memory: a burst of big requests
    stayed resident. Setting the threshold fixes it and turns the adjustment off.
    """
    try:
        import ctypes

        libc = ctypes.CDLL(None)
        libc.mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD)
    except (OSError, AttributeError):  # not glibc: nothing to tune
        pass


M_MMAP_THRESHOLD = -3  # from malloc.h
MMAP_THRESHOLD = 256 * 1024


def serve(env: Mapping[str, str], ready: Callable[[], None] | None = None) -> None:
    return_freed_memory()
    daemon = Daemon(env)
    anyio.run(daemon.run, ready)
