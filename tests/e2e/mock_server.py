"""The command line shared by the model-API mocks: parse options, serve until killed.

python mock_X.py [--host H] [--port P] [--port-file F] [--log requests.jsonl]
                 [--script script.json] [--lo-up]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
import threading
import uuid
from collections.abc import Callable, Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

HandlerFactory = Callable[[dict[str, Any], str], type[BaseHTTPRequestHandler]]


def serve(name: str, default_script: Mapping[str, Any], handler_for: HandlerFactory) -> None:
    """Serve `handler_for(script, log_path)` on loopback; the port goes to --port-file."""
    ap = argparse.ArgumentParser(prog=name)
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--port-file")
    ap.add_argument("--log", default="requests.jsonl")
    ap.add_argument("--script", help="JSON file; keys override the default script")
    ap.add_argument(
        "--lo-up",
        action="store_true",
        help="first bring up lo (run inside a fresh `unshare -rn` namespace)",
    )
    a = ap.parse_args()
    if a.lo_up:
        from netns_lo import bring_loopback_up

        bring_loopback_up()
    script = dict(default_script)
    if a.script:
        with open(a.script) as f:
            script.update(json.load(f))
    srv = ThreadingHTTPServer((a.host, a.port), handler_for(script, a.log))
    srv.daemon_threads = True
    port = srv.server_address[1]
    if a.port_file:
        tmp = a.port_file + ".tmp"
        with open(tmp, "w") as f:
            f.write(str(port))
        os.replace(tmp, a.port_file)
    print(f"{name} listening on http://{a.host}:{port}", file=sys.stderr, flush=True)
    with contextlib.suppress(KeyboardInterrupt):
        srv.serve_forever()


class JsonHandler(BaseHTTPRequestHandler):
    """What the mocks' HTTP handlers share: keep-alive, no access log, a JSON body in,
    a JSON answer out. Each API names its own content type and request-id header."""

    protocol_version = "HTTP/1.1"
    content_type = "application/json"
    request_id_header: str | None = None

    def log_message(self, fmt: str, *args: Any) -> None:  # quiet
        pass

    def _read_raw(self) -> bytes:
        n = int(self.headers.get("content-length") or 0)
        return self.rfile.read(n) if n else b""

    def _read_body(self) -> tuple[bytes, Any]:
        raw = self._read_raw()
        try:
            return raw, (json.loads(raw) if raw else None)
        except Exception:
            return raw, None

    def _send_json(self, code: int, obj: Any, extra_headers: dict[str, str] | None = None) -> None:
        data = json.dumps(obj).encode()
        self.send_response(code)
        self.send_header("content-type", self.content_type)
        self.send_header("content-length", str(len(data)))
        if self.request_id_header:
            self.send_header(self.request_id_header, "req_mock_" + uuid.uuid4().hex[:16])
        for k, v in (extra_headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(data)


class ScriptedMock:
    """What the mocks share: the script, ids, scripted usage per step, the request log.

    A script's `usage` (+ `usage_step` per step index) gives each answer's usage, unless the
    step names its own `usage`; subclasses name their API's usage fields in USAGE_KEYS.
    """

    USAGE_KEYS: tuple[str, ...] = ()

    def __init__(self, script: dict[str, Any], log_path: str) -> None:
        self.script = script
        self.log_path = log_path
        self.counter = 0
        self.main_served = 0
        self.lock = threading.Lock()

    def next_id(self, prefix: str) -> str:
        with self.lock:
            self.counter += 1
            return f"{prefix}_mock{self.counter:04d}{uuid.uuid4().hex[:12]}"

    def scripted_usage(self, step_index: int, step: dict[str, Any] | None) -> dict[str, Any]:
        if step and "usage" in step:
            return dict(step["usage"])
        base = self.script.get("usage", {})
        inc = self.script.get("usage_step", {})
        return {
            k: int(base.get(k, 0)) + max(step_index, 0) * int(inc.get(k, 0))
            for k in self.USAGE_KEYS
        }

    def log(self, rec: dict[str, Any]) -> None:
        with _LOG_LOCK, open(self.log_path, "a") as f:
            f.write(json.dumps(rec) + "\n")


_LOG_LOCK = threading.Lock()
