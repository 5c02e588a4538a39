"""OTLP metrics export on a real daemon: the points a collector receives are the figures of
`ctxd status --json`, with `session.id`; a collector that refuses or never answers costs the
hooks nothing and the daemon's memory stays flat.

The collector is the test's own: an HTTP server on a free loopback port decoding each
`ExportMetricsServiceRequest` with opentelemetry-proto (what an OTel Collector does first).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shlex
import socket
import statistics
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from opentelemetry.proto.collector.metrics.v1 import metrics_service_pb2 as service

if TYPE_CHECKING:
    from conftest import World

INTERVAL_MS = 200


def _value(v: Any) -> Any:
    kind = v.WhichOneof("value")
    return getattr(v, kind) if kind else None


class Receiver:
    """An OTLP/HTTP metrics endpoint: every point received, flattened."""

    def __init__(self) -> None:
        self.requests: list[service.ExportMetricsServiceRequest] = []
        self.lock = threading.Lock()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers["Content-Length"]))
                request = service.ExportMetricsServiceRequest()
                request.ParseFromString(body)
                with receiver.lock:
                    receiver.requests.append(request)
                    receiver.headers = dict(self.headers)
                answer = service.ExportMetricsServiceResponse().SerializeToString()
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", str(len(answer)))
                self.end_headers()
                self.wfile.write(answer)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.headers: dict[str, str] = {}
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    def last(self) -> tuple[dict[str, Any], dict[str, list[tuple[dict[str, Any], Any]]]]:
        """The last request's resource attributes and its points by metric name."""
        with self.lock:
            request = self.requests[-1]
        resource: dict[str, Any] = {}
        points: dict[str, list[tuple[dict[str, Any], Any]]] = {}
        for rm in request.resource_metrics:
            resource |= {a.key: _value(a.value) for a in rm.resource.attributes}
            for sm in rm.scope_metrics:
                for metric in sm.metrics:
                    data = getattr(metric, metric.WhichOneof("data"))
                    for p in data.data_points:
                        attributes = {a.key: _value(a.value) for a in p.attributes}
                        value = p.as_int if p.WhichOneof("value") == "as_int" else p.as_double
                        points.setdefault(metric.name, []).append((attributes, value))
        return resource, points


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    r = Receiver()
    try:
        yield r
    finally:
        r.close()


def _export_to(world: World, url: str, **env: str) -> None:
    world.env.update(
        OTEL_EXPORTER_OTLP_ENDPOINT=url,
        OTEL_METRIC_EXPORT_INTERVAL=str(INTERVAL_MS),
        OTEL_EXPORTER_OTLP_TIMEOUT="300",
        **env,
    )


def readme_variables() -> dict[str, str]:
    """The variables the README's OTLP recipe sets on its `ctxd serve` line."""
    readme = (Path(__file__).parents[2] / "README.md").read_text()
    section = readme.split("\n### OpenTelemetry (OTLP) to a collector", 1)[1].split("\n## ", 1)[0]
    block = re.search(r"```sh\n(.*?)```", section, re.S)
    assert block is not None, "no sh block in the README's OTLP recipe"
    assert ".venv/bin/pip install '.[otel]'" in block.group(1)
    (line,) = (line for line in block.group(1).splitlines() if "ctxd serve" in line)
    words = shlex.split(line)
    return dict(word.split("=", 1) for word in words[: words.index(".venv/bin/ctxd")])


def _by_session(points: list[tuple[dict[str, Any], Any]]) -> dict[str, Any]:
    return {attributes["session.id"]: value for attributes, value in points}


def test_a_sessions_points_arrive_with_the_figures_of_status(
    world: World, receiver: Receiver
) -> None:
    # The README's command, with the collector's address ours.
    variables = readme_variables()
    assert "OTEL_EXPORTER_OTLP_ENDPOINT" in variables
    variables.pop("OTEL_EXPORTER_OTLP_ENDPOINT")
    attributes = variables.pop("OTEL_RESOURCE_ATTRIBUTES")
    _export_to(
        world,
        f"http://127.0.0.1:{receiver.port}",
        OTEL_RESOURCE_ATTRIBUTES=f"{attributes},deployment.environment=dev%20box",
        OTEL_EXPORTER_OTLP_HEADERS="authorization=Bearer%20s3cret",
        **variables,
    )
    world.start()
    sessions = [world.claude() for _ in range(2)]
    for t, tokens in zip(sessions, (300_000, 760_000), strict=True):
        t.assistant(tokens)
        world.hook_out("claude", t.payload("PostToolUse"))
    ids = {t.session_id for t in sessions}

    def arrived() -> tuple[dict[str, Any], dict[str, list[tuple[dict[str, Any], Any]]]] | None:
        if not receiver.requests:
            return None
        resource, points = receiver.last()
        have = set(_by_session(points.get("ctxd.context.tokens", [])))
        warned = points.get("ctxd.warnings", [])
        return (resource, points) if have == ids and warned else None

    resource, points = world.wait_for(arrived, 10, "both sessions' points")
    doc = json.loads(world.cli("status", "--json").stdout)
    rows = {r["session_id"]: r for r in doc["sessions"] if r["ended_at"] is None}
    assert set(rows) == ids

    def figures(key: str) -> dict[str, Any]:
        return {k: r[key] for k, r in rows.items()}

    assert _by_session(points["ctxd.context.tokens"]) == figures("tokens")
    assert _by_session(points["ctxd.context.window"]) == figures("window")
    assert _by_session(points["ctxd.context.compaction_point"]) == figures("compaction_at")
    to_compaction = _by_session(points["ctxd.context.tokens_to_compaction"])
    assert to_compaction == figures("tokens_to_compaction")
    assert _by_session(points["ctxd.context.used_ratio"]) == {
        k: r["tokens"] / r["window"] for k, r in rows.items()
    }
    levels = {"ok": 0, "warning": 1, "critical": 2}
    severity = points["ctxd.context.severity"]
    assert _by_session(severity) == {k: levels[r["severity"]] for k, r in rows.items()}
    assert {a["session.id"]: a["ctxd.severity"] for a, _ in severity} == figures("severity")
    assert _by_session(points["ctxd.session.compactions"]) == figures("compactions")
    for found, _ in points["ctxd.context.tokens"]:
        row = rows[found["session.id"]]
        assert found == {"session.id": row["session_id"], "agent": "claude", "model": row["model"]}
    # The daemon's counters, as the document has them.
    warnings = {(a["agent"], a["severity"]): n for a, n in points["ctxd.warnings"]}
    assert warnings == {(agent, level): n for agent, level, n in doc["counters"]["warnings"]}
    assert resource["service.name"] == "ctxd"
    assert resource["host.name"] == socket.gethostname()
    assert resource["user.id"] == str(os.getuid())
    assert resource["team.id"] == "blue" and resource["deployment.environment"] == "dev box"
    assert receiver.headers.get("authorization") == "Bearer s3cret"
    assert "cwd" not in {k for a, _ in points["ctxd.context.tokens"] for k in a}


