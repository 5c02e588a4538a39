"""First look at a big transcript: what the first hook of a session costs when
a fresh daemon has never seen its transcript, at 1, 10, 50 and 200 MB.

For each size, a transcript of real Claude Code lines (the sample transcript, repeated, ending
with one line whose figure is known) is written outside the watched roots, so that nothing but
the hook makes the daemon read it. Then, for each run, a fresh daemon is started and one
PostToolUse hook sent, either as raw frame on the socket (the daemon's share) or through the
installed hook command (`python -S -I clients/ctxd_hook.py claude`, what the agent waits for).
Measured: that hook's time; whether its answer says the transcript is still being read; how
long the background read then takes until `status` shows the final figure.

    .venv/bin/python bench/first_render.py [--sizes 1,10,50,200] [--runs 3]

Target: the daemon's share of the first hook (the raw frame's round trip) ≤ 50 ms at any size.
Through the hook command the client's own start-up comes on top; it does not depend on the
transcript (compare the 1 MB rows, where nothing is left to read). Raw figures go to
bench/out/first_render.json.
"""

from __future__ import annotations

import argparse
import socket
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import common as c
import ctxd_wire

MB = 1_000_000
FINAL_TOKENS = 123_456
TARGET_MS = 50.0
HOOK_CLIENT = c.REPO / "clients" / "ctxd_hook.py"


def write_transcript(path: Path, size: int, session_id: str) -> int:
    """~`size` bytes of the real sample transcript, repeated, then a line of FINAL_TOKENS."""
    sample = c.CLAUDE_TRANSCRIPT.read_bytes()
    final = c.assistant_append(c.assistant_line(), session_id, FINAL_TOKENS)
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("wb") as f:
        written = 0
        while written + len(final) < size:
            chunk = sample[: size - len(final) - written]
            if b"\n" in chunk and len(chunk) < len(sample):
                chunk = chunk[: chunk.rindex(b"\n") + 1]
            elif len(chunk) < len(sample):
                break
            f.write(chunk)
            written += len(chunk)
        f.write(final)
    return path.stat().st_size


def raw_hook(box: c.Sandbox, request: bytes) -> tuple[float, bytes]:
    started = time.perf_counter()
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(10)
        sock.connect(str(box.socket))
        sock.sendall(request)
        body = ctxd_wire.read_frame(sock, ctxd_wire.MAX_RESPONSE)
    took = time.perf_counter() - started
    result = ctxd_wire.ok_result(body)
    if result is None:
        raise RuntimeError(f"error answer: {body[:200]!r}")
    return took, result


def client_hook(box: c.Sandbox, payload: bytes) -> tuple[float, bytes]:
    started = time.perf_counter()
    done = subprocess.run(
        [c.PYTHON, "-S", "-I", str(HOOK_CLIENT), "claude"],
        input=payload,
        env=box.env,
        capture_output=True,
        timeout=10,
        check=True,
    )
    return time.perf_counter() - started, done.stdout


def caught_up(box: c.Sandbox, path: Path, timeout: float = 120.0) -> tuple[float, int | None]:
    """Seconds until the session's row shows no catch-up under way; its tokens then."""
    started = time.monotonic()
    while time.monotonic() - started < timeout:
        for row in c.status(box)["sessions"]:
            if row["transcript_path"] == str(path) and row.get("catching_up") is None:
                return time.monotonic() - started, row["tokens"]
        time.sleep(0.01)
    return timeout, None


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="1,10,50,200", help="transcript sizes in MB")
    parser.add_argument("--runs", type=int, default=3, help="runs per size and way")
    args = parser.parse_args()
    c.header(
        "First hook on an unseen transcript", "bench/first_render.py " + " ".join(sys.argv[1:])
    )
    rows: list[list[object]] = []
    raw: list[dict[str, Any]] = []
    ok = True
    with c.sandbox("first-render") as box:
        for size_mb in [int(s) for s in args.sizes.split(",")]:
            session_id = str(uuid.uuid4())
            path = box.root / "elsewhere" / f"{session_id}.jsonl"  # outside the watched roots
            size = write_transcript(path, size_mb * MB, session_id)
            payload = c.claude_payload(session_id, path, "/work/first")
            request = c.frame("hook", payload, agent="claude", event=None)
            for way in ("raw", "client"):
                for _ in range(args.runs):
                    with c.running_daemon(box):
                        if way == "raw":
                            took, result = raw_hook(box, request)
                        else:
                            took, result = client_hook(box, payload)
                        says = b"still reading" in result
                        rest, tokens = caught_up(box, path)
                    raw.append(
                        {
                            "size": size,
                            "way": way,
                            "first_ms": took * 1000,
                            "says_catching_up": says,
                            "caught_up_s": rest,
                            "tokens": tokens,
                        }
                    )
                    box.log.write_text("")
                    for name in ("state.json", "state.journal"):
                        (Path(box.env["XDG_STATE_HOME"]) / "ctxd" / name).unlink(missing_ok=True)
            path.unlink()
            for way in ("raw", "client"):
                runs = [r for r in raw if r["size"] == size and r["way"] == way]
                firsts = sorted(r["first_ms"] for r in runs)
                right = all(r["tokens"] == FINAL_TOKENS for r in runs)
                good = (way == "client" or firsts[-1] <= TARGET_MS) and right
                ok = ok and good
                rows.append(
                    [
                        f"{size / MB:,.0f}",
                        way,
                        " / ".join(f"{x:.1f}" for x in firsts),
                        sum(r["says_catching_up"] for r in runs),
                        " / ".join(f"{r['caught_up_s']:.2f}" for r in runs),
                        "yes" if right else "NO",
                        c.verdict(good) if way == "raw" or not right else "(client start-up)",
                    ]
                )
    print(
        c.table(
            [
                "MB",
                "hook",
                "first hook, ms (each run)",
                "said 'still reading'",
                "then caught up after, s",
                "final figure right",
                f"≤ {TARGET_MS:g} ms",
            ],
            rows,
        )
    )
    print(f"\nraw: {c.save_json('first_render', {'runs': raw})}")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
