"""What one hook request costs the whole daemon, in instructions: `ctxd serve` under callgrind.

A real daemon (`<venv python> -m ctxd serve`, all its threads) runs under valgrind's callgrind
in a sandbox holding 8 copies of the real Claude Code 2.1.332 transcript; one client sends the
real PostToolUse frame of bench/daemon_load.py, one connection per request as the hook client
does, one request at a time, after a warm-up that reads every transcript. The daemon is run
twice, with `--base` and with `--base` + `--requests` requests, and the difference of the two
totals divided by `--requests`: start-up and warm-up cancel out, and what is left is accept,
framing, the hook's answer and whatever the daemon does meanwhile. Instruction counts do not
depend on what else the machine is doing (only the daemon's timed housekeeping does, a little:
a longer run has more ticks), which makes them the figure to compare on a shared machine where
bench/daemon_load.py's throughput is not.

`--against TREE` measures a second checkout the same way, with its own `.venv`.

    .venv/bin/python bench/daemon_instructions.py [--requests 2000] [--base 200]
        [--against ../old-checkout]
"""

from __future__ import annotations

import argparse
import socket
import subprocess
import sys
import time
from pathlib import Path

import common as c
import ctxd_wire

from ctxd import protocol

SESSIONS = 8


def _request(path: Path, frame: bytes) -> None:
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(120.0)
        sock.connect(str(path))
        sock.sendall(frame)
        body = ctxd_wire.read_frame(sock, ctxd_wire.MAX_STATUS)
    if ctxd_wire.ok_result(body) is None:
        raise RuntimeError(f"ctxd answered an error: {body[:200].decode(errors='replace')}")


def instructions(tree: Path, requests: int) -> int:
    """Instructions (Ir) of one whole daemon of `tree` that answered `requests` hooks."""
    python = tree / ".venv" / "bin" / "python"
    with c.sandbox("instructions") as box:
        content = c.CLAUDE_TRANSCRIPT.read_bytes()
        cwd = str(box.root / "work")
        frames = []
        for n in range(SESSIONS):
            session_id = f"00000000-0000-4000-8000-{n:012d}"
            transcript = c.place_claude_transcript(box, content, session_id, cwd)
            payload = c.claude_payload(session_id, transcript, cwd)
            frames.append(
                protocol.encode_request("hook", payload, agent="claude", event="PostToolUse")
            )
        out = box.root / "callgrind.out"
        argv = ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}"]
        argv += [str(python), "-m", "ctxd", "serve"]
        # The same hash seed on both sides: str hashing shows in the count otherwise.
        env = {**box.env, "PYTHONHASHSEED": "0"}
        with box.log.open("ab") as log:
            daemon = subprocess.Popen(argv, env=env, cwd=tree, stdout=log, stderr=log)
        try:
            deadline = time.monotonic() + 120.0
            while not box.socket.exists():
                if daemon.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"ctxd serve did not start; see {box.log}")
                time.sleep(0.1)
            time.sleep(0.5)  # listening: the socket file is bound just before listen()
            for frame in frames * 3:
                _request(box.socket, frame)
            for n in range(requests):
                _request(box.socket, frames[n % SESSIONS])
            _request(box.socket, protocol.encode_request("stop"))
            daemon.wait(120.0)
        finally:
            if daemon.poll() is None:
                daemon.kill()
                daemon.wait()
        for line in out.read_text().splitlines():
            if line.startswith(("summary:", "totals:")):
                return int(line.split()[1])
    raise RuntimeError("callgrind wrote no totals")


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=2000)
    parser.add_argument("--base", type=int, default=200)
    parser.add_argument("--against", type=Path, help="a second checkout, with its own .venv")
    args = parser.parse_args()
    trees = [("this checkout", c.REPO)]
    if args.against is not None:
        trees.append((str(args.against), args.against.resolve()))
    print("## Daemon instructions per hook request (callgrind, all threads)\n")
    print("    " + " ".join(["bench/daemon_instructions.py", *sys.argv[1:]]) + "\n")
    print("| checkout | instructions per request |")
    print("|---|---|")
    counts = []
    for name, tree in trees:
        low = instructions(tree, args.base)
        high = instructions(tree, args.base + args.requests)
        counts.append((high - low) / args.requests)
        print(f"| {name} | {counts[-1]:,.0f} |", flush=True)
    if len(counts) == 2:
        print(f"\nthis checkout / the other: {counts[0] / counts[1]:.3f}")


if __name__ == "__main__":
    main()
