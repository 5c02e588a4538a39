"""ctxd's figures as OpenTelemetry metrics, pushed over OTLP/HTTP to a collector.

Fed by the status document (what `ctxd status --json` prints), never by sessions: per live
session (`metrics.live_rows`: not ended, one row per agent and session id), observable gauges
of its context (GAUGES) and a counter of its compactions, with the attributes that join the
agents' own telemetry: `session.id` (the id as the agent writes it, as Claude Code does on its
own points), `agent`, `model`, and `cwd` only when `[otlp] include_cwd = true`. The document's
daemon-wide counters (COUNTERS: warnings given, handoffs asked, compactions seen since the
daemon started, by agent) are exported as they are; the rows carry no per-session count of
warnings or handoffs (only the last warning level, `warned`, and `handoff_asked`).

Off the event loop, bounded: every REFRESH seconds at most (or the interval, if shorter) the
loop has the document put together in slices, a worker thread decodes it into an immutable
`Snapshot`, and the loop hands that over by replacing one reference (a queue of one: the
newest wins, nothing piles up). The SDK's PeriodicExportingMetricReader thread reads that
reference in its callbacks and exports, one request at a time, each bounded by the timeout
(retries included). A collector that is down, refuses or never answers costs that thread its
timeout and a log line per interval; hooks never wait on it and nothing accumulates. The SDK's
own storage holds one point per attribute set it saw, capped by its cardinality limit (2,000
per instrument). Stopping does not wait for an export under way (STOP_WAIT at most).

The SDK is the `ctxd[otel]` extra, imported (in a worker thread) only when the export is on.
"""

from __future__ import annotations

import gc
import logging
import os
import pwd
import socket
import threading
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio
import anyio.to_thread
import orjson

from ctxd import __version__
from ctxd.daemon.config import load_otlp_table
from ctxd.daemon.metrics import SEVERITY, live_rows
from ctxd.daemon.outputs.otlp_settings import OtlpSettings, resolve
from ctxd.errors import ConfigError

if TYPE_CHECKING:
    from opentelemetry.metrics import CallbackOptions, Observation
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import MetricExporter, MetricsData

__all__ = ["COUNTERS", "GAUGES", "REFRESH", "OtlpExport", "Snapshot", "run", "snapshot"]

logger = logging.getLogger(__name__)

#: Seconds between two snapshots handed to the exporter (or the export interval, if shorter).
REFRESH = 5.0
#: Seconds `stop` waits for the SDK to shut down (a last export to a hung collector is dropped).
STOP_WAIT = 1.0
INSTALL_HINT = "pip install 'ctxd[otel]'"

#: instrument name, unit, description; the value is `_gauge_values`'s of the same name.
GAUGES = (
    ("ctxd.context.tokens", "{token}", "Tokens in the session's context now."),
    ("ctxd.context.window", "{token}", "The session's context window."),
    ("ctxd.context.compaction_point", "{token}", "Where the agent compacts the context."),
    ("ctxd.context.tokens_to_compaction", "{token}", "Tokens left before the agent compacts."),
    ("ctxd.context.used_ratio", "1", "Context tokens over the window (0 to 1)."),
    (
        "ctxd.context.severity",
        "1",
        "ctxd's judgement: 0 ok, 1 warning, 2 critical (the label in ctxd.severity).",
    ),
    (
        "ctxd.context.idle_compaction_time",
        "s",
        "When the agent compacts the session if it stays idle (Unix time).",
    ),
)
SESSION_COMPACTIONS = ("ctxd.session.compactions", "{compaction}", "Compactions of the session.")
#: counter in the status document -> instrument name, unit, description, attribute names.
COUNTERS = {
    "warnings": ("ctxd.warnings", "{warning}", "Context warnings given.", ("agent", "severity")),
    "handoffs": ("ctxd.handoffs", "{handoff}", "Handoffs asked for.", ("agent",)),
    "compactions": ("ctxd.compactions", "{compaction}", "Compactions seen.", ("agent",)),
}

Attributes = tuple[tuple[str, str], ...]


@dataclass(frozen=True, slots=True)
class SessionFigures:
    """One live session's points: its attributes, its gauges' values (those it has)."""

    attributes: Attributes
    gauges: tuple[tuple[str, float], ...]
    severity: str
    compactions: int


@dataclass(frozen=True, slots=True)
class Snapshot:
    """What one collection exports; immutable, so the exporter's thread may read it."""

    sessions: tuple[SessionFigures, ...] = ()
    #: (instrument name, attributes, count)
    counters: tuple[tuple[str, Attributes, int], ...] = ()


