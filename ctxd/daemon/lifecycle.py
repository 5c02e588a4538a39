"""`ctxd serve`: lock, socket, one task group that owns everything, signals, snapshot, shutdown.

Start-up order matters: the private runtime dir is checked, then an exclusive lock is taken
*before* the socket is bound (binding replaces a stale socket file left by a crashed daemon; only
the lock makes sure it is never a live daemon's), and readiness is reported only once the socket
listens. Shutdown is cancellation: SIGTERM/SIGINT stop accepting,
in-flight requests get a moment to finish, state is saved, the socket removed.
"""

from __future__ import annotations

import fcntl
import gc
import logging
import os
import signal
import socket
import stat
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import anyio

from ctxd import __version__, agents, paths
from ctxd.daemon import snapshot, watcher
from ctxd.daemon.config import load_settings
from ctxd.daemon.registry import Registry
from ctxd.daemon.server import Answer, Server, json_result
from ctxd.errors import ConfigError, CtxdError
from ctxd.protocol import Request

__all__ = ["AlreadyRunning", "Daemon", "DaemonPaths", "open_listener", "serve"]

logger = logging.getLogger(__name__)

# Housekeeping (config, roots, sweeps, snapshot) runs every TICK seconds, and every QUIET_TICK
# seconds once the watcher is quiet: each wake-up of an idle daemon costs CPU for nothing.
TICK = 1.0
QUIET_TICK = 5.0
SWEEP_INTERVAL = 5.0  # the safety net behind watcher events: one stat per live transcript
FULL_SWEEP_EVERY = 60  # sweeps: quiet transcripts are checked every 5 minutes
SNAPSHOT_INTERVAL = 5.0
DISCOVERY_INTERVAL = 300.0  # new directories are scanned at once; this is the net behind that
# A request checks the config file if it was last checked this long ago, so an edit applies to
# the next hook even while housekeeping sleeps.
CONFIG_CHECK_INTERVAL = 1.0
SHUTDOWN_GRACE = 2.0
SD_LISTEN_FDS_START = 3


class AlreadyRunning(CtxdError):
    exit_code = 1


@dataclass(frozen=True, slots=True)
class DaemonPaths:
    runtime_dir: Path
    socket: Path
    lock: Path
    state: Path
    config: Path

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> DaemonPaths:
        run = paths.runtime_dir(env)
        state = paths.state_dir(env)
        return cls(
            run,
            paths.socket_path(env),
            run / "ctxd.lock",
            state / "state.json",
            paths.config_path(env),
        )


