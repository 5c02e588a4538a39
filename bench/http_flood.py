"""Benchmark 11: the owner's HTTP hooks while another uid floods the port.

A real `ctxd serve` with `[http]` on tracks 20 sessions with real transcripts. One client (this
process, the owner) posts the real PostToolUse payload to `/ctxd/hook/claude`, one hook at a
time, each on a new connection (as an HTTP hook after a pause does), for --duration seconds:
first with the machine quiet, then while --flooders processes of a second uid (`setpriv` to
nobody, so the kernel names a foreign owner) open and close connections to the port as fast as
they can, each for --duration seconds and at most --max-connections connections. Loopback only.
Reported: the owner's hook latency p50/p99/max, quiet and flooded, and the foreign connections
made per second. The target: the flooded p50 within 10 ms of the quiet one.

Run twice (--lookup): with the peer's owner looked up over netlink (sock_diag), and with netlink
refused to the daemon, as the systemd unit's `RestrictAddressFamilies=AF_UNIX` refuses it, so
that it reads /proc/net/tcp instead (a `sitecustomize` on the daemon's PYTHONPATH makes
`socket(AF_NETLINK)` fail with EAFNOSUPPORT, as the unit does).

Needs root (to run the flooders as another uid) and `setpriv` (util-linux).

    .venv/bin/python bench/http_flood.py [--duration 10] [--flooders 3] [--max-connections 100000]
                                         [--lookup sock_diag|table|both]
"""

from __future__ import annotations

import argparse
import os
import shutil
import socket
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import common as c

TARGET_P50_DELTA_MS = 10.0
NOBODY = 65534

# Runs as the second uid: connect, close, again, until its time or its count is up; prints how
# many connections it made. `-I`: nothing of the owner's environment or checkout is imported.
FLOOD = """
import socket, sys, time
port, seconds, most = int(sys.argv[1]), float(sys.argv[2]), int(sys.argv[3])
end = time.monotonic() + seconds
made = 0
while made < most and time.monotonic() < end:
    s = socket.socket()
    try:
        s.connect(("127.0.0.1", port))
        made += 1
    except OSError:
        time.sleep(0.001)
    s.close()
print(made, flush=True)
"""


