"""`ctxd status` rendered by ctxd itself: what the front door (clients/ctxd_status.py) falls back
to when the daemon cannot render it (a daemon older than `status_view`, a session argument JSON
cannot carry as it is), and what `ctxd watch` redraws.

The usual `ctxd status` never imports this module: the daemon renders what is printed
(`ctxd.daemon.outputs.status_text`) and the front door writes it (docs/benchmarks.md §29).
"""

from __future__ import annotations

import time

import ctxd_status

from ctxd.errors import DaemonNotRunning, DaemonUnavailable, ProtocolError

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing costs start-up time; the checker alone needs it
    from typing import Any

__all__ = ["printed", "printed_here", "run"]


def run(session: str | None, *, as_json: bool) -> int:
    """Print the status (all sessions, or those of `session`, an id or a start of one); the
    exit code. With `as_json` a failure is an error object on stdout."""
    return ctxd_status.run(session, as_json, render_here=printed_here)


def printed(session: str | None, *, as_json: bool) -> bytes:
    """What `ctxd status [SESSION] [--json]` prints; a CtxdError (DaemonUnavailable saying the
    next step when no daemon answers)."""
    try:
        return ctxd_status.printed(session, as_json=as_json)
    except ctxd_status.Failure as failure:
        if failure.older:
            return printed_here(session, as_json)
        if failure.exit_code == ctxd_status.UNAVAILABLE:
            raise DaemonUnavailable(str(failure)) from None
        raise ProtocolError(str(failure)) from None


def printed_here(session: str | None, as_json: bool) -> bytes:
    """`printed` the old way: the status document asked for and rendered in this process."""
    from ctxd.cli.client import request_json
    from ctxd.daemon.outputs.status_text import printed as render

    try:
        doc: dict[str, Any] = request_json("status")
    except DaemonNotRunning as exc:
        raise DaemonNotRunning(ctxd_status.not_running(exc.socket), exc.socket) from None
    return render(doc, session, as_json=as_json, now=time.time())
