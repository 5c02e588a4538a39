"""ctxd-hook: the thin hook client that agents run on every hook event.

    ctxd-hook AGENT [EVENT]        # AGENT: claude | gemini | codex; EVENT: optional hint
    ctxd-hook claude statusline    # Claude Code's statusLine command

It forwards the hook payload (stdin) to the ctxd daemon over its Unix socket and prints the
daemon's answer verbatim. It runs on every tool call of every agent, so it is built for start-up
cost: stdlib only, and only modules that are built in or nearly free (`_socket`, not `socket`;
no `json`, no `subprocess`). Hooks installed by ctxd run it as `python -S -I ctxd_hook.py AGENT`.

Its contract with the agent: exit 0, always; print only a complete answer from the daemon; when
no daemon answers within a short bound, print nothing and start one in the background (unless
CTXD_NO_SPAWN=1) so that the next hook finds it.

The wire format is ctxd.protocol's: a frame is a 4-byte big-endian length and a body; a request
body is a JSON header line, a newline, then the raw payload; a response body is a JSON header
line, a newline, then the bytes to print. This file repeats the few constants it needs, because
it must not import ctxd (that would pull in anyio and orjson).
"""

# Under `-S` not even `os` is loaded yet (site.py would have), and it costs ~1 ms: the hot path
# uses the built-in `posix` module, and `os` is imported only on the rare paths that need it.
# Likewise no `from __future__ import annotations` (a real import): annotations are strings.
import _socket
import posix
import sys

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing costs start-up time; the checker alone needs it
    from collections.abc import Mapping

PROTOCOL_VERSION = 1
MAX_PAYLOAD = 8 * 1024 * 1024
MAX_RESPONSE = 1024 * 1024
DEFAULT_TIMEOUT = 2.0
SPAWN_BACKOFF = 5.0
AGENTS = ("claude", "gemini", "codex")


def environ() -> "dict[str, str]":
    """The process environment as str, from `posix` (whose keys and values are bytes)."""
    return {
        key.decode(errors="surrogateescape"): value.decode(errors="surrogateescape")
        for key, value in posix.environ.items()
    }


def runtime_dir(env: "Mapping[str, str] | None" = None) -> str:
    """The private directory holding the socket: `$XDG_RUNTIME_DIR/ctxd`, else a state dir."""
    env = environ() if env is None else env
    xdg_runtime = env.get("XDG_RUNTIME_DIR")
    if xdg_runtime:
        return xdg_runtime + "/ctxd"
    state_home = env.get("XDG_STATE_HOME") or (_home(env) + "/.local/state")
    return state_home + "/ctxd/run"


def socket_path(env: "Mapping[str, str] | None" = None) -> str:
    """Where the daemon listens: `CTXD_SOCKET` if set, else `<runtime_dir>/ctxd.sock`."""
    env = environ() if env is None else env
    return env.get("CTXD_SOCKET") or runtime_dir(env) + "/ctxd.sock"


def _home(env: "Mapping[str, str]") -> str:
    home = env.get("HOME")
    if home:
        return home
    import os  # rare: no HOME at all

    return os.path.expanduser("~")


def _is_word(text: str) -> bool:
    # Agent and event names go into the JSON header unescaped, so only plain words pass.
    return 0 < len(text) <= 64 and text.replace("_", "").replace("-", "").isalnum()


def build_request(agent: str, event: "str | None", payload: bytes) -> bytes:
    """One framed hook request; `agent` and `event` must be plain words."""
    event_json = f'"{event}"' if event else "null"
    header = f'{{"v":{PROTOCOL_VERSION},"op":"hook","agent":"{agent}","event":{event_json}}}\n'
    body = header.encode() + payload
    return len(body).to_bytes(4, "big") + body


def _recv_exactly(sock: _socket.socket, size: int) -> bytes:
    chunks = []
    while size:
        chunk = sock.recv(min(size, 65536))
        if not chunk:
            raise OSError("connection closed early")
        chunks.append(chunk)
        size -= len(chunk)
    return b"".join(chunks)


def exchange(path: str, request: bytes, timeout: float) -> "bytes | None":
    """Send one request; return the bytes to print, or None when the daemon did not answer well."""
    sock = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
    try:
        sock.settimeout(timeout)
        sock.connect(path)
        sock.sendall(request)
        size = int.from_bytes(_recv_exactly(sock, 4), "big")
        if size > MAX_RESPONSE:
            return None
        body = _recv_exactly(sock, size)
    finally:
        sock.close()
    header, _, output = body.partition(b"\n")
    # An error answer (garbage payload, unknown session, ...) prints nothing: the agent must never
    # see text it could misread.
    if not header.startswith(b'{"v":1,"ok":true'):
        return None
    return output


def read_stdin(limit: int) -> bytes:
    """Up to `limit` + 1 bytes of stdin (one more than allowed tells an oversize payload)."""
    chunks = []
    size = 0
    while size <= limit:
        chunk = posix.read(0, min(1 << 20, limit + 1 - size))
        if not chunk:
            break
        chunks.append(chunk)
        size += len(chunk)
    return b"".join(chunks)


def spawn_daemon(env: "Mapping[str, str] | None" = None) -> None:
    """Start `ctxd serve` detached, at most once per back-off period across concurrent hooks."""
    import fcntl  # only on this rare path
    import os
    import time

    env = environ() if env is None else env
    run_dir = runtime_dir(env) if not env.get("CTXD_SOCKET") else os.path.dirname(socket_path(env))
    old_umask = os.umask(0o077)  # every level we create is private, not just the last
    try:
        os.makedirs(run_dir, mode=0o700, exist_ok=True)
    finally:
        os.umask(old_umask)
    lock_path = run_dir + "/spawn.lock"
    fd = os.open(lock_path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o600)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            return  # another hook is spawning right now
        if time.time() - os.fstat(fd).st_mtime < SPAWN_BACKOFF and os.fstat(fd).st_size:
            return  # spawned moments ago; it may still be starting
        os.ftruncate(fd, 0)
        os.write(fd, b"%d\n" % os.getpid())
        devnull = os.devnull
        # -I: the hook runs in the agent's project; `-m` would otherwise import from there.
        os.posix_spawn(
            sys.executable,
            [sys.executable, "-I", "-m", "ctxd", "serve", "--spawned"],
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


def main(argv: "list[str] | None" = None) -> int:
    """Run one hook; always returns 0."""
    args = sys.argv[1:] if argv is None else argv
    try:
        agent = args[0] if args else ""
        event = args[1] if len(args) > 1 else None
        if agent not in AGENTS or (event is not None and not _is_word(event)):
            sys.stderr.write("usage: ctxd-hook claude|gemini|codex [EVENT]\n")
            return 0
        payload = read_stdin(MAX_PAYLOAD)
        if len(payload) > MAX_PAYLOAD:
            return 0
        env = environ()
        timeout = float(env.get("CTXD_HOOK_TIMEOUT") or DEFAULT_TIMEOUT)
        try:
            output = exchange(socket_path(env), build_request(agent, event, payload), timeout)
        except OSError:
            if env.get("CTXD_NO_SPAWN") != "1":
                spawn_daemon(env)
            return 0
        if output:
            sys.stdout.buffer.write(output)
            sys.stdout.buffer.flush()
    except Exception:
        # A monitor must never break the agent: whatever went wrong, exit 0 and say nothing.
        pass
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
