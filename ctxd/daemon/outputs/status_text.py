"""The status as `ctxd status` prints it: text for people, from the status document.

The daemon renders it (the `status_view` op), so that a poller's process only writes the bytes;
the CLI's replay text shares its figures' words. It reads the document only (the rows and the
daemon's statistics), never sessions or transcripts; the reader's `now`, home and clock are
arguments, since the reader may not be the daemon's process.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from typing import Any

import orjson

from ctxd.errors import InvalidInput

#: A time of day ("14:05") for a moment (seconds since the epoch), as the reader's clock says.
Clock = Callable[[float], str]

BAR_WIDTH = 10


def bar(used_pct: float | None, width: int = BAR_WIDTH) -> str:
    if used_pct is None:
        return "·" * width
    filled = max(0, min(width, round(used_pct / 100 * width)))
    return "▓" * filled + "░" * (width - filled)


def tokens_text(tokens: int | None) -> str:
    return "-" if tokens is None else f"{tokens:,}"


def _ago(seconds: float) -> str:
    if seconds < 60:
        return f"{seconds:.0f}s ago"
    if seconds < 3600:
        return f"{seconds / 60:.0f}m ago"
    return f"{seconds / 3600:.1f}h ago"


def _short_path(path: str | None, home: str) -> str:
    if not path:
        return "-"
    return "~" + path[len(home) :] if path.startswith(home + os.sep) else path


def _forecast(fc: dict[str, Any] | None, clock: Clock) -> str:
    if not fc or fc.get("tokens_per_call") is None:
        return "no growth measured yet"
    parts = [f"~{fc['tokens_per_call']:,.0f} tokens/call"]
    if fc.get("calls_to_next_threshold") is not None:
        parts.append(f"~{plural(fc['calls_to_next_threshold'], 'call')} to next threshold")
    if fc.get("calls_to_compaction") is not None:
        parts.append(f"~{plural(fc['calls_to_compaction'], 'call')} to compaction")
    if fc.get("first_compaction") == "idle":
        parts += [f"first: {text}" for text in _idle(fc.get("idle_compaction_at"), clock)]
    return ", ".join(parts)


def _limit(row: dict[str, Any]) -> list[str]:
    """The user's limit that set the session's level, when a token limit did."""
    name, value = row.get("limit_passed"), row.get("limit_value")
    if not isinstance(name, str) or not name.endswith("_tokens") or not isinstance(value, int):
        return []
    return [f"past {name} = {value:,}"]


def figure_marks(auto_compaction: bool, estimated: bool, too_small: bool) -> list[str]:
    """Short flags about a figure: no auto-compaction, an estimated figure, a window too small."""
    return [
        text
        for flag, text in (
            (not auto_compaction, "no auto-compaction"),
            (estimated, "estimate"),
            (too_small, "window too small?"),
        )
        if flag
    ]


#: The window source that means no source said anything: ctxd's own default, a guess.
GUESSED = "default"


def window_size_text(size: int, source: object) -> str:
    """A window size, marked "~" when it is ctxd's guess."""
    return f"~{size:,}" if source == GUESSED else f"{size:,}"


def window_from_text(source: object, model: object, hint: bool = True) -> str:
    """Where the window came from; a guess said as one (`hint`: with what would replace it)."""
    if source != GUESSED:
        return str(source)
    named = f"model {model}" if model else "a session that names no model"
    return f"guessed: no source for {named}" + (
        "; [windows] in ctxd's config sets it" if hint else ""
    )


def ended_text(row: dict[str, Any]) -> str:
    """`ended (the user quit)`: why a session ended, as a person reads it (the daemon puts it
    in words, `ctxd.core.endings`; a row without them shows the code)."""
    return f"ended ({row.get('ended_why') or row.get('ended_reason') or 'reason not given'})"


#: Text lines stay within this many columns (a detail line wraps at its " · " separators).
WIDTH = 100
INDENT = " " * 8


def status_header(session_width: int) -> str:
    return (
        f"{'AGENT':<6}  {'SESSION':<{session_width}}  {'MODEL':<16}  {'USED OF WINDOW':<17}  "
        f"{'TOKENS / WINDOW':>21}  {'TO COMPACT':>10}  STATE"
    )