def _number(value: object) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return value


def _gauge_values(row: Mapping[str, Any]) -> dict[str, float | None]:
    severity = str(row.get("severity"))
    tokens, window = _number(row.get("tokens")), _number(row.get("window"))
    if tokens is None:  # not measured yet: only its severity (ok)
        return {"ctxd.context.severity": SEVERITY.get(severity, 0)}
    size = window if window is not None and window > 0 else None
    return {
        "ctxd.context.tokens": tokens,
        "ctxd.context.window": size,
        "ctxd.context.compaction_point": _number(row.get("compaction_at")),
        "ctxd.context.tokens_to_compaction": _number(row.get("tokens_to_compaction")),
        "ctxd.context.used_ratio": None if size is None else tokens / size,
        "ctxd.context.severity": SEVERITY.get(severity, 0),
        "ctxd.context.idle_compaction_time": _number(row.get("idle_compaction_at")),
    }


def _session(row: Mapping[str, Any], include_cwd: bool) -> SessionFigures:
    attributes = [("session.id", str(row.get("session_id"))), ("agent", str(row.get("agent")))]
    if row.get("model"):
        attributes.append(("model", str(row["model"])))
    if include_cwd and row.get("cwd"):
        attributes.append(("cwd", str(row["cwd"])))
    values = _gauge_values(row)
    compactions = _number(row.get("compactions"))
    return SessionFigures(
        attributes=tuple(attributes),
        gauges=tuple((name, value) for name, value in values.items() if value is not None),
        severity=str(row.get("severity")),
        compactions=int(compactions or 0),
    )


def snapshot(document: Mapping[str, Any], include_cwd: bool = False) -> Snapshot:
    """The points of a status document (pure)."""
    rows = live_rows(document.get("sessions") or ())
    sessions = tuple(_session(row, include_cwd) for row in rows)
    counters: list[tuple[str, Attributes, int]] = []
    found = document.get("counters") or {}
    for key, (name, _unit, _text, label_names) in COUNTERS.items():
        for entry in found.get(key, ()):
            *labels, count = entry
            if len(labels) == len(label_names) and _number(count) is not None:
                pairs = tuple(zip(label_names, map(str, labels), strict=True))
                counters.append((name, pairs, int(count)))
    return Snapshot(sessions, tuple(counters))


class OtlpExport:
    """The SDK's meter provider and reader thread, reading the latest `Snapshot`."""

    def __init__(self, settings: OtlpSettings) -> None:
        self.settings = settings
        self._latest = Snapshot()
        self._provider: MeterProvider | None = None

    def publish(self, latest: Snapshot) -> None:
        """Hand the exporter's thread a new snapshot (one reference replaced: atomic)."""
        self._latest = latest

    def start(self) -> None:
        """Import the SDK and start its reader thread (blocking: run in a worker thread).
        ImportError when the `otel` extra is not installed."""
        from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter
        from opentelemetry.sdk.metrics import MeterProvider
        from opentelemetry.sdk.metrics.export import PeriodicExportingMetricReader
        from opentelemetry.sdk.resources import Resource

        s = self.settings
        exporter = OTLPMetricExporter(
            endpoint=s.endpoint, headers=dict(s.headers), timeout=s.timeout_s
        )
        reader = PeriodicExportingMetricReader(
            _collecting_failures(exporter),
            export_interval_millis=s.interval_s * 1000,
            export_timeout_millis=s.timeout_s * 1000,
        )
        # Resource(...) as given: Resource.create would read OTEL_RESOURCE_ATTRIBUTES itself.
        provider = MeterProvider(
            metric_readers=[reader], resource=Resource(dict(s.resource)), shutdown_on_exit=False
        )
        meter = provider.get_meter("ctxd", __version__)
        for name, unit, text in GAUGES:
            meter.create_observable_gauge(name, [self._gauge(name)], unit, text)
        name, unit, text = SESSION_COMPACTIONS
        meter.create_observable_counter(name, [self._session_compactions], unit, text)
        for name, unit, text, _labels in COUNTERS.values():
            meter.create_observable_counter(name, [self._counter(name)], unit, text)
        self._provider = provider

    def _gauge(self, name: str) -> Callable[[CallbackOptions], Iterable[Observation]]:
        from opentelemetry.metrics import Observation

        def observe(options: CallbackOptions) -> Iterable[Observation]:
            found = []
            for session in self._latest.sessions:
                attributes = dict(session.attributes)
                if name == "ctxd.context.severity":
                    attributes["ctxd.severity"] = session.severity
                found += [Observation(v, attributes) for n, v in session.gauges if n == name]
            return found

        return observe

    def _session_compactions(self, options: CallbackOptions) -> Iterable[Observation]:
        from opentelemetry.metrics import Observation

        return [Observation(s.compactions, dict(s.attributes)) for s in self._latest.sessions]

    def _counter(self, name: str) -> Callable[[CallbackOptions], Iterable[Observation]]:
        from opentelemetry.metrics import Observation

        def observe(options: CallbackOptions) -> Iterable[Observation]:
            counters = self._latest.counters
            return [Observation(n, dict(pairs)) for found, pairs, n in counters if found == name]

        return observe

    def stop(self) -> None:
        """Shut the SDK down in a thread of its own, waited for STOP_WAIT at most: its last
        export to a collector that never answers must not hold the daemon's exit."""
        provider, self._provider = self._provider, None
        if provider is None:
            return
        timeout_ms = self.settings.timeout_s * 1000
        thread = threading.Thread(
            target=provider.shutdown, args=(timeout_ms,), name="ctxd-otlp-stop", daemon=True
        )
        thread.start()
        thread.join(STOP_WAIT)


