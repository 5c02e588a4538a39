"""Connections that are slow, idle, big or too many cost the
daemon neither its hooks, nor its memory, nor its life."""

from __future__ import annotations

import contextlib
import resource
import selectors
import socket
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from types import TracebackType

from daemon_proc import Home, connect, hook_frame, proc_status_kib, recv_exactly, wait_for

MiB = 1024 * 1024


class Crowd:
    """`size` connections kept open to the daemon in a background thread: half send nothing,
    half dribble a frame at one byte a second. Those the daemon closes are opened again once a
    second, so the pressure lasts as long as the crowd does."""

    def __init__(self, home: Home, size: int) -> None:
        self.home = home
        self.size = size
        self.opened = 0
        self._stop = threading.Event()
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        # A frame announcing 1,000 bytes that never all come.
        self._dribble = (1000).to_bytes(4, "big") + b'{"v":1,"op":"ping"}' + b" " * 977

    def __enter__(self) -> Crowd:
        self._thread.start()
        assert self._ready.wait(10), "could not open the crowd's connections"
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._stop.set()
        self._thread.join(10)

    def _open(self, sel: selectors.BaseSelector, slow: bool) -> None:
        try:
            sock = connect(self.home.socket)
        except OSError:
            return  # the daemon is not accepting; the next round tries again
        sock.setblocking(False)
        sel.register(sock, selectors.EVENT_READ, [slow, 0])
        self.opened += 1

    def _run(self) -> None:
        sel = selectors.DefaultSelector()
        try:
            for n in range(self.size):
                self._open(sel, slow=n % 2 == 1)
            self._ready.set()
            next_byte = time.monotonic() + 1.0
            while not self._stop.is_set():
                self._drop_closed(sel)
                if time.monotonic() >= next_byte:
                    # Once a second, like clients that retry: not a busy loop of reconnects,
                    # which would keep the daemon too busy to see a hook before its request.
                    next_byte += 1.0
                    self._reopen_and_dribble(sel)
        finally:
            for key in list(sel.get_map().values()):
                key.fileobj.close()  # type: ignore[union-attr]
            sel.close()

    def _drop_closed(self, sel: selectors.BaseSelector) -> None:
        """Wait a little for readable connections; close those the daemon closed."""
        for key, _ in sel.select(timeout=0.05):
            sock = key.fileobj
            assert isinstance(sock, socket.socket)
            try:
                gone = not sock.recv(65536)
            except BlockingIOError:
                continue
            except OSError:
                gone = True
            if gone:
                sel.unregister(sock)
                sock.close()

    def _reopen_and_dribble(self, sel: selectors.BaseSelector) -> None:
        """Open connections again up to the pool's size, and send each slow one its next byte."""
        while len(sel.get_map()) < self.size and self.opened < 10 * self.size:
            self._open(sel, slow=len(sel.get_map()) % 2 == 1)
        for key in list(sel.get_map().values()):
            slow, sent = key.data
            if slow and sent < len(self._dribble):
                try:
                    key.fileobj.send(self._dribble[sent : sent + 1])  # type: ignore[union-attr]
                    key.data[1] = sent + 1
                except OSError:
                    pass  # closed: the select above sees it


def late_hook(home: Home, payload: dict[str, object], delay: float) -> bytes:
    """A hook whose request arrives `delay` s after it connected (a hook process preempted
    between connect and send on a busy machine); the bytes it would print, b"" if none."""
    try:
        with connect(home.socket, timeout=5) as sock:
            time.sleep(delay)
            sock.sendall(hook_frame(payload))
            size = int.from_bytes(recv_exactly(sock, 4), "big")
            header, _, result = recv_exactly(sock, size).partition(b"\n")
    except OSError:
        return b""
    return result if header.startswith(b'{"v":1,"ok":true') else b""


