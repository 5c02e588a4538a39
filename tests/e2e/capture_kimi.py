#!/usr/bin/env python3
"""Capture a real Kimi Code session and its hook payloads for tests/data (how they were made).

    .venv/bin/python tests/e2e/capture_kimi.py OUT_DIR          # run the scenario into OUT_DIR
    .venv/bin/python tests/e2e/capture_kimi.py OUT_DIR --save   # ... and refresh tests/data

Runs the Kimi Code CLI that install-agents.sh installed (or CTXD_E2E_KIMI_BIN), `kimi -p` one turn
at a time (`-S` resumes the session), in a loopback-only network namespace, against
mock_openai_chat.py, with the model, its window (200,000) and the provider from the environment
and `[loop_control] reserved_context_size = 20000` in config.toml: Kimi compacts at 170,000.
Every hook event is wired to this script (`capture_kimi.py hook EVENT`), which records the payload
and answers UserPromptSubmit with a `message` marker and blocks the session's first Stop (a
`deny` with a reason), so that the captures show what each answer does.

The scenario ("compact"): turn 1, a Bash call and an answer (prompts 20,000 and 21,000), whose Stop
block makes one more answer (22,000); turn 2, an answer of 171,000 (past the point with its 40 of
output); turn 3, Kimi compacts before its request, which reports 30,000.

--save writes, with the run directory replaced by `$RUN`:
  tests/data/payloads/kimi/<version>/compact/NN-<Event>.json   payloads in firing order
  tests/data/transcripts/kimi-code-<version>/wire.compact.jsonl
  tests/data/transcripts/kimi-code-<version>/usage.compact.json   what the mock reported
"""

from __future__ import annotations

import json
import os
import re
import shutil
import sys
from pathlib import Path

E2E = Path(__file__).resolve().parent
sys.path.insert(0, str(E2E))

EVENTS = (
    "SessionStart",
    "UserPromptSubmit",
    "PreToolUse",
    "PostToolUse",
    "PostToolUseFailure",
    "Stop",
    "PreCompact",
    "PostCompact",
    "SessionEnd",
)
CONTEXT = "KIMI-CAPTURE-CONTEXT"
BLOCK = "KIMI-CAPTURE-BLOCK: write one more line."
ROOT = E2E.parents[1]


def hook(event: str) -> int:
    """Record the payload; answer as the module docstring says. Always exits 0."""
    raw = sys.stdin.read()
    cap = Path(os.environ["E2E_CAPTURE_DIR"])
    cap.mkdir(parents=True, exist_ok=True)
    with (cap / "hooks.jsonl").open("a", encoding="utf-8") as f:
        f.write(json.dumps({"label": event, "payload": json.loads(raw)}) + "\n")
    if event == "UserPromptSubmit":
        sys.stdout.write(json.dumps({"message": CONTEXT}))
    elif event == "Stop" and not (cap / ".blocked").exists():
        (cap / ".blocked").write_text("1")
        decision = {"permissionDecision": "deny", "permissionDecisionReason": BLOCK}
        sys.stdout.write(json.dumps({"hookSpecificOutput": decision}))
    return 0