def _collecting_failures(exporter: MetricExporter) -> MetricExporter:
    """`exporter`, followed by a collection of the youngest objects after each failed export.

    A failed export leaves cycles behind (the error, its traceback, their frames; ~36 KB). The
    daemon collects rarely (lifecycle's gc thresholds), so a collector that stays down would
    pile them up by the megabyte between collections; collected at once, they never do."""
    from opentelemetry.sdk.metrics.export import MetricExporter, MetricExportResult

    class Collecting(MetricExporter):
        def __init__(self) -> None:
            super().__init__(exporter._preferred_temporality, exporter._preferred_aggregation)

        def export(
            self, metrics_data: MetricsData, timeout_millis: float = 10_000, **kwargs: Any
        ) -> MetricExportResult:
            result = exporter.export(metrics_data, timeout_millis, **kwargs)
            if result is not MetricExportResult.SUCCESS:
                gc.collect(0)
            return result

        def force_flush(self, timeout_millis: float = 10_000) -> bool:
            return exporter.force_flush(timeout_millis)

        def shutdown(self, timeout_millis: float = 30_000, **kwargs: Any) -> None:
            exporter.shutdown(timeout_millis, **kwargs)

    return Collecting()


def identity() -> dict[str, str]:
    """The resource attributes the daemon knows of itself: host and user."""
    uid = os.getuid()
    try:
        user = pwd.getpwuid(uid).pw_name
    except KeyError:  # a uid without a passwd entry (containers)
        user = str(uid)
    return {
        "host.name": socket.gethostname(),
        "user.name": user,
        "user.id": str(uid),
        "service.version": __version__,
    }


async def run(
    env: Mapping[str, str], config: Path, encoded: Callable[[], Awaitable[bytes]]
) -> None:
    """Export while the daemon runs, when the `[otlp]` table or the OTEL_* variables in `env`
    ask for it; returns at once (logged) when they do not or cannot. `encoded`: the status
    document as JSON bytes, put together in slices (`Status.encoded_in_slices`)."""
    try:
        table = await anyio.to_thread.run_sync(load_otlp_table, config, abandon_on_cancel=True)
    except ConfigError as exc:
        logger.error("OTLP export off: %s", exc)
        return
    settings = resolve(env, table, identity())
    if isinstance(settings, str):
        logger.debug("OTLP export off: %s", settings)
        return
    for note in settings.notes:
        logger.warning("%s", note)
    export = OtlpExport(settings)
    try:
        await anyio.to_thread.run_sync(export.start, abandon_on_cancel=True)
    except ImportError as exc:
        logger.error("OTLP export off: no OpenTelemetry SDK (%s): %s", exc, INSTALL_HINT)
        return
    except Exception:
        logger.exception("OTLP export off: cannot start it")
        return
    logger.info("OTLP metrics to %s every %g s", settings.endpoint, settings.interval_s)
    try:
        while True:
            try:
                # Decoded in a worker thread: 10,000 rows are megabytes of JSON.
                data = await encoded()
                export.publish(
                    await anyio.to_thread.run_sync(_snapshot_of, data, settings.include_cwd)
                )
            except Exception:  # a bad document must not end the export, nor the daemon
                logger.exception("OTLP snapshot failed")
            await anyio.sleep(min(settings.interval_s, REFRESH))
    finally:
        export.stop()


def _snapshot_of(data: bytes, include_cwd: bool) -> Snapshot:
    return snapshot(orjson.loads(data), include_cwd)
