#!/usr/bin/env python3
"""Capture real Copilot CLI hook payloads, statusline payloads and session files for tests/data.

    .venv/bin/python tests/e2e/capture_copilot.py OUT_DIR        # run the scenarios into OUT_DIR
    .venv/bin/python tests/e2e/capture_copilot.py OUT_DIR --save # ... and refresh tests/data

Runs the Copilot CLI that install-agents.sh installed (or CTXD_E2E_COPILOT_BIN) offline
(`COPILOT_OFFLINE=true`, a bring-your-own-model provider at the mock), in a loopback-only
network namespace, against mock_openai_chat.py. Every hook event the CLI knows is wired to this
script (`capture_copilot.py hook EVENT`), which records the payload and answers with markers:
a top-level additionalContext on every event but agentStop, and an agentStop block once, so
that the captures show what each output does. The statusLine command is this script too
(`capture_copilot.py hook statusline`).

Scenarios:
  print        three bash calls and an answer; the agentStop block makes a second turn
  compact      a reported prompt of 56,000 (limit 64,000, background compaction at 80 %) makes
               the CLI compact while the session goes on
  failure      three tool calls that fail (postToolUseFailure, not postToolUse), a bash command
               exiting 3 (a success to Copilot CLI), one exiting 0, an answer; the block's turn
  interactive  the UI in tmux (no block): two bash calls and an answer, then `/exit`; the
               statusline command runs

--save writes, with the run directory replaced by `$RUN`:
  tests/data/payloads/copilot/<version>/<scenario>/NN-<event>.json   payloads in firing order
  tests/data/transcripts/copilot-<version>/transcript.<scenario>.jsonl   the events file
  tests/data/transcripts/copilot-<version>/usage.<scenario>.json   what the mock reported
"""

from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path
from typing import Any

E2E = Path(__file__).resolve().parent
sys.path.insert(0, str(E2E))

EVENTS = (
    "sessionStart",
    "sessionEnd",
    "userPromptSubmitted",
    "preToolUse",
    "postToolUse",
    "postToolUseFailure",
    "errorOccurred",
    "agentStop",
    "subagentStart",
    "subagentStop",
    "preCompact",
    "notification",
)
MODEL = "gpt-4.1"  # e2e_support.COPILOT_MODEL
COMPACTION_PROMPT = "The history is being compacted"


def hook(label: str) -> int:
    """Record the payload; answer with the markers described in the module docstring."""
    raw = sys.stdin.read()
    try:
        payload: Any = json.loads(raw)
    except ValueError:
        payload = {"_unparsed": raw}
    cap = Path(os.environ["E2E_CAPTURE_DIR"])
    with (cap / "hooks.jsonl").open("a", encoding="utf-8") as f:
        f.write(json.dumps({"label": label, "payload": payload}) + "\n")
    if label == "statusline":
        sys.stdout.write("CAPTURE-STATUSLINE\n")
        return 0
    out: dict[str, Any] | None = None
    if label == "agentStop":
        blocks = not os.environ.get("CAPTURE_NO_BLOCK")
        if blocks and isinstance(payload, dict) and not payload.get("stop_hook_active"):
            out = {"decision": "block", "reason": "STOP-BLOCK-MARKER"}
    else:
        out = {"additionalContext": f"{label}-CTX-MARKER"}
    if out is not None:
        sys.stdout.write(json.dumps(out))
    return 0


