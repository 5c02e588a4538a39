"""Whether and where ctxd exports OTLP metrics: the `[otlp]` table over the standard `OTEL_*`
variables, as the agents read them (Claude Code, Codex CLI and Copilot CLI export their own
telemetry the same way, so one collector gets both).

A pure function of the environment handed down by the CLI (never `os.environ`) and the table:

- off when `[otlp] enabled = false`, `OTEL_SDK_DISABLED=true`, `OTEL_METRICS_EXPORTER` names
  no `otlp`, or no endpoint is set anywhere;
- the endpoint: `[otlp] endpoint`, else `OTEL_EXPORTER_OTLP_METRICS_ENDPOINT` as it is, else
  `OTEL_EXPORTER_OTLP_ENDPOINT` + `/v1/metrics` (the specification's rule);
- headers: `OTEL_EXPORTER_OTLP_HEADERS`, then `..._METRICS_HEADERS`, then `[otlp.headers]`,
  each over the one before (`key=value,...`, percent-decoded);
- the interval: `[otlp] interval_seconds`, else `OTEL_METRIC_EXPORT_INTERVAL` (ms), else 60 s;
  one export's bound: `[otlp] timeout_seconds`, else `OTEL_EXPORTER_OTLP_METRICS_TIMEOUT` or
  `OTEL_EXPORTER_OTLP_TIMEOUT` (ms), else DEFAULT_TIMEOUT, never more than the interval;
- the resource: host and user, then `OTEL_RESOURCE_ATTRIBUTES`, then
  `[otlp.resource_attributes]`; `service.name` is `ctxd` unless the table says otherwise (a
  daemon started by an agent's hook inherits that agent's variables, whose service is not ctxd).

ctxd sends http/protobuf only: another `OTEL_EXPORTER_OTLP_PROTOCOL` is reported in `notes`
(logged), and the export goes on over HTTP.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from urllib.parse import unquote

from ctxd.daemon.config import OtlpTable

__all__ = ["DEFAULT_INTERVAL", "DEFAULT_TIMEOUT", "MIN_INTERVAL", "OtlpSettings", "resolve"]

DEFAULT_INTERVAL = 60.0
DEFAULT_TIMEOUT = 10.0
#: The shortest interval the variable may ask for (tests use a fraction of a second).
MIN_INTERVAL = 0.05
METRICS_PATH = "/v1/metrics"


@dataclass(frozen=True, slots=True)
class OtlpSettings:
    """What the exporter needs; `notes` are one-line warnings for the log."""

    endpoint: str
    headers: tuple[tuple[str, str], ...]
    interval_s: float
    timeout_s: float
    resource: tuple[tuple[str, str], ...]
    include_cwd: bool
    notes: tuple[str, ...] = field(default=())


def _pairs(text: str, name: str, notes: list[str]) -> dict[str, str]:
    """`key=value,key=value` (W3C baggage-like, percent-encoded), as the OTel variables are."""
    found: dict[str, str] = {}
    for item in text.split(","):
        if not item.strip():
            continue
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            notes.append(f"{name}: ignored {item.strip()!r} (not key=value)")
            continue
        found[unquote(key.strip())] = unquote(value.strip())
    return found


def _millis(env: Mapping[str, str], name: str, notes: list[str]) -> float | None:
    text = env.get(name, "").strip()
    if not text:
        return None
    try:
        value = float(text) / 1000
    except ValueError:
        value = -1.0
    if value <= 0:
        notes.append(f"{name}={text!r} is not a positive number of milliseconds: ignored")
        return None
    return value


def _endpoint(env: Mapping[str, str], table: OtlpTable) -> str | None:
    if table.endpoint:
        return table.endpoint
    if own := env.get("OTEL_EXPORTER_OTLP_METRICS_ENDPOINT", "").strip():
        return own
    if base := env.get("OTEL_EXPORTER_OTLP_ENDPOINT", "").strip():
        return base.rstrip("/") + METRICS_PATH
    return None


def off_reason(env: Mapping[str, str], table: OtlpTable) -> str | None:
    """Why the export is off, or None when it is on."""
    if table.enabled is False:
        return "[otlp] enabled = false"
    if env.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return "OTEL_SDK_DISABLED=true"
    exporters = env.get("OTEL_METRICS_EXPORTER", "").strip().lower()
    if exporters and "otlp" not in {e.strip() for e in exporters.split(",")}:
        return f"OTEL_METRICS_EXPORTER={exporters}"
    if _endpoint(env, table) is None:
        return "no endpoint: neither [otlp] endpoint nor OTEL_EXPORTER_OTLP_(METRICS_)ENDPOINT"
    return None


def resolve(
    env: Mapping[str, str], table: OtlpTable, identity: Mapping[str, str]
) -> OtlpSettings | str:
    """The settings, or why there is no export (a line for the log). `identity`: the resource
    attributes the daemon knows of itself (host.name, user.name, user.id, service.version)."""
    reason = off_reason(env, table)
    endpoint = _endpoint(env, table)
    if reason is not None or endpoint is None:
        return reason or "no endpoint"
    if not endpoint.startswith(("http://", "https://")):
        return f"the OTLP endpoint {endpoint!r} is not an http:// or https:// URL"
    notes: list[str] = []
    protocol = (
        env.get("OTEL_EXPORTER_OTLP_METRICS_PROTOCOL") or env.get("OTEL_EXPORTER_OTLP_PROTOCOL", "")
    ).strip()
    if protocol and protocol != "http/protobuf":
        notes.append(f"OTLP protocol {protocol!r} asked for; ctxd sends http/protobuf")
    headers = _pairs(env.get("OTEL_EXPORTER_OTLP_HEADERS", ""), "OTEL_EXPORTER_OTLP_HEADERS", notes)
    metrics_headers = env.get("OTEL_EXPORTER_OTLP_METRICS_HEADERS", "")
    headers |= _pairs(metrics_headers, "OTEL_EXPORTER_OTLP_METRICS_HEADERS", notes)
    headers |= table.headers
    interval = table.interval_seconds or _millis(env, "OTEL_METRIC_EXPORT_INTERVAL", notes)
    interval = max(MIN_INTERVAL, interval or DEFAULT_INTERVAL)
    timeout = (
        table.timeout_seconds
        or _millis(env, "OTEL_EXPORTER_OTLP_METRICS_TIMEOUT", notes)
        or _millis(env, "OTEL_EXPORTER_OTLP_TIMEOUT", notes)
        or DEFAULT_TIMEOUT
    )
    resource = {**identity}
    resource |= _pairs(env.get("OTEL_RESOURCE_ATTRIBUTES", ""), "OTEL_RESOURCE_ATTRIBUTES", notes)
    resource["service.name"] = "ctxd"
    resource |= table.resource_attributes
    return OtlpSettings(
        endpoint=endpoint,
        headers=tuple(sorted(headers.items())),
        interval_s=interval,
        # An export that outlives the interval would make the next one wait: bounded by it.
        timeout_s=min(timeout, interval),
        resource=tuple(sorted(resource.items())),
        include_cwd=table.include_cwd,
        notes=tuple(notes),
    )