# The daemon's socket(AF_NETLINK) refused, as under RestrictAddressFamilies=AF_UNIX.
NO_NETLINK = """
import errno, socket
_init = socket.socket.__init__
def _refuse_netlink(self, family=-1, *args, **kwargs):
    if family == socket.AF_NETLINK:
        raise OSError(errno.EAFNOSUPPORT, "Address family not supported by protocol")
    _init(self, family, *args, **kwargs)
socket.socket.__init__ = _refuse_netlink
"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def one_hook(port: int, request: bytes) -> float:
    """One hook on a new connection; seconds from connect to the whole answer."""
    begin = time.perf_counter()
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(request)
        data = b""
        while b"\r\n\r\n" not in data:
            chunk = sock.recv(65536)
            if not chunk:
                raise ConnectionError("closed before the answer's head")
            data += chunk
        head, _, body = data.partition(b"\r\n\r\n")
        if not head.startswith(b"HTTP/1.1 200"):
            raise RuntimeError(head.split(b"\r\n")[0].decode(errors="replace"))
        length = 0
        for line in head.split(b"\r\n")[1:]:
            name, _, value = line.partition(b":")
            if name.strip().lower() == b"content-length":
                length = int(value)
        while len(body) < length:
            chunk = sock.recv(65536)
            if not chunk:
                raise ConnectionError("closed before the answer's body")
            body += chunk
    return time.perf_counter() - begin


def owner_run(
    port: int, requests: list[bytes], duration: float, pause: float
) -> tuple[list[float], int]:
    """The owner's hooks for `duration` seconds: each one's latency (a hook that failed or
    timed out counts with the time it took), and how many failed."""
    latencies = []
    failed = 0
    end = time.monotonic() + duration
    sent = 0
    while time.monotonic() < end:
        begin = time.perf_counter()
        try:
            latencies.append(one_hook(port, requests[sent % len(requests)]))
        except (OSError, RuntimeError):
            latencies.append(time.perf_counter() - begin)
            failed += 1
        sent += 1
        time.sleep(pause)
    return latencies, failed


def start_flooders(port: int, args: argparse.Namespace) -> list[subprocess.Popen[str]]:
    return [
        subprocess.Popen(
            [
                *("setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups"),
                *(c.REAL_PYTHON, "-I", "-c", FLOOD, str(port)),
                *(str(args.duration + 1.0), str(args.max_connections)),
            ],
            stdout=subprocess.PIPE,
            stdin=subprocess.DEVNULL,
            text=True,
            cwd="/",
        )
        for _ in range(args.flooders)
    ]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--duration", type=float, default=10.0)
    parser.add_argument("--flooders", type=int, default=3)
    parser.add_argument("--max-connections", type=int, default=100_000)
    parser.add_argument("--pause", type=float, default=0.005, help="seconds between hooks")
    parser.add_argument("--lookup", choices=["sock_diag", "table", "both"], default="both")
    args = parser.parse_args()
    if os.geteuid() != 0 or shutil.which("setpriv") is None:
        print("needs root and setpriv, to flood as a second real uid", file=sys.stderr)
        return 2
    c.header(
        "HTTP hooks under another uid's connection flood",
        " ".join(["bench/http_flood.py", *sys.argv[1:]]),
    )
    results: dict[str, Any] = {"machine": c.machine(), "args": vars(args)}
    rows = []
    ok = True
    lookups = ["sock_diag", "table"] if args.lookup == "both" else [args.lookup]
    for lookup in lookups:
        run = one_run(args, lookup)
        results[lookup] = run
        q, f = run["quiet_ms"], run["flooded_ms"]
        delta = f["p50"] - q["p50"]
        ok = ok and delta <= TARGET_P50_DELTA_MS
        for label, stats, failed, rate in (
            ("quiet", q, run["failed"]["quiet"], "–"),
            (
                f"flooded by {args.flooders} of uid {NOBODY}",
                f,
                run["failed"]["flooded"],
                f"{run['foreign_per_second']:,.0f}",
            ),
        ):
            rows.append(
                [
                    lookup,
                    label,
                    stats["n"],
                    failed,
                    f"{stats['p50']:.2f}",
                    f"{stats['p99']:.2f}",
                    f"{stats['max']:.1f}",
                    rate,
                    f"{run['daemon_cpu_s']:.1f}" if rate != "–" else "–",
                ]
            )
        print(
            f"{lookup}: flooded p50 - quiet p50 = {delta:+.2f} ms "
            f"(target ≤ {TARGET_P50_DELTA_MS:g} ms)",
            file=sys.stderr,
        )
    print(
        c.table(
            [
                "owner lookup",
                "owner's hooks",
                "hooks",
                "failed",
                "p50 ms",
                "p99 ms",
                "max ms",
                "foreign conn/s",
                "daemon CPU s",
            ],
            rows,
        )
    )
    print(f"\nflooded p50 within {TARGET_P50_DELTA_MS:g} ms of quiet: {c.verdict(ok)}\n")
    print(f"raw: {c.save_json('http_flood', results)}")
    return 0


def one_run(args: argparse.Namespace, lookup: str) -> dict[str, Any]:
    with c.sandbox("http-flood") as box:
        port = free_port()
        config = Path(box.env["CTXD_CONFIG"])
        config.parent.mkdir(parents=True, exist_ok=True)
        config.write_text(f"[http]\nenabled = true\nport = {port}\n")
        if lookup == "table":
            site = box.root / "no-netlink"
            site.mkdir()
            (site / "sitecustomize.py").write_text(NO_NETLINK)
            box.env["PYTHONPATH"] = str(site)
        content = c.small_transcript()
        requests = []
        for _ in range(20):
            sid = str(uuid.uuid4())
            cwd = f"/work/bench-{sid[:8]}"
            path = c.place_claude_transcript(box, content, sid, cwd)
            payload = c.claude_payload(sid, path, cwd)
            head = (
                f"POST /ctxd/hook/claude HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n"
                f"Content-Type: application/json\r\nContent-Length: {len(payload)}\r\n"
                "Connection: close\r\n\r\n"
            )
            requests.append(head.encode() + payload)
        with c.running_daemon(box) as proc:
            c.wait_sessions(box, 20, 30)
            owner_run(port, requests, 1.0, args.pause)  # warm-up
            quiet, quiet_failed = owner_run(port, requests, args.duration, args.pause)
            cpu0 = c.proc_cpu_seconds(proc.pid)
            flooders = start_flooders(port, args)
            try:
                time.sleep(0.5)  # the flood under way
                flooded, flooded_failed = owner_run(port, requests, args.duration, args.pause)
                made = []
                for flooder in flooders:
                    out, _ = flooder.communicate(timeout=args.duration + 30)
                    made.append(int(out.strip() or 0))
            finally:
                for flooder in flooders:
                    if flooder.poll() is None:
                        flooder.kill()
                        flooder.wait()
            cpu = c.proc_cpu_seconds(proc.pid) - cpu0
        log = box.log.read_text(errors="replace")
    if lookup == "table" and "sock_diag unavailable" not in log:
        raise RuntimeError("the daemon was to read /proc/net/tcp, but did not say so")
    return {
        "quiet_ms": c.summarize([x * 1000 for x in quiet]).__dict__,
        "flooded_ms": c.summarize([x * 1000 for x in flooded]).__dict__,
        "failed": {"quiet": quiet_failed, "flooded": flooded_failed},
        "foreign_connections": made,
        "foreign_per_second": sum(made) / (args.duration + 1.0),
        "daemon_cpu_s": cpu,
    }


if __name__ == "__main__":
    os.environ.setdefault("PYTHONHASHSEED", "0")
    sys.exit(main())
