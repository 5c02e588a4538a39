#!/usr/bin/env python3
"""Capture real pi sessions and what ctxd's extension sends, for tests/data (how they were made).

    .venv/bin/python tests/e2e/capture_pi.py OUT_DIR        # run the scenarios into OUT_DIR
    .venv/bin/python tests/e2e/capture_pi.py OUT_DIR --save # ... and refresh tests/data

Runs the pi that install-agents.sh installed (or CTXD_E2E_PI_BIN) headless (`pi -p`), in a
loopback-only network namespace, against mock_openai_chat.py, with ctxd's extension
(clients/pi/ctxd.ts, loaded with `-e`) talking to a stand-in daemon on CTXD_SOCKET that records
every request and answers with markers: `tool_result-CTX-MARKER` as every tool result's
additionalContext, and `AGENT-END-MSG` as agent_end's systemMessage.

Scenarios:
  print     three bash calls and an answer (prompts 12,000 / 13,500 / 15,000 / 16,500)
  compact   nine bash calls, each printing 10,000 characters (12,000 to 28,000), then an
            answer of 190,000 (window 200,000: pi compacts from 183,617 as the loop ends; 1.x
            only with more history than the 20,000 tokens it keeps); then `--continue -p "Say
            bye"` (one bash call at 30,000, an answer)

--save writes, with the run directory replaced by `$RUN` and the session directory's name by
`$SLUG`:
  tests/data/payloads/pi/<version>/<scenario>/NN-<event>.json   the extension's payloads
  tests/data/transcripts/pi-<version>/session.<scenario>.jsonl
  tests/data/transcripts/pi-<version>/usage.<scenario>.json     what the mock reported
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import sys
import threading
from pathlib import Path
from typing import Any

E2E = Path(__file__).resolve().parent
sys.path.insert(0, str(E2E))

from e2e_support import Mock, RunDir, base_env, cli_version, find_cli, run  # noqa: E402
from test_pi_e2e import BULKY, MODEL, pi_prepare, tool_steps  # noqa: E402

REPO = E2E.parent.parent
EXTENSION = REPO / "clients" / "pi" / "ctxd.ts"

SCENARIOS: dict[str, tuple[list[dict[str, Any]], list[list[str]]]] = {
    "print": (tool_steps([12_000, 13_500, 15_000], 16_500), [["-p", "Run the steps"]]),
    "compact": (
        [
            *tool_steps(list(range(12_000, 28_001, 2_000)), 190_000, command=BULKY),
            *tool_steps([30_000], 31_000, "Bye."),
        ],
        [["-p", "Run the steps"], ["--continue", "-p", "Say bye"]],
    ),
}


def _answer(payload: dict[str, Any]) -> bytes:
    event = payload.get("hook_event_name")
    if event == "tool_result":
        context = {"hookEventName": event, "additionalContext": "tool_result-CTX-MARKER"}
        return json.dumps({"hookSpecificOutput": context}).encode()
    if event == "agent_end":
        return json.dumps({"systemMessage": "AGENT-END-MSG"}).encode()
    return b""


def stand_in(path: Path, log: list[dict[str, Any]]) -> socket.socket:
    """A daemon stand-in on `path`: records each hook request's header and payload."""
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(str(path))
    server.listen(8)

    def serve() -> None:
        while True:
            try:
                conn, _ = server.accept()
            except OSError:
                return
            with conn:
                data = b""
                while len(data) < 4 or len(data) < 4 + int.from_bytes(data[:4], "big"):
                    chunk = conn.recv(65536)
                    if not chunk:
                        break
                    data += chunk
                head, _, body = data[4:].partition(b"\n")
                payload = json.loads(body)
                log.append({"header": json.loads(head), "payload": payload})
                answer = b'{"v":1,"ok":true}\n' + _answer(payload)
                conn.sendall(len(answer).to_bytes(4, "big") + answer)

    threading.Thread(target=serve, daemon=True).start()
    return server


def capture(out: Path, name: str, pi: Path) -> dict[str, Any]:
    steps, runs = SCENARIOS[name]
    rd = RunDir.create(out / name)
    mock = Mock("mock_openai_chat", rd.root, {"steps": steps, "step_mode": "counter"}, netns=True)
    mock.start()
    log: list[dict[str, Any]] = []
    sock_path = rd.root / "ctxd.sock"
    server = stand_in(sock_path, log)
    try:
        pi_prepare(rd, mock)
        results = []
        for args in runs:
            argv = [str(pi), "--no-extensions", "-e", str(EXTENSION), *args]
            argv += ["--provider", "mock", "--model", MODEL]
            env = base_env(rd, {"CTXD_SOCKET": str(sock_path)})
            res = run(mock.wrap(argv), cwd=rd.work, env=env, timeout=60)
            assert res.returncode == 0, res.describe()
            results.append({"stdout": res.stdout, "stderr": res.stderr})
    finally:
        server.close()
        mock.stop()
    sessions = list((rd.home / ".pi" / "agent" / "sessions").glob("*/*.jsonl"))
    assert len(sessions) == 1, sessions
    answers = [r.get("answer") or {} for r in mock.requests()]
    usage = [{key: a.get(key) for key in ("kind", "step", "usage")} for a in answers]
    return {"rd": rd, "session": sessions[0], "log": log, "usage": usage, "runs": results}


def _placeholders(text: str, rd: RunDir, session: Path) -> str:
    return text.replace(session.parent.name, "$SLUG").replace(str(rd.root), "$RUN")


def save(found: dict[str, Any], name: str, version: str) -> None:
    rd, session = found["rd"], found["session"]
    transcripts = REPO / "tests" / "data" / "transcripts" / f"pi-{version}"
    transcripts.mkdir(parents=True, exist_ok=True)
    text = _placeholders(session.read_text(), rd, session)
    (transcripts / f"session.{name}.jsonl").write_text(text)
    (transcripts / f"usage.{name}.json").write_text(json.dumps(found["usage"], indent=1) + "\n")
    payloads = REPO / "tests" / "data" / "payloads" / "pi" / version / name
    shutil.rmtree(payloads, ignore_errors=True)
    payloads.mkdir(parents=True)
    for i, rec in enumerate(found["log"], 1):
        event = rec["payload"].get("hook_event_name", "unknown")
        body = _placeholders(json.dumps(rec["payload"], indent=1), rd, session)
        (payloads / f"{i:02d}-{event}.json").write_text(body + "\n")


def main() -> int:
    out = Path(sys.argv[1]).resolve()
    pi = find_cli("pi")
    if pi is None:
        print("pi is not installed: run tests/e2e/install-agents.sh", file=sys.stderr)
        return 1
    version = cli_version(pi)
    for name in SCENARIOS:
        found = capture(out, name, pi)
        print(name, found["session"], len(found["log"]), "requests", found["runs"])
        if "--save" in sys.argv[2:]:
            save(found, name, version)
    return 0


if __name__ == "__main__":
    os.umask(0o077)
    sys.exit(main())
