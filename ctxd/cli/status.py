"""`ctxd status`: the daemon's status document, as text for people or as JSON for tools.

Pollers (a tmux segment, a menu bar, a script) run it every few seconds, so a run is one round
trip and a write: the daemon renders what is printed (the `status_view` op,
`ctxd.daemon.outputs.status_text`), given the reader's home and clock, and this process imports
the round trip alone: no json, no report, no orjson (docs/benchmarks.md §29). Its usual words are
read here, without argparse (`parse_words`). A daemon older than that op gets the status
document asked for and rendered here, as before.

With `--json`, stdout is JSON whatever happens: a failure prints an error object
(`$defs/error` in ctxd/schemas/status.v1.schema.json) and exits non-zero.
"""

from __future__ import annotations

import sys
import time

import ctxd_wire as wire

from ctxd.cli.client import request_header
from ctxd.errors import CtxdError, DaemonNotRunning, ProtocolError

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing costs start-up time; the checker alone needs it
    from collections.abc import Sequence
    from typing import Any

__all__ = ["SCHEMA", "parse_words", "printed", "run"]

#: The version a status document (and an error object in its place) names first.
SCHEMA = "ctxd.status/v1"


def parse_words(words: Sequence[str]) -> tuple[str | None, bool] | None:
    """(session, as_json) from the words after `status` when they are its usual ones (`--json`
    and at most one session id start), else None: argparse then reads them and says what is
    wrong, or prints the help."""
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


def run(session: str | None, *, as_json: bool) -> int:
    """Print the status (all sessions, or those of `session`, an id or a start of one); the
    exit code. A failure is a CtxdError, or with `as_json` an error object on stdout."""
    try:
        out = printed(session, as_json=as_json)
    except CtxdError as exc:
        if not as_json:
            raise
        import json

        error = {"schema": SCHEMA, "error": str(exc)}
        sys.stdout.write(json.dumps(error, ensure_ascii=False, separators=(",", ":")) + "\n")
        return exc.exit_code
    sys.stdout.buffer.write(out)
    return 0


def printed(session: str | None, *, as_json: bool) -> bytes:
    """What `ctxd status [SESSION] [--json]` prints, as the daemon rendered it; DaemonNotRunning
    saying the next step when no daemon listens."""
    try:
        header = _view_header(session, as_json)
        if header is None:  # a session argument JSON cannot carry as it is: rendered here
            return _printed_here(session, as_json)
        try:
            return request_header(header)
        except ProtocolError as exc:
            if not str(exc).startswith("unknown op"):
                raise
            return _printed_here(session, as_json)  # a daemon from before `status_view`
    except DaemonNotRunning as exc:
        raise not_running(exc) from None


def not_running(exc: DaemonNotRunning) -> DaemonNotRunning:
    """The error a look at the status (`status`, `watch`) gives with no daemon: the next step."""
    return DaemonNotRunning(
        f"ctxd is not running (no daemon on {exc.socket}): start it with `ctxd serve`, "
        "or an agent's first hook starts it",
        exc.socket,
    )


def _view_header(session: str | None, as_json: bool) -> bytes | None:
    """The `status_view` request's header line, written by hand (the stdlib's json costs more to
    import than the request); None when `session` would need escaping."""
    env = wire.environ()
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


def _plain_json_string(text: str) -> bytes | None:
    """`text` as a JSON string when it is one between quotes as it is (printable ASCII, no quote
    or backslash), else None."""
    if text.isascii() and text.isprintable() and '"' not in text and "\\" not in text:
        return b'"' + text.encode() + b'"'
    return None


def _printed_here(session: str | None, as_json: bool) -> bytes:
    """`printed` the old way: the status document asked for and rendered in this process."""
    from ctxd.cli.client import request_json
    from ctxd.daemon.outputs.status_text import printed as render

    doc: dict[str, Any] = request_json("status")
    return render(doc, session, as_json=as_json, now=time.time())
