"""`ctxd status`: the daemon's status document, as text for people or as JSON for tools.

Pollers (a tmux segment, a menu bar, a script) run it every few seconds, so a run imports what
it prints and no more: the client's round trip and the stdlib's json, the report's text for the
text, and orjson only for a document the stdlib's json would write otherwise than it
(docs/benchmarks.md §29). Its usual words are read here, without argparse (`parse_words`).

With `--json`, stdout is JSON whatever happens: a failure prints an error object
(`$defs/error` in ctxd/schemas/status.v1.schema.json) and exits non-zero.
"""

from __future__ import annotations

import json
import sys

from ctxd.cli.client import request_json
from ctxd.errors import CtxdError, DaemonNotRunning, InvalidInput

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing costs start-up time; the checker alone needs it
    from collections.abc import Sequence
    from typing import Any

__all__ = ["SCHEMA", "document_json", "parse_words", "run"]

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
        doc = _document(session)
    except CtxdError as exc:
        if not as_json:
            raise
        error = {"schema": SCHEMA, "error": str(exc)}
        sys.stdout.write(json.dumps(error, ensure_ascii=False, separators=(",", ":")) + "\n")
        return exc.exit_code
    if as_json:
        sys.stdout.buffer.write(document_json(doc) + b"\n")
        return 0
    from ctxd.cli.report import session_lines, status_lines

    lines = status_lines(doc) if not session else _session_lines(doc, session_lines)
    sys.stdout.write("".join(line + "\n" for line in lines))
    return 0


def _document(session: str | None) -> dict[str, Any]:
    try:
        doc: dict[str, Any] = request_json("status")
    except DaemonNotRunning as exc:
        raise DaemonNotRunning(
            f"ctxd is not running (no daemon on {exc.socket}): start it with `ctxd serve`, "
            "or an agent's first hook starts it",
            exc.socket,
        ) from None
    # The daemon's own statistics repeat the config error reported at the top.
    if isinstance(doc.get("daemon"), dict):
        doc["daemon"].pop("config_error", None)
    return _select(doc, session) if session else doc


def _select(doc: dict[str, Any], prefix: str) -> dict[str, Any]:
    """`doc` with only the sessions whose id starts with `prefix` (one session: its main row and
    its subagents'); InvalidInput when none or several sessions match."""
    rows = [s for s in doc["sessions"] if str(s["session_id"]).startswith(prefix)]
    ids = sorted({str(s["session_id"]) for s in rows})
    if not ids:
        raise InvalidInput(f"no tracked session id starts with {prefix!r} (see `ctxd status`)")
    if len(ids) > 1:
        raise InvalidInput(f"{prefix!r} is the start of {len(ids)} session ids: {', '.join(ids)}")
    return {**doc, "sessions": rows}


def _session_lines(doc: dict[str, Any], session_lines: Any) -> list[str]:
    """One session in full: each of its rows (main and subagents), a blank line between."""
    lines: list[str] = []
    for i, row in enumerate(doc["sessions"]):
        if i:
            lines.append("")
        lines.extend(session_lines(row))
    return lines


def document_json(doc: Any) -> bytes:
    """`doc` as the CLI has always printed it: orjson's bytes (compact, UTF-8, keys in order).

    The stdlib's json writes those very bytes for everything a status document holds (strings,
    integers, null, booleans, and floats of 1e-4 or more, or 0), and is imported already; orjson,
    whose import costs more than the rest of the command, only for a float below 1e-4 (orjson
    writes `0.00001` and `2.5e-7` where the stdlib writes `1e-05` and `2.5e-07`)."""
    if _has_tiny_float(doc):
        import orjson

        return orjson.dumps(doc, option=orjson.OPT_NON_STR_KEYS)
    return json.dumps(doc, ensure_ascii=False, separators=(",", ":")).encode()


def _has_tiny_float(value: Any) -> bool:
    if isinstance(value, float):
        return not (value == 0 or 1e-4 <= abs(value) < float("inf"))  # nan/inf: orjson's null
    if isinstance(value, dict):
        return any(_has_tiny_float(v) for v in value.values())
    if isinstance(value, list):
        return any(_has_tiny_float(v) for v in value)
    return False