@contextmanager
def exclusive_lock(path: Path) -> Iterator[None]:
    """Hold `path` locked for the daemon's lifetime; AlreadyRunning if another daemon holds it."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o600)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 32, 0).decode(errors="replace").strip() or "?"
            raise AlreadyRunning(f"another ctxd is already running (pid {holder})") from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        yield
    finally:
        os.close(fd)


def systemd_socket(env: Mapping[str, str]) -> socket.socket | None:
    """The listening socket systemd passed us (socket activation), if any."""
    if env.get("LISTEN_PID") != str(os.getpid()) or int(env.get("LISTEN_FDS", "0") or 0) < 1:
        return None
    sock = socket.socket(fileno=SD_LISTEN_FDS_START)
    sock.setblocking(False)
    return sock


def notify_systemd(env: Mapping[str, str], message: str) -> None:
    """sd_notify(3) without libsystemd: one datagram to $NOTIFY_SOCKET, if set."""
    address = env.get("NOTIFY_SOCKET")
    if not address:
        return
    if address.startswith("@"):
        address = "\0" + address[1:]
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sock:
        try:
            sock.sendto(message.encode(), address)
        except OSError as exc:
            logger.warning("cannot notify systemd: %s", exc)


def open_listener(path: Path) -> socket.socket:
    """Bind the socket 0600 from the start (umask), replacing a stale file from a crashed daemon.

    Only called with the daemon's lock held, so the file it replaces is never a live daemon's.
    """
    if path.exists() or path.is_symlink():
        if not stat.S_ISSOCK(path.lstat().st_mode):
            raise CtxdError(f"{path} exists and is not a socket; remove it or set CTXD_SOCKET")
        path.unlink()
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    old_umask = os.umask(0o177)
    try:
        sock.bind(str(path))
        sock.listen(socket.SOMAXCONN)
    except OSError as exc:
        sock.close()
        raise CtxdError(f"cannot listen on {path}: {exc.strerror or exc}") from None
    finally:
        os.umask(old_umask)
    os.chmod(path, 0o600)
    return sock


class Daemon:
    def __init__(self, env: Mapping[str, str], clock: Callable[[], float] = time.time) -> None:
        self.env = env
        self.paths = DaemonPaths.from_env(env)
        self.registry = Registry(None, agents.transcript_roots(env), clock)
        self.server = Server(
            {"hook": self._hook, "status": self._status, "stop": self._stop, "ping": self._ping}
        )
        self.started_at = time.time()
        self._stopping = anyio.Event()
        self._config_seen: tuple[float, int, int] | None = None
        self._config_checked = -CONFIG_CHECK_INTERVAL  # monotonic time of the last check
        self._watcher = watcher.RootsWatcher([], self._on_changes)  # replaced when running

    # -------------------------------------------------------------- handlers

    def _hook(self, request: Request) -> Answer:
        self.check_config()
        hint = request.header.get("event")
        return self.registry.handle_hook(
            str(request.header.get("agent")),
            str(hint) if hint else None,
            request.payload,
            request.header.get("env"),
        )

    def _status(self, request: Request) -> Answer:
        self.check_config()
        if self._watcher.quiet:
            # A quiet watcher reports a first change up to two of its slow steps late; a stat per
            # recent transcript costs less than a status that lags (and is nothing when it does
            # not: a busy watcher reports within tens of milliseconds).
            self.registry.sweep(everything=False)
        session = request.header.get("session")
        result = self.registry.status(str(session) if session else None)
        result["daemon"] = self.statistics()
        return json_result(result)

    def _stop(self, request: Request) -> Answer:
        self._stopping.set()
        return json_result({"stopping": True, "pid": os.getpid()})

    def _ping(self, request: Request) -> Answer:
        return json_result(self.statistics())

    def statistics(self) -> dict[str, object]:
        return {
            "version": __version__,
            "pid": os.getpid(),
            "uptime_s": round(time.time() - self.started_at, 1),
            "socket": str(self.paths.socket),
            "config": str(self.paths.config),
            "config_error": self.registry.config_error,
            "sessions": len(self.registry.sessions),
            "requests": self.server.requests,
            "refused": self.server.refused,
        }

    # -------------------------------------------------------------- config

    def check_config(self) -> None:
        """`reload_config`, at most once per CONFIG_CHECK_INTERVAL."""
        now = time.monotonic()
        if now - self._config_checked >= CONFIG_CHECK_INTERVAL:
            self._config_checked = now
            self.reload_config()

    def reload_config(self) -> None:
        """Read the config if it changed; a broken file keeps the last good settings."""
        try:
            info = self.paths.config.stat()
            seen: tuple[float, int, int] | None = (info.st_mtime, info.st_size, info.st_ino)
        except OSError:
            seen = None
        if seen == self._config_seen:
            return
        self._config_seen = seen
        try:
            self.registry.settings = load_settings(self.paths.config)
            self.registry.config_error = None
            logger.info("config loaded from %s", self.paths.config)
        except ConfigError as exc:
            self.registry.config_error = str(exc)
            logger.error("config not applied, keeping the last good one: %s", exc)

    # -------------------------------------------------------------- run

    async def run(self, ready: Callable[[], None] | None = None) -> None:
        # A daemon started by a hook inherits the agent's project dir: don't keep it busy.
        os.chdir("/")
        adopted = systemd_socket(self.env)
        if adopted is None:
            paths.ensure_private_dir(self.paths.runtime_dir)
        else:
            self.paths.runtime_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
        with exclusive_lock(self.paths.lock):
            self.reload_config()
            restored = snapshot.restore(self.registry, self.paths.state)
            logger.info("restored %d sessions", restored)
            listener = adopted if adopted is not None else open_listener(self.paths.socket)
            # Every hook allocates short-lived tasks and frames; with the default thresholds the
            # collector runs every few hundred requests and its pauses make the latency tail.
            # What exists now (modules, restored sessions) is never garbage: keep it out of scans.
            gc.freeze()
            gc.set_threshold(50_000, 20, 100)
            try:
                await self._serve(listener, ready)
            finally:
                with anyio.CancelScope(shield=True):
                    self._save()
                    if adopted is None:
                        self.paths.socket.unlink(missing_ok=True)
                logger.info("ctxd stopped")

    async def _serve(self, listener: socket.socket, ready: Callable[[], None] | None) -> None:
        async with anyio.create_task_group() as tg:
            tg.start_soon(self._signals)
            tg.start_soon(self._watch)
            tg.start_soon(self._housekeeping)
            async with anyio.create_task_group() as serving:
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
            self._watcher = watcher.RootsWatcher(existing, self._on_changes)
            async with anyio.create_task_group() as tg:
                await tg.start(self._watcher.run)
                # The watches are in place: a scan now finds what was written before them.
                self.registry.discover(existing)
                self.registry.sweep(everything=True)

    async def _on_changes(self, batch: list[tuple[str, bool]]) -> None:
        self.registry.on_file_changes(batch)

    def _existing_roots(self) -> list[Path]:
        return [root for root in self.registry.roots.values() if root.is_dir()]

    async def _housekeeping(self) -> None:
        last_snapshot = last_discovery = last_sweep = time.monotonic()
        sweeps = 0
        while True:
            await anyio.sleep(QUIET_TICK if self._watcher.quiet else TICK)
            self.check_config()
            if self._existing_roots() != self._watcher.roots:
                self._watcher.stop()
            if time.monotonic() - last_sweep >= SWEEP_INTERVAL:
                sweeps += 1
                if sweeps % FULL_SWEEP_EVERY == 0:
                    self.registry.sweep(everything=True)
                elif not self._watcher.quiet:  # quiet: nothing changed for a while, anywhere
                    self.registry.sweep(everything=False)
                last_sweep = time.monotonic()
            if time.monotonic() - last_discovery > DISCOVERY_INTERVAL:
                # inotify misses files created in a directory made the same instant.
                self.registry.discover(self._existing_roots())
                last_discovery = time.monotonic()
            if self.registry.dirty and time.monotonic() - last_snapshot >= SNAPSHOT_INTERVAL:
                self._save()
                last_snapshot = time.monotonic()

    def _save(self) -> None:
        try:
            snapshot.save(self.registry, self.paths.state)
        except OSError as exc:
            logger.error("cannot save state to %s: %s", self.paths.state, exc)


def serve(env: Mapping[str, str], ready: Callable[[], None] | None = None) -> None:
    daemon = Daemon(env)
    anyio.run(daemon.run, ready)
