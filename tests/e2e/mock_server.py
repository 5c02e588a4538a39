"""The command line shared by the three model-API mocks: parse options, serve until killed.

python mock_X.py [--host H] [--port P] [--port-file F] [--log requests.jsonl]
                 [--script script.json] [--lo-up]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
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
