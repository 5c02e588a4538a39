"""The `ctxd` command's front door: `ctxd status` straight to the daemon, the rest to ctxd.cli.

    ctxd status [--json] [SESSION]

Pollers (a tmux segment, a menu bar, a script) run `ctxd status` every few seconds, so the
`ctxd` entry point is this module's `main`: `status` with its usual words is one request, the
daemon's `status_view` (it renders the table, one session in full, or the JSON document, given
the reader's home and clock), and its bytes written; any other command line goes to `ctxd.cli`,
imported then. Only built-in modules (see ctxd_hook.py) and `ctxd_wire`, so that a poller can
also run it below any console script's start-up, as `python -S -I` (`status_main`;
docs/benchmarks.md §29).

A daemon older than `status_view`, or a SESSION that JSON cannot carry as it is, is rendered
by ctxd itself (`ctxd.cli.status`). With `--json`, stdout is JSON whatever happens: a failure
prints an error object (`$defs/error` in ctxd/schemas/status.v1.schema.json) and exits non-zero.
"""

import _socket
import sys
import time

if __name__ == "__main__":  # run as a script under -I, whose directory is not on sys.path
    sys.path.insert(0, __file__.rpartition("/")[0] or ".")
import ctxd_wire as wire

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing costs start-up time; the checker alone needs it
    from collections.abc import Callable, Mapping, Sequence

#: The version a status document (and an error object in its place) names first.
SCHEMA = "ctxd.status/v1"
#: A status of 10,000 sessions takes the daemon a while; a poller that waits longer is stuck.
TIMEOUT = 10.0
#: Exit codes, as ctxd's errors have them: no daemon answers; it answered with an error.
UNAVAILABLE, REFUSED = 3, 2


class Failure(Exception):
    """Why no status was printed: a line for the user and the exit code; `older` when the
    daemon predates `status_view`."""

    def __init__(self, message: str, exit_code: int, *, older: bool = False) -> None:
        super().__init__(message)
        self.exit_code = exit_code
        self.older = older


def parse(words: "Sequence[str]") -> "tuple[str | None, bool] | None":
    """(session, as_json) from the words after `status` when they are its usual ones (`--json`
    and at most one session id start), else None: ctxd.cli's argparse then reads them and says
    what is wrong, or prints the help."""
    session = None
    as_json = False
    for word in words:
        if word == "--json":
            as_json = True
        elif word.startswith("-") or session is not None:
            return None
        else:
            session = word
    return session, as_json


def view_header(session: "str | None", as_json: bool, env: "Mapping[str, str]") -> "bytes | None":
    """The `status_view` request's header line, written by hand (the stdlib's json costs more to
    import than the request); None when `session` would need escaping."""
    fields = [b'{"v":%d,"op":"status_view"' % wire.VERSION]
    if session:
        prefix = _plain_json_string(session)
        if prefix is None:
            return None
        fields.append(b'"prefix":' + prefix)
    if as_json:
        fields.append(b'"json":true')
    home = _plain_json_string(env.get("HOME") or "")
    if home is not None and home != b'""':  # else the daemon's home stands for ours
        fields.append(b'"home":' + home)
    tz = env.get("TZ")
    tz_json = b"null" if tz is None else _plain_json_string(tz)
    if tz_json is not None:
        fields.append(b'"tz":' + tz_json)
    fields.append(b'"utc_offset":%d' % time.localtime().tm_gmtoff)
    return b",".join(fields) + b"}"


def _plain_json_string(text: str) -> "bytes | None":
    """`text` as a JSON string when it is one between quotes as it is (printable ASCII, no quote
    or backslash), else None."""
    if text.isascii() and text.isprintable() and '"' not in text and "\\" not in text:
        return b'"' + text.encode() + b'"'
    return None


def not_running(path: str) -> str:
    """What a look at the status (`status`, `watch`) says with no daemon: the next step."""
    return (
        f"ctxd is not running (no daemon on {path}): start it with `ctxd serve`, "
        "or an agent's first hook starts it"
    )