def plural(count: int, word: str) -> str:
    """`1 request`, `2 requests`."""
    return f"{count:,} {word}" if count == 1 else f"{count:,} {word}s"


def pct_text(used: float | None, reported: bool = False) -> str:
    """A used percentage: one decimal when ctxd measured it; as reported (an integer) when it
    comes from the agent's statusline, so that it does not look more exact than it is."""
    if used is None:
        return "-"
    if reported and used == int(used):
        return f"{used:.0f}%"
    return f"{used:.1f}%"


def short_ids(ids: list[str], least: int = 8) -> dict[str, str]:
    """Each id's shortest prefix (at least `least` characters) that no other id shares; what
    `ctxd status PREFIX` accepts."""
    out = {}
    for sid in ids:
        n = least
        while n < len(sid) and any(o != sid and o.startswith(sid[:n]) for o in ids):
            n += 1
        out[sid] = sid[:n]
    return out


def _clip(text: str, width: int) -> str:
    return text if len(text) <= width else text[: width - 1] + "…"


def _wrap(parts: list[str], indent: str = INDENT, width: int = WIDTH) -> list[str]:
    """`parts` joined by " · " on indented lines of at most `width` columns."""
    lines: list[str] = []
    line = ""
    for part in parts:
        part = _clip(part, width - len(indent))
        candidate = f"{line} · {part}" if line else part
        if line and len(indent) + len(candidate) > width:
            lines.append(indent + line)
            candidate = part
        line = candidate
    if line:
        lines.append(indent + line)
    return lines


def _idle(at: object, clock: Clock) -> list[str]:
    """When the agent compacts the session if it stays idle, as the reader's clock time."""
    if not isinstance(at, int | float) or isinstance(at, bool):
        return []
    return [f"compacted if idle at {clock(at)}"]


def local_clock(at: float) -> str:
    """`at` as this process's local time of day (its TZ)."""
    return time.strftime("%H:%M", time.localtime(at))


def offset_clock(utc_offset: int) -> Clock:
    """Times of day at `utc_offset` seconds east of UTC: a reader's whose TZ is not ours."""
    return lambda at: time.strftime("%H:%M", time.gmtime(at + utc_offset))


def watching_lines(watching: object) -> list[str]:
    """What the daemon cannot watch (past the inotify limit), and how to fix it; nothing when
    it watches every folder."""
    if not isinstance(watching, dict) or not watching.get("unwatched"):
        return []
    import textwrap  # seldom needed: not imported by every `ctxd status`

    if watching.get("error"):
        said = (
            f"cannot watch the agents' folders ({watching['error']}): all "
            f"{watching['unwatched']:,} are polled every {watching.get('poll_interval_s')} s"
        )
    else:
        said = (
            f"inotify limit reached ({watching.get('limit_text')}): watching "
            f"{watching.get('watched', 0):,} of {watching.get('folders', 0):,} folders; the "
            f"other {watching['unwatched']:,} are polled every {watching.get('poll_interval_s')} s"
        )
    fix = f"to watch them all: {watching.get('fix')}"
    return [
        *textwrap.wrap(said, WIDTH, subsequent_indent=INDENT, break_on_hyphens=False),
        *textwrap.wrap(
            fix, WIDTH, initial_indent=INDENT, subsequent_indent=INDENT, break_on_hyphens=False
        ),
    ]


def http_lines(http: object) -> list[str]:
    """A line when `[http]` was on at the daemon's start but it does not listen (and why)."""
    if not isinstance(http, dict) or not http.get("enabled") or http.get("url"):
        return []
    return [
        f"[http] is on but ctxd does not listen: {http.get('error') or 'unknown reason'} "
        "(HTTP hooks and the dashboard get nothing; fix it, then `ctxd stop`: the next hook "
        "starts ctxd again)"
    ]


def store_problem_lines(problems: object) -> list[str]:
    """The agents' databases the daemon cannot read, one line each (nothing when none)."""
    if not isinstance(problems, list):
        return []
    return [
        f"cannot read {p.get('title')}'s database {p.get('path')} ({p.get('problem')}): its "
        "sessions' figures are frozen until it can be read"
        for p in problems
        if isinstance(p, dict)
    ]


