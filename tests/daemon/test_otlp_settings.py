"""Whether and where the OTLP export goes: the standard OTEL_* variables as the agents read
them, the `[otlp]` table over them, and off when neither asks (a truth table, in process)."""

from __future__ import annotations

import pytest

from ctxd.daemon.config import OtlpTable, parse_settings
from ctxd.daemon.outputs.otlp import snapshot
from ctxd.daemon.outputs.otlp_settings import DEFAULT_INTERVAL, OtlpSettings, resolve
from ctxd.errors import ConfigError

ME = {"host.name": "box", "user.name": "ann", "user.id": "1000"}
BASE = {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318"}


def on(env: dict[str, str], table: OtlpTable | None = None) -> OtlpSettings:
    found = resolve(env, table or OtlpTable(), ME)
    assert isinstance(found, OtlpSettings), found
    return found


@pytest.mark.parametrize(
    ("env", "table", "why"),
    [
        ({}, OtlpTable(), "no endpoint"),
        ({"OTEL_EXPORTER_OTLP_HEADERS": "a=b"}, OtlpTable(), "no endpoint"),
        (BASE, OtlpTable(enabled=False), "enabled = false"),
        ({**BASE, "OTEL_SDK_DISABLED": "true"}, OtlpTable(), "OTEL_SDK_DISABLED"),
        ({**BASE, "OTEL_METRICS_EXPORTER": "none"}, OtlpTable(), "OTEL_METRICS_EXPORTER"),
        ({**BASE, "OTEL_METRICS_EXPORTER": "prometheus"}, OtlpTable(), "OTEL_METRICS_EXPORTER"),
        ({"OTEL_EXPORTER_OTLP_ENDPOINT": "collector:4318"}, OtlpTable(), "not an http"),
    ],
)
def test_off(env: dict[str, str], table: OtlpTable, why: str) -> None:
    found = resolve(env, table, ME)
    assert isinstance(found, str) and why in found


@pytest.mark.parametrize(
    ("env", "table", "endpoint"),
    [
        (BASE, OtlpTable(), "http://collector:4318/v1/metrics"),
        (
            {"OTEL_EXPORTER_OTLP_ENDPOINT": "https://c:4318/"},
            OtlpTable(),
            "https://c:4318/v1/metrics",
        ),
        (
            {**BASE, "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT": "http://m:9/custom"},
            OtlpTable(),
            "http://m:9/custom",
        ),
        (BASE, OtlpTable(endpoint="http://t:1/v1/metrics"), "http://t:1/v1/metrics"),
        ({}, OtlpTable(endpoint="http://t:1/v1/metrics"), "http://t:1/v1/metrics"),
        ({**BASE, "OTEL_METRICS_EXPORTER": "otlp,console"}, OtlpTable(), None),
    ],
)
def test_endpoint(env: dict[str, str], table: OtlpTable, endpoint: str | None) -> None:
    assert on(env, table).endpoint == (endpoint or "http://collector:4318/v1/metrics")


def test_headers_interval_timeout_and_resource() -> None:
    env = {
        **BASE,
        "OTEL_EXPORTER_OTLP_HEADERS": "authorization=Bearer%20x, team=a,broken",
        "OTEL_EXPORTER_OTLP_METRICS_HEADERS": "team=b",
        "OTEL_METRIC_EXPORT_INTERVAL": "15000",
        "OTEL_EXPORTER_OTLP_TIMEOUT": "2500",
        "OTEL_RESOURCE_ATTRIBUTES": "team.id=blue,service.name=claude-code,host.name=alias",
    }
    found = on(env)
    assert dict(found.headers) == {"authorization": "Bearer x", "team": "b"}
    assert found.interval_s == 15.0 and found.timeout_s == 2.5
    resource = dict(found.resource)
    # An agent's service.name inherited through a hook's environment is not ctxd's.
    assert resource["service.name"] == "ctxd"
    assert resource["team.id"] == "blue" and resource["host.name"] == "alias"
    assert resource["user.id"] == "1000"
    assert any("broken" in note for note in found.notes)
    assert not found.include_cwd


def test_the_table_wins_key_by_key() -> None:
    env = {**BASE, "OTEL_METRIC_EXPORT_INTERVAL": "15000", "OTEL_EXPORTER_OTLP_HEADERS": "a=1"}
    table = OtlpTable(
        interval_seconds=30,
        timeout_seconds=45,
        include_cwd=True,
        headers={"a": "2"},
        resource_attributes={"service.name": "ctxd-laptop"},
    )
    found = on(env, table)
    assert found.interval_s == 30 and dict(found.headers) == {"a": "2"}
    assert found.timeout_s == 30  # never longer than the interval
    assert found.include_cwd and dict(found.resource)["service.name"] == "ctxd-laptop"


def test_defaults_and_bad_variables() -> None:
    found = on(
        {**BASE, "OTEL_METRIC_EXPORT_INTERVAL": "soon", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}
    )
    assert found.interval_s == DEFAULT_INTERVAL
    assert any("OTEL_METRIC_EXPORT_INTERVAL" in n for n in found.notes)
    assert any("grpc" in n for n in found.notes)


def test_the_otlp_table_is_checked_with_the_config() -> None:
    parse_settings('[otlp]\nendpoint = "http://c:4318/v1/metrics"\n[otlp.headers]\na = "b"\n')
    for bad, says in [
        ("[otlp]\nendpont = 'x'\n", "unknown key 'endpont'"),
        ("[otlp]\nendpoint = 'c:4318'\n", "otlp.endpoint"),
        ("[otlp]\ninclude_cwd = 'yes'\n", "otlp.include_cwd"),
        ("[otlp]\ninterval_seconds = 0\n", "otlp.interval_seconds"),
        ("[otlp.headers]\na = 1\n", "[otlp.headers]"),
    ]:
        with pytest.raises(ConfigError, match=says.replace("[", r"\[").replace(".", r"\.")):
            parse_settings(bad)


def test_a_snapshot_holds_live_sessions_only_and_the_figures_they_have() -> None:
    row = {
        "session_id": "s1",
        "agent": "claude",
        "model": "m",
        "cwd": "/w",
        "tokens": 500,
        "window": 1000,
        "compaction_at": 900,
        "tokens_to_compaction": 400,
        "severity": "warning",
        "idle_compaction_at": None,
        "compactions": 2,
        "ended_at": None,
        "transcript_path": "/t",
    }
    unmeasured = {**row, "session_id": "s2", "tokens": None, "severity": "ok"}
    ended = {**row, "session_id": "s3", "ended_at": 5.0}
    doc = {"sessions": [row, unmeasured, ended], "counters": {"handoffs": [["claude", 3]]}}
    snap = snapshot(doc, include_cwd=False)
    assert [dict(s.attributes)["session.id"] for s in snap.sessions] == ["s1", "s2"]
    first, second = snap.sessions
    assert dict(first.attributes) == {"session.id": "s1", "agent": "claude", "model": "m"}
    assert dict(first.gauges) == {
        "ctxd.context.tokens": 500,
        "ctxd.context.window": 1000,
        "ctxd.context.compaction_point": 900,
        "ctxd.context.tokens_to_compaction": 400,
        "ctxd.context.used_ratio": 0.5,
        "ctxd.context.severity": 1,
    }
    assert dict(second.gauges) == {"ctxd.context.severity": 0}
    assert snap.counters == (("ctxd.handoffs", (("agent", "claude"),), 3),)
    assert dict(snapshot(doc, include_cwd=True).sessions[0].attributes)["cwd"] == "/w"