def ask(path: str, header: bytes, timeout: float = TIMEOUT) -> bytes:
    """The result of one request with no payload; Failure saying why there is none."""
    sock = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
    try:
        sock.settimeout(timeout)
        try:
            sock.connect(path)
        except (FileNotFoundError, ConnectionRefusedError):
            raise Failure(not_running(path), UNAVAILABLE) from None
        except OSError as exc:
            raise Failure(
                f"cannot reach ctxd at {path}: {exc.strerror or exc}", UNAVAILABLE
            ) from None
        try:
            sock.sendall(wire.frame(header + b"\n"))
            body = wire.read_frame(sock, wire.MAX_STATUS)
        except wire.FrameTooLarge as exc:
            raise Failure(str(exc), REFUSED) from None
        except TimeoutError:
            raise Failure(
                f"ctxd at {path} did not answer within {timeout:g} s", UNAVAILABLE
            ) from None
        except OSError as exc:
            raise Failure(f"lost the connection to ctxd at {path}: {exc}", UNAVAILABLE) from None
    finally:
        sock.close()
    result = wire.ok_result(body)
    if result is None:
        raise _refusal(body)
    return result


def _refusal(body: bytes) -> Failure:
    """The error an answer that is not a success says."""
    import json  # an error answer: rare

    try:
        header = json.loads(body.partition(b"\n")[0])
    except ValueError:
        return Failure("response header is not JSON", REFUSED)
    if not isinstance(header, dict) or header.get("v") != wire.VERSION:
        return Failure("response is not a ctxd v1 answer", REFUSED)
    error = str(header.get("error") or "the daemon refused the request")
    return Failure(error, REFUSED, older=error.startswith("unknown op"))


def printed(session: "str | None", *, as_json: bool) -> bytes:
    """What `ctxd status [SESSION] [--json]` prints, as the daemon rendered it; Failure (`older`
    when the daemon predates the rendering, or SESSION needs escaping)."""
    env = wire.environ()
    header = view_header(session, as_json, env)
    if header is None:
        raise Failure("the session argument is not plain ASCII text", REFUSED, older=True)
    return ask(wire.socket_path(env), header)


def run(
    session: "str | None",
    as_json: bool,
    render_here: "Callable[[str | None, bool], bytes] | None" = None,
) -> int:
    """Print the status; the exit code. `render_here` renders it in this process when the
    daemon cannot (see `printed`), raising Failure or ctxd's errors (their `exit_code`)."""
    try:
        try:
            out = printed(session, as_json=as_json)
        except Failure as failure:
            if not failure.older:
                raise
            if render_here is None:  # this client alone: no ctxd to render it with
                raise _unrendered(failure) from None
            out = render_here(session, as_json)
    except Exception as exc:
        code = getattr(exc, "exit_code", None)
        if not isinstance(code, int):
            raise
        if as_json:
            sys.stdout.write(_error_object(str(exc)))
        else:
            sys.stderr.write(f"ctxd status: {exc}\n")
        return code
    try:
        sys.stdout.buffer.write(out)
        sys.stdout.buffer.flush()
    except BrokenPipeError:  # a reader that stopped early (`| head`)
        pass
    return 0


def _unrendered(failure: Failure) -> Failure:
    if str(failure).startswith("unknown op"):
        return Failure(
            "the daemon running is older than this client (`ctxd stop`: the next hook or "
            "`ctxd serve` starts this version)",
            REFUSED,
        )
    return Failure(f"{failure} (`ctxd status` takes it)", REFUSED)


def _error_object(message: str) -> str:
    import json

    error = {"schema": SCHEMA, "error": message}
    return json.dumps(error, ensure_ascii=False, separators=(",", ":")) + "\n"


def _render_here(session: "str | None", as_json: bool) -> bytes:
    from ctxd.cli.status import printed_here

    return printed_here(session, as_json)


def main(argv: "Sequence[str] | None" = None) -> int:
    """`ctxd`: the status's usual words here, anything else to ctxd.cli."""
    words = sys.argv[1:] if argv is None else list(argv)
    if words[:1] == ["status"]:
        wanted = parse(words[1:])
        if wanted is not None:
            return run(*wanted, render_here=_render_here)
    from ctxd.cli import main as cli_main

    return cli_main(words)


def status_main(argv: "Sequence[str] | None" = None) -> int:
    """`ctxd status` for a poller that runs this client by itself, with the status's words
    only: `python -S -I -c 'import sys; sys.path[:0] = [DIR]; import ctxd_status as s;
    raise SystemExit(s.status_main())' [--json] [SESSION]` (imported, so that its bytecode is
    cached: a script's own source is compiled at every run)."""
    wanted = parse(sys.argv[1:] if argv is None else argv)
    if wanted is None:
        sys.stderr.write("usage: ctxd_status.py [--json] [SESSION]\n")
        return 2
    return run(*wanted)


if __name__ == "__main__":  # python -S -I ctxd_status.py [--json] [SESSION]
    raise SystemExit(status_main())