def refused_lines(refused: object) -> list[str]:
    """A line per file ctxd did not read (an agent's settings file that is a FIFO, a transcript
    that is a link to a device, ...): what it was read as, where, and why."""
    if not isinstance(refused, list):
        return []
    return [
        f"not read: {r.get('what')} {r.get('path')}: {r.get('reason')}"
        for r in refused
        if isinstance(r, dict)
    ]


def status_lines(
    doc: dict[str, Any],
    now: float | None = None,
    home: str | None = None,
    clock: Clock = local_clock,
) -> list[str]:
    """A header, then per session a row (at most WIDTH columns) and its details below it.
    `now`, `home` and `clock` are the reader's (default: this process's): how long ago, paths
    under `~`, times of day."""
    now = time.time() if now is None else now
    home = os.path.expanduser("~") if home is None else home
    sessions = doc.get("sessions", [])
    lines: list[str] = []
    daemon = doc.get("daemon") or {}
    if daemon:
        lines.append(
            f"ctxd {daemon.get('version')} (pid {daemon.get('pid')}) · "
            f"{plural(len(sessions), 'session')} · "
            f"{plural(daemon.get('requests', 0), 'request')} served"
        )
    lines += watching_lines(daemon.get("watching"))
    lines += http_lines(daemon.get("http"))
    lines += store_problem_lines(daemon.get("store_problems"))
    if doc.get("config_error"):
        lines.append(
            f"config error: {doc['config_error']} (in force: the last config that loaded, or the "
            "defaults)"
        )
    lines += refused_lines(doc.get("refused_files"))
    if not sessions:
        lines.append("no sessions tracked yet")
        return lines
    ids = short_ids(sorted({s["session_id"] for s in sessions}))
    width = max(len(short) for short in ids.values())
    lines.append(status_header(width))
    for s in sessions:
        if "error" in s:  # the daemon could not compute this one's figures; the others stand
            lines.append(f"{s['agent']:<6}  {ids[s['session_id']]:<{width}}  {s['error']}")
            continue
        used = s.get("used_pct")
        reported = s.get("window_source") == "statusline"
        figures = (
            f"{tokens_text(s.get('tokens'))} / {window_size_text(s['window'], s['window_source'])}"
        )
        lines.append(
            f"{s['agent']:<6}  {ids[s['session_id']]:<{width}}  "
            f"{_clip(str(s.get('model') or '-'), 16):<16}  "
            f"{bar(used)} {pct_text(used, reported):>6}  {figures:>21}  "
            f"{tokens_text(s.get('tokens_to_compaction')):>10}  {str(s['severity']).upper()}"
        )
        details = [
            f"window {window_from_text(s['window_source'], s.get('model'))}"
            if s["window_source"] == GUESSED
            else f"window: {s['window_source']}",
            *_compact_window(s),
            _short_path(s.get("cwd"), home),
            f"updated {_ago(now - s['updated_at'])}",
            plural(s.get("compactions", 0), "compaction"),
            *_limit(s),
            *_idle(s.get("idle_compaction_at"), clock),
            _forecast(s.get("forecast"), clock),
            *figure_marks(
                s.get("auto_compaction", True),
                bool(s.get("estimated")),
                bool(s.get("window_too_small")),
            ),
        ]
        if s.get("parent"):
            details.append("subagent")
        if s.get("ended_at"):
            details.append(ended_text(s))
        if s.get("refused_files"):
            details.append(f"{plural(len(s['refused_files']), 'file')} not read (see above)")
        lines += _wrap(details)
    return lines


def _compact_window(row: dict[str, Any]) -> list[str]:
    """The window the agent's auto-compaction counts against and who decided it, when the
    agent has one: "compact window 400,000 (default)"."""
    size, source = row.get("compact_window"), row.get("compact_window_source")
    return [] if size is None else [f"compact window {size:,} ({source})"]


