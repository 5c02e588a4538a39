"""ctxd-hook: the thin hook client that agents run on every hook event.

    ctxd-hook AGENT [EVENT]        # EVENT: a hint
    # AGENT: claude | gemini | codex | qwen | opencode | pi | copilot | cline | kilo;
    ctxd-hook claude statusline    # Claude Code's statusLine command: prints ctxd's line
    ctxd-hook claude statusline --wrap COMMAND   # the user's own statusline, shown as it is

It forwards the hook payload (stdin) to the ctxd daemon over its Unix socket and prints the
daemon's answer verbatim. It runs on every tool call of every agent, so it is built for start-up
cost: stdlib only, and only modules that are built in or nearly free (`_socket`, not `socket`;
no `json`, no `subprocess`). Hooks installed by ctxd run it as `python -S -I ctxd_hook.py AGENT`.

Its contract with the agent: exit 0, always; print only a complete answer from the daemon. When
no daemon listens, it starts one in the background (unless CTXD_NO_SPAWN=1) and, if it was this
hook that started it, gives it SPAWN_WAIT to come up and answer this hook too (otherwise the
event that started the daemon would be lost); when nothing answers in time it prints nothing.

The wire format and the socket's place come from `ctxd_wire`, the stdlib-only module installed
beside this one and shared with the daemon. This client must not import `ctxd` itself: that
would pull in anyio and orjson.
"""

# Under `-S` not even `os` is loaded yet (site.py would have), and loading it is measurable (see
# the client's imports in docs/benchmarks.md): the hot path uses the built-in `posix` module,
# and `os` is imported only on the rare paths that need it.
# Likewise no `from __future__ import annotations` (a real import): annotations are strings.
import _signal  # type: ignore[import-not-found]  # built in and loaded; `signal` costs start-up
import _socket
import posix
import sys

if __name__ == "__main__":  # run as a script under -I, whose directory is not on sys.path
    sys.path.insert(0, __file__.rpartition("/")[0] or ".")
try:
    import ctxd_wire as wire
except ImportError:  # a broken install must not break the agent: exit 0, say nothing
    if "--wrap" not in sys.argv:  # ...and a wrapped statusline still runs (see `wrapped`)
        raise SystemExit(0) from None
    wire = None  # type: ignore[assignment]

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing costs start-up time; the checker alone needs it
    from collections.abc import Mapping

DEFAULT_TIMEOUT = 2.0
#: The most a hook waits for its payload to end (see `read_stdin`).
STDIN_WAIT = 5.0
#: How long a wrapped statusline waits for the daemon after the user's command has its input:
#: the daemon answers in a millisecond or two; a hung one must not hold the user's line back.
WRAP_TIMEOUT = 0.3
WRAP_FLAG = "--wrap"
SPAWN_BACKOFF = 5.0
SPAWN_WAIT = 2.0
SPAWN_POLL = 0.01


def _is_word(text: str) -> bool:
    # Agent and event names go into the JSON header unescaped, so only plain words pass.
    return 0 < len(text) <= 64 and text.replace("_", "").replace("-", "").isalnum()


def exchange(path: str, request: bytes, timeout: float) -> "bytes | None":
    """Send one request; return the bytes to print, or None when the daemon did not answer well.

    A socket whose other end runs as another user is not our daemon, whatever its path says
    (`CTXD_SOCKET` can point anywhere): nothing it says is printed into the agent's context.
    """
    sock = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
    try:
        sock.settimeout(timeout)
        sock.connect(path)
        uid = wire.peer_uid(sock)
        if uid is not None and uid != posix.getuid():
            return None
        sock.sendall(request)
        body = wire.read_frame(sock, wire.MAX_RESPONSE)
    except ValueError:  # an answer over the limit
        return None
    finally:
        sock.close()
    # An error answer (garbage payload, unknown session, ...) prints nothing: the agent must never
    # see text it could misread.
    return wire.ok_result(body)


class StdinTimeout(Exception):
    """Stdin did not end within STDIN_WAIT."""


def _stdin_timeout(signum: int, frame: object) -> None:
    raise StdinTimeout


def read_stdin(limit: int) -> bytes:
    """Up to `limit` + 1 bytes of stdin (one more than allowed tells an oversize payload).
    StdinTimeout when it has not ended within STDIN_WAIT: an agent writes its payload and
    closes the pipe at once, and one that kept it open must not have its hook wait on it until
    its own hook timeout (a minute), on every call. `_signal` is loaded at start-up already."""
    _signal.signal(_signal.SIGALRM, _stdin_timeout)
    _signal.setitimer(_signal.ITIMER_REAL, STDIN_WAIT)
    try:
        chunks = []
        size = 0
        while size <= limit:
            chunk = posix.read(0, min(1 << 20, limit + 1 - size))
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
        return b"".join(chunks)
    finally:
        _signal.setitimer(_signal.ITIMER_REAL, 0)


