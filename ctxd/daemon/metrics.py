"""`ctxd status` as Prometheus text (exposition format 0.0.4), for `GET /metrics` and
`ctxd metrics --textfile`.

A pure rendering of the document the daemon's `status` handler answers with (the same one
`ctxd status --json` prints), so the figures a scraper sees are the figures the CLI shows:

- per live session (not ended), labelled `agent`, `model`, `session`: `ctxd_context_tokens`,
  `ctxd_context_window_tokens`, `ctxd_context_used_ratio`, `ctxd_tokens_to_compaction`,
  `ctxd_severity` (0 ok, 1 warning, 2 critical), `ctxd_idle_compaction_timestamp_seconds` (when
  the agent compacts it if it stays idle), and `ctxd_limit_passed` (the user's limit that set the
  severity, its `[thresholds]` key in the `limit` label: `warning_tokens`, `critical`, ...; its
  value the limit, in tokens or % left). A session not measured yet has only its severity; one
  whose agent will not compact has no `ctxd_tokens_to_compaction`. Ended sessions are left out,
  so the series are bounded by the sessions running now;
- counters since the daemon started: hooks answered by agent and event, warnings given by
  severity, handoffs asked, compactions seen, and refused or failed requests by transport.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

__all__ = ["BUCKETS", "CONTENT_TYPE", "SEVERITY", "Histogram", "live_rows", "render"]

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
SEVERITY = {"ok": 0, "warning": 1, "critical": 2}

_GAUGES = (
    ("ctxd_context_tokens", "Tokens in the session's context now (the last usage reported)."),
    ("ctxd_context_window_tokens", "The session's context window, in tokens."),
    ("ctxd_context_used_ratio", "Context tokens over the window (0 to 1)."),
    ("ctxd_tokens_to_compaction", "Tokens left before the agent compacts its context."),
    ("ctxd_severity", "ctxd's judgement of the session: 0 ok, 1 warning, 2 critical."),
    (
        "ctxd_idle_compaction_timestamp_seconds",
        "When the agent compacts the session if it stays idle (Unix time).",
    ),
)
_LIMIT = (
    "ctxd_limit_passed",
    "The user's limit that set the severity (label limit: its [thresholds] key), its value.",
)
#: counter name in the status document -> (metric, help, label names)
_COUNTERS = {
    "hooks": ("ctxd_hooks_answered_total", "Hooks answered.", ("agent", "event")),
    "warnings": ("ctxd_warnings_total", "Context warnings given.", ("agent", "severity")),
    "handoffs": ("ctxd_handoffs_total", "Handoffs asked for.", ("agent",)),
    "compactions": ("ctxd_compactions_total", "Compactions seen.", ("agent",)),
}


def _escape(value: object) -> str:
    text = "" if value is None else str(value)
    return text.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _labels(pairs: Iterable[tuple[str, object]]) -> str:
    return "{" + ",".join(f'{name}="{_escape(value)}"' for name, value in pairs) + "}"


def _number(value: float) -> str:
    return repr(float(value)) if isinstance(value, float) else str(int(value))


def live_rows(sessions: Iterable[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """Live sessions, one row per (agent, session id): the one following a transcript first
    (a hook can register a session before its transcript exists)."""
    rows = sorted(
        (r for r in sessions if r.get("ended_at") is None),
        key=lambda r: r.get("transcript_path") is None,
    )
    seen: set[tuple[str, str]] = set()
    out = []
    for row in rows:
        key = (str(row.get("agent")), str(row.get("session_id")))
        if key not in seen:
            seen.add(key)
            out.append(row)
    return out


def _gauge_values(row: Mapping[str, Any]) -> dict[str, float | None]:
    tokens, window = row.get("tokens"), row.get("window")
    if not isinstance(tokens, int):  # not measured yet: only its severity (ok)
        return {"ctxd_severity": SEVERITY.get(str(row.get("severity")), 0)}
    size = window if isinstance(window, int) and window > 0 else None
    return {
        "ctxd_context_tokens": tokens,
        "ctxd_context_window_tokens": size,
        "ctxd_context_used_ratio": None if size is None else tokens / size,
        "ctxd_tokens_to_compaction": row.get("tokens_to_compaction"),
        "ctxd_severity": SEVERITY.get(str(row.get("severity")), 0),
        "ctxd_idle_compaction_timestamp_seconds": row.get("idle_compaction_at"),
    }


def render(status: Mapping[str, Any], extra: Mapping[str, Mapping[str, int]] | None = None) -> str:
    """The Prometheus text for a `status` document. `extra` adds transport counters kept
    outside the status document: {"refused": {transport: n}, "errors": {transport: n}}."""
    extra = extra or {}
    lines: list[str] = []
    rows = live_rows(status.get("sessions") or ())
    values = [
        (
            _labels(
                (
                    ("agent", r.get("agent")),
                    ("model", r.get("model")),
                    ("session", r.get("session_id")),
                )
            ),
            _gauge_values(r),
        )
        for r in rows
    ]
    for name, text in _GAUGES:
        lines += [f"# HELP {name} {text}", f"# TYPE {name} gauge"]
        for labels, found in values:
            value = found.get(name)
            if value is not None:
                lines.append(f"{name}{labels} {_number(value)}")
    name, text = _LIMIT
    lines += [f"# HELP {name} {text}", f"# TYPE {name} gauge"]
    for r, (labels, _found) in zip(rows, values, strict=True):
        limit, value = r.get("limit_passed"), r.get("limit_value")
        if isinstance(limit, str) and isinstance(value, int | float):
            lines.append(f'{name}{labels[:-1]},limit="{_escape(limit)}"}} {_number(value)}')
    counters = status.get("counters") or {}
    for key, (name, text, label_names) in _COUNTERS.items():
        lines += [f"# HELP {name} {text}", f"# TYPE {name} counter"]
        for entry in counters.get(key, ()):
            *label_values, count = entry
            lines.append(f"{name}{_labels(zip(label_names, label_values, strict=True))} {count}")
    daemon = status.get("daemon") or {}
    refused = {"socket": daemon.get("refused", 0), **extra.get("refused", {})}
    errors = dict(extra.get("errors", {}))
    lines += [
        "# HELP ctxd_requests_refused_total Requests refused (not the owner, malformed, busy).",
        "# TYPE ctxd_requests_refused_total counter",
    ]
    lines += [f'ctxd_requests_refused_total{{transport="{t}"}} {n}' for t, n in refused.items()]
    lines += [
        "# HELP ctxd_errors_total Requests that failed inside the daemon.",
        "# TYPE ctxd_errors_total counter",
    ]
    lines += [f'ctxd_errors_total{{transport="{t}"}} {n}' for t, n in errors.items()]
    lines += [
        "# HELP ctxd_sessions Sessions tracked, live and recently ended.",
        "# TYPE ctxd_sessions gauge",
        f"ctxd_sessions {len(status.get('sessions') or ())}",
    ]
    lines += _watching(daemon.get("watching"))
    return "\n".join(lines) + "\n"


def _watching(watching: object) -> list[str]:
    """The agents' folders the kernel watches and those polled instead (past the inotify
    limit): an alert on the second is how a user learns that figures now lag by seconds."""
    if not isinstance(watching, Mapping):
        return []
    lines: list[str] = []
    for key, name, text in (
        ("watched", "ctxd_watched_folders", "Agents' folders watched through inotify."),
        ("unwatched", "ctxd_unwatched_folders", "Agents' folders polled: past the inotify limit."),
    ):
        value = watching.get(key)
        if isinstance(value, int) and not isinstance(value, bool):
            lines += [f"# HELP {name} {text}", f"# TYPE {name} gauge", f"{name} {value}"]
    return lines


#: Upper bounds of the request duration histogram, in seconds.
BUCKETS = (0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.1, 0.5, 1.0, 5.0)


class Histogram:
    """A Prometheus histogram of durations: a count per bucket, the sum, the count."""

    def __init__(self, buckets: tuple[float, ...] = BUCKETS) -> None:
        self.buckets = buckets
        self.counts = [0] * len(buckets)
        self.total = 0.0
        self.count = 0

    def observe(self, seconds: float) -> None:
        self.total += seconds
        self.count += 1
        for i, bound in enumerate(self.buckets):
            if seconds <= bound:
                self.counts[i] += 1
                break

    def render(self, name: str, text: str) -> str:
        lines = [f"# HELP {name} {text}", f"# TYPE {name} histogram"]
        cumulative = 0
        for bound, count in zip(self.buckets, self.counts, strict=True):
            cumulative += count
            lines.append(f'{name}_bucket{{le="{bound!r}"}} {cumulative}')
        lines += [
            f'{name}_bucket{{le="+Inf"}} {self.count}',
            f"{name}_sum {self.total!r}",
            f"{name}_count {self.count}",
        ]
        return "\n".join(lines) + "\n"