def session_lines(
    row: dict[str, Any],
    now: float | None = None,
    home: str | None = None,
    clock: Clock = local_clock,
) -> list[str]:
    """One session in full (`ctxd status ID`): every field a person needs, one per line
    (`now`, `home`, `clock`: as for `status_lines`)."""
    now = time.time() if now is None else now
    home = os.path.expanduser("~") if home is None else home
    if "error" in row:
        return [f"session  {row['session_id']}", f"agent    {row['agent']}", row["error"]]
    used = row.get("used_pct")
    fields = [
        ("session", row["session_id"]),
        ("agent", row["agent"]),
        ("model", row.get("model") or "-"),
        ("used", f"{pct_text(used, row.get('window_source') == 'statusline')} of the window"),
        (
            "tokens",
            f"{tokens_text(row.get('tokens'))} of "
            f"{window_size_text(row['window'], row['window_source'])}",
        ),
        ("window from", window_from_text(row["window_source"], row.get("model"))),
        ("compacts against", (_compact_window(row) or ["-"])[0]),
        ("compaction at", tokens_text(row.get("compaction_at"))),
        ("to compaction", tokens_text(row.get("tokens_to_compaction"))),
        ("severity", " · ".join([str(row["severity"]).upper(), *_limit(row)])),
        ("compactions", f"{row.get('compactions', 0)}"),
        ("idle compaction", (_idle(row.get("idle_compaction_at"), clock) or ["-"])[0]),
        ("forecast", _forecast(row.get("forecast"), clock)),
        ("transcript", _short_path(row.get("transcript_path"), home)),
        ("cwd", _short_path(row.get("cwd"), home)),
        ("updated", _ago(now - row["updated_at"])),
    ]
    marks = figure_marks(
        row.get("auto_compaction", True),
        bool(row.get("estimated")),
        bool(row.get("window_too_small")),
    )
    if marks:
        fields.append(("note", ", ".join(marks)))
    if row.get("parent"):
        fields.append(("subagent of", _short_path(row["parent"], home)))
    if row.get("ended_at"):
        fields.append(("ended", ended_text(row)[7:-1]))
    for refused in row.get("refused_files") or ():
        fields.append(("not read", f"{refused.get('path')}: {refused.get('reason')}"))
    width = max(len(name) for name, _ in fields) + 2  # the longest label, its colon, a blank
    return [f"{name + ':':<{width}}{value}" for name, value in fields]


def select(doc: dict[str, Any], prefix: str) -> dict[str, Any]:
    """`doc` with only the sessions whose id starts with `prefix` (one session: its main row and
    its subagents'); InvalidInput when none or several sessions match."""
    rows = [s for s in doc["sessions"] if str(s["session_id"]).startswith(prefix)]
    ids = sorted({str(s["session_id"]) for s in rows})
    if not ids:
        raise InvalidInput(f"no tracked session id starts with {prefix!r} (see `ctxd status`)")
    if len(ids) > 1:
        raise InvalidInput(f"{prefix!r} is the start of {len(ids)} session ids: {', '.join(ids)}")
    return {**doc, "sessions": rows}


def printed(
    doc: dict[str, Any],
    prefix: str | None,
    *,
    as_json: bool,
    now: float,
    home: str | None = None,
    clock: Clock = local_clock,
) -> bytes:
    """What `ctxd status [PREFIX] [--json]` prints for the status document `doc`: the table,
    one session in full (`prefix`, the start of its id), or the document as JSON (orjson's
    compact UTF-8, keys in order); InvalidInput when `prefix` names no single session."""
    # The daemon's own statistics repeat the config error reported at the top.
    if isinstance(doc.get("daemon"), dict):
        doc["daemon"].pop("config_error", None)
    if prefix:
        doc = select(doc, prefix)
    if as_json:
        return orjson.dumps(doc, option=orjson.OPT_NON_STR_KEYS) + b"\n"
    if not prefix:
        lines = status_lines(doc, now, home, clock)
    else:
        lines = []
        for i, row in enumerate(doc["sessions"]):  # its main row and its subagents'
            if i:
                lines.append("")
            lines.extend(session_lines(row, now, home, clock))
    return "".join(line + "\n" for line in lines).encode()