def serve_argv(env: "Mapping[str, str]") -> "list[str] | None":
    """The command that starts `ctxd serve --spawned`, or None when ctxd cannot be found.

    A copy of this client installed by `ctxd install` (in `~/.local/share/ctxd/client`, run by
    the base interpreter, which cannot import ctxd) finds ctxd through the `ctxd-command` file
    beside it, which every ctxd run rewrites; if the interpreter it names is gone (the venv moved
    or was removed), any `ctxd` on PATH. Run from an installed package (`ctxd-hook`), this
    interpreter is ctxd's own.
    """
    import os

    try:
        with open(__file__.rpartition("/")[0] + "/ctxd-command", "rb") as f:
            command = [w for w in f.read().decode(errors="surrogateescape").split("\n") if w]
    except OSError:
        # -I: the hook runs in the agent's project; `-m` would otherwise import from there.
        command = [sys.executable, "-I", "-m", "ctxd"]
    if not command or not os.access(command[0], os.X_OK):
        found = [
            f"{directory or '.'}/ctxd"
            for directory in env.get("PATH", os.defpath).split(":")
            if os.access(f"{directory or '.'}/ctxd", os.X_OK)
        ]
        if not found:
            return None
        command = found[:1]
    return [*command, "serve", "--spawned"]


def spawn_daemon(env: "Mapping[str, str] | None" = None) -> "int | None":
    """Start `ctxd serve` detached, at most once per back-off period across concurrent hooks;
    the new process's pid, None when this call started nothing."""
    import fcntl  # only on this rare path
    import os
    import time

    env = wire.environ() if env is None else env
    run_dir = wire.runtime_dir(env)
    old_umask = os.umask(0o077)  # every level we create is private, not just the last
    try:
        os.makedirs(run_dir, mode=0o700, exist_ok=True)
    finally:
        os.umask(old_umask)
    info = os.lstat(run_dir)
    if info.st_uid != os.getuid() or info.st_mode & 0o077:
        return None  # not a private dir of ours: the daemon would refuse it; write nothing there
    lock_path = run_dir + "/spawn.lock"
    fd = os.open(lock_path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK, 0o600)
    try:
        info = os.fstat(fd)
        if info.st_nlink != 1 or info.st_uid != os.getuid() or info.st_mode & 0o170000 != 0o100000:
            return None  # a hard link or something else planted there: not ours to write to
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            return None  # another hook is spawning right now
        if time.time() - os.fstat(fd).st_mtime < SPAWN_BACKOFF and os.fstat(fd).st_size:
            return None  # spawned moments ago; it may still be starting
        os.ftruncate(fd, 0)
        os.write(fd, b"%d\n" % os.getpid())
        argv = serve_argv(env)
        if argv is None:
            return None  # ctxd is gone from where it was and not on PATH: nothing to start
        devnull = os.devnull
        return os.posix_spawn(
            argv[0],
            argv,
            dict(env),
            file_actions=[
                (os.POSIX_SPAWN_OPEN, 0, devnull, os.O_RDONLY, 0),
                (os.POSIX_SPAWN_OPEN, 1, devnull, os.O_WRONLY, 0),
                (os.POSIX_SPAWN_OPEN, 2, devnull, os.O_WRONLY, 0),
            ],
            setsid=True,
        )
    finally:
        os.close(fd)


def answer_once_up(path: str, request: bytes, pid: int, timeout: float) -> "bytes | None":
    """The answer to `request` from the daemon this hook just started (process `pid`): wait
    until it listens (a connect every SPAWN_POLL s), then send the request once. None when it
    exited first (another daemon won the start; one last try), or `timeout` passed."""
    import os  # only on this rare path
    import time

    deadline = time.monotonic() + timeout
    exited = False
    while not _listening(path):
        if exited or time.monotonic() >= deadline:
            return None
        try:
            exited = os.waitpid(pid, os.WNOHANG)[0] != 0
        except ChildProcessError:
            exited = True
        if not exited:
            time.sleep(SPAWN_POLL)
    try:
        # Sent once only: a request that timed out may still be answered, and a second copy
        # would count its event twice.
        return exchange(path, request, DEFAULT_TIMEOUT)
    except OSError:
        return None


def _listening(path: str) -> bool:
    sock = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
    try:
        sock.connect(path)
    except OSError:
        return False
    finally:
        sock.close()
    return True


#: Names the agents ctxd serves (written out: this client cannot import ctxd's registry;
#: tests/clients/test_hook_client.py holds it to `ctxd.agents.AGENTS`).
USAGE = (
    "usage: ctxd-hook AGENT [EVENT]"
    "   (AGENT: claude, gemini, codex, qwen, opencode, pi, copilot, cline, kilo)\n"
)