def test_idle_and_slow_connections_do_not_lock_hooks_out(home: Home) -> None:
    """With hundreds of connections that send a byte a second or nothing, most
    real hooks were told "busy" and printed nothing: idle connections held the 256 task slots
    for up to the 5 s deadline, and a hook whose request was not there yet when the daemon first
    read (a real hook process, usually) never got the inline fast path."""
    home.start()
    late = [home.claude() for _ in range(5)]
    sessions = [home.claude() for _ in range(40)]
    for session in late + sessions:
        session.assistant(650_000)  # each session's first call above the line warns

    with Crowd(home, 300):
        time.sleep(0.5)  # let the daemon accept them all
        late_out = [late_hook(home, s.payload("PostToolUse"), 0.02) for s in late]
        # Several agents' tools finish at once: 8 hook processes at a time.
        with ThreadPoolExecutor(8) as pool:
            outputs = list(pool.map(lambda s: home.hook(s.payload("PostToolUse")), sessions))
        alive = home.proc is not None and home.proc.poll() is None

    assert alive, f"the daemon died:\n{home.log_tail()}"
    assert all(o.returncode == 0 for o in outputs)
    answered = [o for o in outputs if b"CONTEXT WARNING" in o.stdout]
    late_answered = [o for o in late_out if b"CONTEXT WARNING" in o]
    assert (len(late_answered), len(answered)) == (len(late), len(sessions)), (
        f"while 300 idle or slow connections were open, {len(late_answered)} of {len(late)} "
        f"hooks sending 20 ms after connecting and {len(answered)} of {len(sessions)} real hook "
        f"runs (8 at a time) got their warning; daemon counters: {home.ping()}"
    )


def test_memory_returns_after_big_abandoned_requests(home: Home) -> None:
    """64 connections each 1 byte short of an 8 MiB request took the daemon's RSS
    from 27 to 556 MB, and 371-492 MB stayed resident after they closed; up to 256 x 8 MiB could
    be buffered. The number of big buffers in flight must be bounded, and the memory given back."""
    proc = home.start()
    time.sleep(0.5)
    baseline = proc_status_kib(proc.pid, "VmRSS")
    size = 8 * MiB
    request = size.to_bytes(4, "big") + b"x" * (size - 1)  # one byte short of the whole frame

    all_sent = threading.Barrier(64)

    def abandon() -> None:
        """Send all but the last byte, wait until every connection has, then go away."""
        try:
            with connect(home.socket, timeout=15) as sock:
                with contextlib.suppress(OSError):  # refused or cut off: the daemon's right
                    sock.sendall(request)
                all_sent.wait(20)
        except (OSError, threading.BrokenBarrierError):
            pass

    with ThreadPoolExecutor(64) as pool:
        for future in [pool.submit(abandon) for _ in range(64)]:
            future.result()
    peak = proc_status_kib(proc.pid, "VmHWM")
    assert proc.poll() is None, f"the daemon died:\n{home.log_tail()}"

    def settled() -> int | None:
        rss = proc_status_kib(proc.pid, "VmRSS")
        return rss if rss < baseline + 64 * 1024 else None

    try:
        wait_for(settled, 5, "the daemon's RSS to come back")
    except AssertionError:
        rss = proc_status_kib(proc.pid, "VmRSS")
        raise AssertionError(
            f"RSS {rss // 1024} MiB after the connections closed, baseline {baseline // 1024} "
            f"MiB (peak {peak // 1024} MiB)"
        ) from None
    assert peak < baseline + 128 * 1024, (
        f"peak RSS {peak // 1024} MiB from a baseline of {baseline // 1024} MiB: too many big "
        "requests buffered at once"
    )
    assert home.ping() is not None


def test_running_out_of_file_descriptors_does_not_end_the_daemon(home: Home) -> None:
    """Only BlockingIOError was handled around accept(); EMFILE (and ENFILE,
    ENOBUFS, ENOMEM, ECONNABORTED) ended the daemon. Log, back off, keep serving."""

    def few_fds() -> None:
        resource.setrlimit(resource.RLIMIT_NOFILE, (64, 64))

    proc = home.start(preexec_fn=few_fds)
    flood: list[socket.socket] = []
    try:
        for _ in range(120):  # more than the daemon has descriptors for
            try:
                flood.append(connect(home.socket, timeout=2))
            except OSError:
                break
        time.sleep(1.0)  # the daemon accepts until accept() fails
    finally:
        for sock in flood:
            sock.close()

    def serving() -> bool:
        if proc.poll() is not None:
            raise AssertionError(f"the daemon exited with {proc.returncode}:\n{home.log_tail()}")
        return home.ping(timeout=1) is not None

    wait_for(serving, 8, "the daemon to serve again after running out of descriptors")
    session = home.claude()
    session.assistant(650_000)
    out = home.hook_out(session.payload("PostToolUse"))
    assert out is not None and "CONTEXT WARNING" in str(out)