def test_the_working_directory_only_when_asked(world: World, receiver: Receiver) -> None:
    world.write_config(
        f'[otlp]\nendpoint = "http://127.0.0.1:{receiver.port}/v1/metrics"\n'
        "interval_seconds = 1\ninclude_cwd = true\n"
    )
    world.start()
    t = world.claude()
    t.assistant(200_000)
    world.hook_out("claude", t.payload("PostToolUse"))

    def cwd() -> Any:
        if not receiver.requests:
            return None
        points = receiver.last()[1].get("ctxd.context.tokens", [])
        return next((a.get("cwd") for a, _ in points if a["session.id"] == t.session_id), None)

    assert world.wait_for(cwd, 10, "the session's point") == str(t.cwd)


@contextlib.contextmanager
def _refusing_port() -> Iterator[int]:
    """A loopback port of ours that refuses connections: bound, never listening."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        yield int(s.getsockname()[1])


@contextlib.contextmanager
def _silent_port() -> Iterator[int]:
    """A loopback port of ours that accepts connections (the kernel's backlog) and never
    answers."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen(64)
        yield int(s.getsockname()[1])


def _rss_kb(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise AssertionError("no VmRSS")


def _hook_seconds(world: World, payloads: list[dict[str, Any]]) -> list[float]:
    took = []
    for payload in payloads:
        start = time.perf_counter()
        world.hook_out("claude", payload)
        took.append(time.perf_counter() - start)
    return took


@pytest.mark.parametrize("collector", [_refusing_port, _silent_port], ids=["refusing", "silent"])
def test_a_collector_down_delays_no_hook_and_grows_no_memory(world: World, collector: Any) -> None:
    with collector() as port:
        _export_to(world, f"http://127.0.0.1:{port}")
        proc = world.start()
        t = world.claude()
        t.assistant(300_000)
        payloads = [t.payload("PostToolUse") for _ in range(10)]
        took = _hook_seconds(world, payloads)  # and the SDK is imported, the session exists
        world.wait_for(lambda: "Failed to export" in world.log(), 5, "an export to fail")
        time.sleep(20 * INTERVAL_MS / 1000)
        before = _rss_kb(proc.pid)
        # 40 export intervals, each failing (refused) or waiting out its timeout (silent).
        time.sleep(40 * INTERVAL_MS / 1000)
        after = _rss_kb(proc.pid)
        took += _hook_seconds(world, payloads * 3)
        # Nor does it hold the daemon's exit (an export under way is not waited for).
        stopping = time.monotonic()
        assert world.stop() == 0
        stopped = time.monotonic() - stopping
    # A hook is a process start and one round trip (~tens of ms); hooks that waited on the
    # exports would show the export's timeout (one interval: 200 ms) in most of them.
    assert statistics.median(took) < 0.1, took
    assert statistics.quantiles(took, n=10)[-1] < 0.2, took
    assert after - before < 1024, (before, after)
    assert stopped < 2.5, stopped


def test_without_the_sdk_the_daemon_says_how_to_get_it_and_serves_on(
    world: World, receiver: Receiver, tmp_path: Path
) -> None:
    # An install without the `otel` extra: `opentelemetry` cannot be imported.
    (tmp_path / "no-otel" / "opentelemetry").mkdir(parents=True)
    (tmp_path / "no-otel" / "opentelemetry" / "__init__.py").write_text(
        "raise ImportError('No module named opentelemetry')\n"
    )
    world.env["PYTHONPATH"] = str(tmp_path / "no-otel")
    _export_to(world, f"http://127.0.0.1:{receiver.port}")
    world.start()
    world.wait_for(lambda: "pip install 'ctxd[otel]'" in world.log(), 5, "the hint")
    t = world.claude()
    t.assistant(200_000)
    world.hook_out("claude", t.payload("PostToolUse"))
    assert world.wait_row(t)["tokens"] == 200_000
    assert not receiver.requests
