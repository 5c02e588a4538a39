"""ctxd-line: one line of context usage for a terminal bar (tmux's `status-right`).

    ctxd-line [--tmux] [--cwd DIR]

Prints the session whose working directory is DIR (default: the current one) or its nearest
ancestor; else the worst of all live sessions, marked with "*"; "ctxd: no live session" when
none is. `--tmux` colours it by severity with tmux `#[fg=...]` styles. The daemon renders the
line (`line` op); this client only asks and prints, so it costs little more than the
interpreter's start (docs/benchmarks.md). tmux runs it every `status-interval` seconds: it
never starts the daemon, waits at most TIMEOUT, prints nothing when no daemon answers, and
exits 0 always.

Stdlib only, and only modules that are built in (see ctxd_hook.py): run it as
`python -S -I ctxd_line.py`, or through the `ctxd-line` entry point.
"""

import _socket
import posix
import sys

if __name__ == "__main__":  # run as a script under -I, whose directory is not on sys.path
    sys.path.insert(0, __file__.rpartition("/")[0] or ".")
try:
    import ctxd_wire as wire
except ImportError:  # a broken install must not break the bar: print nothing
    raise SystemExit(0) from None

#: tmux waits for a `#()` command in the background, but a bar that lags is still wrong: the
#: daemon answers in a millisecond or two.
TIMEOUT = 0.5
#: The longest directory sent (PATH_MAX); a longer one is not a directory.
MAX_CWD = 4096


def parse(args: "list[str]") -> "tuple[bool, bytes | None] | None":
    """(tmux styles?, the directory asked about); None for arguments this client does not take."""
    tmux = False
    cwd = None
    i = 0
    while i < len(args):
        word = args[i]
        if word == "--tmux":
            tmux = True
        elif word == "--cwd" and i + 1 < len(args):
            i += 1
            cwd = args[i].encode(errors="surrogateescape")
        elif word.startswith("--cwd="):
            cwd = word[6:].encode(errors="surrogateescape")
        else:
            return None
        i += 1
    return tmux, cwd


def request(tmux: bool, cwd: bytes) -> bytes:
    """A framed `line` request; the directory is the raw payload, so nothing needs escaping."""
    head = b'{"v":%d,"op":"line","tmux":%s}\n' % (wire.VERSION, b"true" if tmux else b"false")
    return wire.frame(head + cwd)


def ask(path: str, body: bytes, timeout: float) -> "bytes | None":
    """The daemon's line, or None when it did not answer well (or is not ours)."""
    sock = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
    try:
        sock.settimeout(timeout)
        sock.connect(path)
        uid = wire.peer_uid(sock)
        if uid is not None and uid != posix.getuid():
            return None
        sock.sendall(body)
        answer = wire.read_frame(sock, wire.MAX_RESPONSE)
    except (OSError, ValueError):
        return None
    finally:
        sock.close()
    return wire.ok_result(answer)


def main(argv: "list[str] | None" = None) -> int:
    parsed = parse(sys.argv[1:] if argv is None else argv)
    if parsed is None:
        sys.stderr.write("usage: ctxd-line [--tmux] [--cwd DIR]\n")
        return 2
    tmux, cwd = parsed
    try:
        if cwd is None:
            cwd = posix.getcwd().encode(errors="surrogateescape")
        line = ask(wire.socket_path(), request(tmux, cwd[:MAX_CWD]), TIMEOUT)
    except Exception:  # a status bar must never show a traceback
        line = None
    if line:
        # One line, whatever came: the bar shows the first.
        sys.stdout.buffer.write(line.partition(b"\n")[0] + b"\n")
        sys.stdout.buffer.flush()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