def _steps(prompts: list[int], final: str = "Done.") -> list[dict[str, Any]]:
    def usage(prompt: int) -> dict[str, int]:
        return {"prompt_tokens": prompt, "completion_tokens": 40, "cached_tokens": prompt // 2}

    steps: list[dict[str, Any]] = []
    for i, prompt in enumerate(prompts[:-1]):
        command = f"sleep 1; echo step{i}" if prompt > 50_000 else f"echo step{i}"
        arguments = {"command": command, "description": f"step {i}"}
        steps.append({"tool": {"name": "bash", "arguments": arguments}, "usage": usage(prompt)})
    steps.append({"text": final, "usage": usage(prompts[-1])})
    return steps


def _script(steps: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "steps": steps,
        "step_mode": "counter",
        "aux_markers": [COMPACTION_PROMPT],
        "aux_text": "<summary>MOCK COMPACTION SUMMARY: echo commands were run.</summary>",
        "models": [MODEL],
    }


def _failing_steps() -> list[dict[str, Any]]:
    """Three calls that fail (a missing file, an unknown tool, a call without its required
    argument), a bash command exiting 3, one exiting 0, then an answer."""
    calls: list[dict[str, Any]] = [
        {"name": "view", "arguments": {"path": "missing.txt"}},
        {"name": "nosuchtool", "arguments": {"x": 1}},
        {"name": "bash", "arguments": {"description": "no command"}},
        {"name": "bash", "arguments": {"command": "echo step3; exit 3", "description": "exit 3"}},
        {"name": "bash", "arguments": {"command": "echo step4", "description": "step 4"}},
    ]
    steps: list[dict[str, Any]] = []
    for i, call in enumerate(calls):
        prompt = 12_000 + 1_500 * i
        usage = {"prompt_tokens": prompt, "completion_tokens": 40, "cached_tokens": prompt // 2}
        steps.append({"tool": call, "usage": usage})
    steps.append({"text": "Done.", "usage": {"prompt_tokens": 19_500, "completion_tokens": 40}})
    return steps


SCENARIOS: dict[str, dict[str, Any]] = {
    "print": _script(_steps([12_000, 13_500, 15_000, 16_500])),
    "compact": _script(_steps([20_000, 56_000, 57_000, 15_000, 16_000])),
    "failure": _script(_failing_steps()),
}
INTERACTIVE = _script(_steps([12_000, 13_500, 15_000]))


def run_scenario(copilot: Path, name: str, out: Path) -> Path:
    import shlex
    import time

    from e2e_support import Mock, RunDir, Tmux, copilot_env, run, write_json

    script = INTERACTIVE if name == "interactive" else SCENARIOS[name]
    root = out / name
    if root.exists():
        shutil.rmtree(root)
    rd = RunDir.create(root)
    me = f"{sys.executable} {Path(__file__).resolve()} hook"
    hooks = {e: [{"type": "command", "bash": f"{me} {e}", "timeoutSec": 30}] for e in EVENTS}
    status = {"type": "command", "command": f"{me} statusline"}
    write_json(rd.home / ".copilot" / "settings.json", {"hooks": hooks, "statusLine": status})
    mock = Mock("mock_openai_chat", rd.root, script, netns=True).start()
    try:
        env = copilot_env(rd, mock)
        if name == "interactive":
            env["CAPTURE_NO_BLOCK"] = "1"
            env["COPILOT_ALLOW_ALL"] = "true"
            tmux = Tmux(root / "tmux.sock", "copilot")
            words = " ".join(shlex.quote(f"{k}={v}") for k, v in env.items())
            command = shlex.join(mock.wrap([str(copilot), "--allow-all-tools"]))
            tmux.start(
                f"cd {shlex.quote(str(rd.work))} && env -i {words} {command}; "
                "echo COPILOT-EXITED rc=$?; sleep 30"
            )
            try:
                for action, arg in (
                    ("wait", "CAPTURE-STATUSLINE"),
                    ("send", "Run the steps"),
                    ("wait", "Done."),
                    ("send", "/exit"),
                    ("wait", "COPILOT-EXITED"),
                ):
                    time.sleep(1.5)
                    if action == "send":
                        tmux.send(arg)
                    elif not tmux.wait(arg, 60):
                        (root / "pane.txt").write_text(tmux.pane())
                        raise RuntimeError(f"the UI never showed {arg!r}: see {root}/pane.txt")
            finally:
                tmux.kill()
        else:
            argv = mock.wrap([str(copilot), "-p", "Run the steps", "--allow-all-tools"])
            res = run(argv, cwd=rd.work, env=env, timeout=200)
            (root / "copilot.stdout").write_text(res.stdout)
            (root / "copilot.stderr").write_text(res.stderr)
            print(f"{name} rc={res.returncode} in {res.elapsed:.1f}s", file=sys.stderr)
    finally:
        mock.stop()
    return root


def save(root: Path, name: str, version: str) -> None:
    repo = E2E.parents[1]

    def clean(text: str) -> str:
        return text.replace(str(root), "$RUN")

    payloads = repo / "tests" / "data" / "payloads" / "copilot" / version / name
    if payloads.exists():
        shutil.rmtree(payloads)
    payloads.mkdir(parents=True)
    for n, line in enumerate((root / "cap" / "hooks.jsonl").read_text().splitlines(), 1):
        record = json.loads(line)
        text = json.dumps(record["payload"], indent=1, ensure_ascii=False) + "\n"
        (payloads / f"{n:02d}-{record['label']}.json").write_text(clean(text))
    transcripts = repo / "tests" / "data" / "transcripts" / f"copilot-{version}"
    transcripts.mkdir(parents=True, exist_ok=True)
    (events,) = (root / "home" / ".copilot" / "session-state").glob("*/events.jsonl")
    (transcripts / f"transcript.{name}.jsonl").write_text(clean(events.read_text()))
    usage = []
    for line in (root / "requests.mock_openai_chat.jsonl").read_text().splitlines():
        answer = json.loads(line)["answer"]
        usage.append(json.dumps({k: answer.get(k) for k in ("kind", "step", "usage")}))
    (transcripts / f"usage.{name}.json").write_text("[\n" + ",\n".join(usage) + "\n]\n")


def main() -> int:
    if sys.argv[1:2] == ["hook"]:
        return hook(sys.argv[2])
    from e2e_support import cli_version, find_cli

    copilot = find_cli("copilot")
    if copilot is None:
        print("copilot is not installed: run tests/e2e/install-agents.sh", file=sys.stderr)
        return 1
    version = cli_version(copilot).split()[3].rstrip(".")  # "GitHub Copilot CLI 1.0.102."
    out = Path(sys.argv[1]).resolve()
    names = [a for a in sys.argv[2:] if not a.startswith("--")] or [*SCENARIOS, "interactive"]
    for name in names:
        root = run_scenario(copilot, name, out)
        if "--save" in sys.argv[2:]:
            save(root, name, version)
    return 0


if __name__ == "__main__":
    sys.exit(main())