def capture(out: Path, save: bool) -> None:
    from e2e_support import Mock, RunDir, base_env, find_cli, run

    kimi = find_cli("kimi")
    if kimi is None:
        raise SystemExit("kimi is not installed: run tests/e2e/install-agents.sh")
    out.mkdir(parents=True, exist_ok=True)
    rd = RunDir.create(out)
    config = rd.home / ".kimi-code" / "config.toml"
    config.parent.mkdir(parents=True)
    command = f"{sys.executable} {Path(__file__).resolve()} hook"
    lines = ["[loop_control]", "reserved_context_size = 20000", ""]
    for event in EVENTS:
        lines += [
            "[[hooks]]",
            f'event = "{event}"',
            f"command = {json.dumps(command + ' ' + event)}",
        ]
    config.write_text("\n".join(lines) + "\n", encoding="utf-8")

    def usage(prompt: int) -> dict[str, int]:
        return {"prompt_tokens": prompt, "completion_tokens": 40, "cached_tokens": prompt // 2}

    steps = [
        {"tool": {"name": "Bash", "arguments": {"command": "echo hello"}}, "usage": usage(20_000)},
        {"text": "Ran it.", "usage": usage(21_000)},
        {"text": "One more line.", "usage": usage(22_000)},
        {"text": "Big answer.", "usage": usage(171_000)},
        {"text": "After the compaction.", "usage": usage(30_000)},
    ]
    script = {
        "steps": steps,
        "step_mode": "counter",
        "aux_markers": ["You are about to run out of context"],
        "aux_text": "MOCK-COMPACTION-SUMMARY: ran echo hello, answered twice.",
    }
    mock = Mock("mock_openai_chat", rd.root, script, netns=True).start()
    env = base_env(
        rd,
        {
            "KIMI_MODEL_NAME": "kimi-mock-model",
            "KIMI_MODEL_API_KEY": "sk-dummy-key-0000000000",
            "KIMI_MODEL_BASE_URL": f"{mock.url}/v1",
            "KIMI_MODEL_PROVIDER_TYPE": "openai",
            "KIMI_MODEL_MAX_CONTEXT_SIZE": "200000",
            "KIMI_DISABLE_TELEMETRY": "1",
            "KIMI_CODE_NO_AUTO_UPDATE": "1",
            "KIMI_CLI_NO_AUTO_UPDATE": "1",
            "KIMI_DISABLE_CRON": "1",
        },
    )
    session: list[str] = []
    try:
        for prompt in ("Run echo hello", "Say something big", "Say something small"):
            argv = [str(kimi), "-p", prompt, *(["-S", session[0]] if session else [])]
            res = run(mock.wrap(argv), cwd=rd.work, env=env, timeout=120)
            if res.returncode != 0:
                raise SystemExit(res.describe())
            if not session:
                session.append(
                    re.findall(r"kimi -r (session_[A-Za-z0-9-]+)", res.stdout + res.stderr)[0]
                )
    finally:
        mock.stop()
    (wire,) = (rd.home / ".kimi-code" / "sessions").glob(f"*/{session[0]}/agents/main/wire.jsonl")
    print(wire)
    if save:
        _save(rd, wire, mock.requests(), kimi)


def _save(rd: object, wire: Path, requests: list[dict[str, object]], kimi: Path) -> None:
    from e2e_support import RunDir, cli_version

    assert isinstance(rd, RunDir)
    version = cli_version(kimi).split()[-1]
    run_dir = str(rd.root)
    transcripts = ROOT / "tests" / "data" / "transcripts" / f"kimi-code-{version}"
    payloads = ROOT / "tests" / "data" / "payloads" / "kimi" / version / "compact"
    transcripts.mkdir(parents=True, exist_ok=True)
    shutil.rmtree(payloads, ignore_errors=True)
    payloads.mkdir(parents=True)
    text = wire.read_text(encoding="utf-8").replace(run_dir, "$RUN")
    (transcripts / "wire.compact.jsonl").write_text(text, encoding="utf-8")
    answers = [a for r in requests if isinstance(a := r.get("answer"), dict)]
    usage = [{k: a.get(k) for k in ("kind", "step", "usage")} for a in answers]
    (transcripts / "usage.compact.json").write_text(
        "[\n" + ",\n".join(json.dumps(u) for u in usage) + "\n]\n", encoding="utf-8"
    )
    for n, item in enumerate(rd.hooks(), 1):
        body = json.dumps(item["payload"], indent=2).replace(run_dir, "$RUN")
        (payloads / f"{n:02d}-{item['label']}.json").write_text(body + "\n", encoding="utf-8")


def main(argv: list[str]) -> int:
    if len(argv) >= 2 and argv[0] == "hook":
        return hook(argv[1])
    if not argv:
        print(__doc__)
        return 2
    capture(Path(argv[0]).resolve(), "--save" in argv[1:])
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
