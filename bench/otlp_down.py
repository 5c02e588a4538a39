"""What an OTLP collector that is down costs the daemon: hook latency and memory while the
export fails, side by side with no export and with a collector that answers.

For each collector a fresh sandboxed `ctxd serve` exports every `--interval-ms` (and each export
is bounded by the same), with the real Claude Code 2.1.332 transcript and its real PostToolUse
payload, sent over the socket `--hooks` times, `--gap-ms` apart (so the hooks span dozens of
export intervals, and land while exports are under way). Collectors, all on loopback ports of
this process:

  off         no OTEL_* variable: no export
  receiving   an HTTP server answering 200 to every export
  refusing    a port bound and not listening: every connection refused
  silent      a port listening and never accepting: every export waits out its timeout

Reported: the hook round trip (p50/p95/p99/max, ms), the daemon's RSS after warm-up and after
the hooks plus `--idle` more seconds of exporting, and the exports that failed (log lines).

    .venv/bin/python bench/otlp_down.py [--hooks 2000] [--gap-ms 5] [--interval-ms 200]
        [--idle 20]
"""

from __future__ import annotations

import argparse
import contextlib
import socket
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import common as c

SESSION_ID = "ce0bf2cd-2ea2-4b12-8b0f-a92dd2d7d425"  # the sample transcript's own session
CWD = "/home/user/project"
COLLECTORS = ("off", "receiving", "refusing", "silent")


class _Ok(BaseHTTPRequestHandler):
    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, format: str, *args: Any) -> None:
        pass


@contextlib.contextmanager
def collector(kind: str) -> Iterator[int | None]:
    """The port of a collector of `kind` (None: no export)."""
    if kind == "off":
        yield None
    elif kind == "receiving":
        server = ThreadingHTTPServer(("127.0.0.1", 0), _Ok)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        try:
            yield int(server.server_address[1])
        finally:
            server.shutdown()
            server.server_close()
    else:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            if kind == "silent":
                s.listen(1024)
            yield int(s.getsockname()[1])


def run(kind: str, args: argparse.Namespace) -> list[object]:
    with c.sandbox(f"otlp-{kind}") as box, collector(kind) as port:
        if port is not None:
            box.env.update(
                OTEL_EXPORTER_OTLP_ENDPOINT=f"http://127.0.0.1:{port}",
                OTEL_METRIC_EXPORT_INTERVAL=str(args.interval_ms),
                OTEL_EXPORTER_OTLP_TIMEOUT=str(args.interval_ms),
            )
        path = c.place_claude_transcript(box, c.small_transcript(), SESSION_ID, CWD)
        payload = c.claude_payload(SESSION_ID, path, CWD)
        with c.running_daemon(box) as proc:
            for _ in range(50):  # warm: the session is read, the SDK imported
                c.request(box.socket, "hook", payload, agent="claude", event="PostToolUse")
            time.sleep(20 * args.interval_ms / 1000)
            before = c.proc_memory_kib(proc.pid)["VmRSS"]
            took = []
            for _ in range(args.hooks):
                start = time.perf_counter()
                c.request(box.socket, "hook", payload, agent="claude", event="PostToolUse")
                took.append((time.perf_counter() - start) * 1000)
                time.sleep(args.gap_ms / 1000)
            time.sleep(args.idle)
            after = c.proc_memory_kib(proc.pid)["VmRSS"]
        failed = box.log.read_text(errors="replace").count("Failed to export")
    s = c.summarize(took)
    return [kind, s.p50, s.p95, s.p99, s.max, before / 1024, after / 1024, failed]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--hooks", type=int, default=2000)
    parser.add_argument("--gap-ms", type=float, default=5.0)
    parser.add_argument("--interval-ms", type=int, default=200)
    parser.add_argument("--idle", type=float, default=20.0)
    args = parser.parse_args()
    command = (
        f"python bench/otlp_down.py --hooks {args.hooks} --gap-ms {args.gap_ms:g} "
        f"--interval-ms {args.interval_ms} --idle {args.idle:g}"
    )
    c.header("OTLP collector down: hook latency and daemon memory", command)
    rows = [run(kind, args) for kind in COLLECTORS]
    headers = [
        "collector",
        "hook p50 ms",
        "p95",
        "p99",
        "max",
        "RSS MiB warm",
        "RSS MiB after",
        "exports failed",
    ]
    print(c.table(headers, rows))
    c.save_json("otlp_down", {"command": command, "rows": rows})


if __name__ == "__main__":
    main()