def start_wrapped(command: str) -> "tuple[int, int] | None":
    """Start the user's statusline `command` as Claude Code runs it (`bash -c`, else `sh -c`),
    with this process's environment, stdout and stderr, and signals ignored here (SIGPIPE,
    SIGXFSZ: Python ignores them) back to their defaults; its stdin a pipe. Returns (pid,
    the pipe's write end), or None when no shell could be started."""
    read_end, write_end = posix.pipe()
    try:
        env = _uncoerced(posix.environ)
        for shell in ("bash", "sh"):
            try:
                pid = posix.posix_spawnp(
                    shell,
                    [shell, "-c", command],
                    env,
                    file_actions=[(posix.POSIX_SPAWN_DUP2, read_end, 0)],
                    setsigdef=(_signal.SIGPIPE, _signal.SIGXFSZ),
                )
            except OSError:
                continue
            return pid, write_end
    finally:
        posix.close(read_end)
    posix.close(write_end)
    return None


#: What Python's start-up writes into LC_CTYPE under a C or POSIX locale (PEP 538).
_COERCED = (b"C.UTF-8", b"C.utf8", b"UTF-8")


def _uncoerced(environ: "Mapping[bytes, bytes]") -> "Mapping[bytes, bytes]":
    """The environment as the agent passed it: without the LC_CTYPE that Python's locale
    coercion set at start-up (`-I` ignores PYTHONCOERCECLOCALE), which it does only when
    neither LC_ALL nor LANG is set."""
    if environ.get(b"LC_CTYPE") not in _COERCED or b"LC_ALL" in environ or b"LANG" in environ:
        return environ
    return {k: v for k, v in environ.items() if k != b"LC_CTYPE"}


def wrapped(command: str) -> int:
    """A statusline that is the user's own `command` with ctxd beside it: the command gets the
    payload on stdin and writes straight to Claude Code (same bytes, same exit code), while the
    payload also goes to the daemon, in parallel and bounded by WRAP_TIMEOUT; a missing daemon
    is started and not waited for (the next refresh reaches it). Returns the command's exit
    code (127 when no shell could run it, as a shell says for a missing command)."""
    try:
        payload = read_stdin(MAX_WRAPPED_PAYLOAD)
    except Exception:  # (no contextlib here: start-up cost)
        payload = b""
    started = start_wrapped(command)
    if started is None:
        return 127
    pid, write_end = started
    try:
        view = memoryview(payload)
        while view:
            view = view[posix.write(write_end, view) :]
    except OSError:  # the command exited without reading all of it: its choice
        pass
    finally:
        posix.close(write_end)
    try:
        if wire is not None and len(payload) <= wire.MAX_PAYLOAD:
            env = wire.environ()
            request = wire.hook_request("claude", "statusline", payload, wire.hook_env())
            try:
                exchange(wire.socket_path(env), request, WRAP_TIMEOUT)
            except OSError:
                if env.get("CTXD_NO_SPAWN") != "1":
                    spawn_daemon(env)
    except Exception:
        pass  # ctxd's side never changes the user's line
    while True:
        try:
            status = posix.waitpid(pid, 0)[1]
            break
        except InterruptedError:
            continue
    code = posix.waitstatus_to_exitcode(status)
    return code if code >= 0 else 128 - code


#: Read whole before the user's command starts; Claude Code's payloads are a few KB.
MAX_WRAPPED_PAYLOAD = 8 * 1024 * 1024


def main(argv: "list[str] | None" = None) -> int:
    """Run one hook; always returns 0. With `statusline --wrap COMMAND`, exits with COMMAND's
    exit code instead (SystemExit: the installed command ignores main's return value)."""
    args = sys.argv[1:] if argv is None else argv
    if len(args) == 4 and args[1] == "statusline" and args[2] == WRAP_FLAG:
        sys.stdout.flush()
        raise SystemExit(wrapped(args[3]))
    try:
        agent = args[0] if args else ""
        event = args[1] if len(args) > 1 else None
        if not _is_word(agent) or (event is not None and not _is_word(event)):
            sys.stderr.write(USAGE)
            return 0
        payload = read_stdin(wire.MAX_PAYLOAD)
        if len(payload) > wire.MAX_PAYLOAD:
            return 0
        env = wire.environ()
        timeout = float(env.get("CTXD_HOOK_TIMEOUT") or DEFAULT_TIMEOUT)
        try:
            request = wire.hook_request(agent, event, payload, wire.hook_env())
            output = exchange(wire.socket_path(env), request, timeout)
        except OSError:
            if env.get("CTXD_NO_SPAWN") == "1":
                return 0
            pid = spawn_daemon(env)
            if pid is None:
                return 0
            output = answer_once_up(wire.socket_path(env), request, pid, SPAWN_WAIT)
        if output:
            sys.stdout.buffer.write(output)
            sys.stdout.buffer.flush()
    except Exception:
        # A monitor must never break the agent: whatever went wrong, exit 0 and say nothing.
        pass
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
