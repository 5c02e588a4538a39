#!/usr/bin/env python3
"""Capture real Qwen Code hook payloads and transcripts for tests/data (how they were made).

    .venv/bin/python tests/e2e/capture_qwen.py OUT_DIR        # run the scenarios into OUT_DIR
    .venv/bin/python tests/e2e/capture_qwen.py OUT_DIR --save # ... and refresh tests/data
    .venv/bin/python tests/e2e/capture_qwen.py OUT_DIR failure --save  # one scenario only

Runs the Qwen Code CLI that install-agents.sh installed (or CTXD_E2E_QWEN_BIN) headless, in a
loopback-only network namespace, against mock_openai_chat.py. Every hook event the CLI knows is
wired to this script (`capture_qwen.py hook EVENT`), which records the payload and answers with
markers: additionalContext on SessionStart, UserPromptSubmit, PostToolUse and PostToolUseFailure,
and a Stop block
(with a systemMessage) once per turn, so that the captures show what each output does.

Scenarios:
  print        three shell calls and an answer; the Stop block makes a second turn
  compress     a reported prompt of 900,000 (window 1,000,000, compression at 85 %) makes the
               CLI compress mid-turn; then `--continue` resumes the session for one more turn
  failure      calls that fail: a read_file of a missing file, a shell command exiting 3, a
               tool that does not exist; then a shell call that succeeds and an answer
  interactive  the UI in tmux (no Stop block): two shell calls and an answer, `/compress`,
               "Say bye", a rewind of that turn (Esc Esc, "Restore conversation only"),
               "Say hi", `/quit`

--save writes, with the run directory replaced by `$RUN` (and its project slug by `$SLUG`):
  tests/data/payloads/qwen/<version>/<scenario>/NN-<Event>.json   payloads in firing order
  tests/data/transcripts/qwen-code-<version>/transcript.<scenario>.jsonl
  tests/data/transcripts/qwen-code-<version>/usage.<scenario>.json   what the mock reported:
      a list with one entry per request, {kind, step, usage} (usage as sent in the SSE stream)
"""

from __future__ import annotations

import json
import os
import re
import shutil
import sys
from pathlib import Path
from typing import Any

E2E = Path(__file__).resolve().parent
sys.path.insert(0, str(E2E))

EVENTS = (
    "PreToolUse",
    "PostToolUse",
    "PostToolUseFailure",
    "PostToolBatch",
    "Notification",
    "UserPromptSubmit",
    "SessionStart",
    "Stop",
    "StopFailure",
    "SubagentStart",
    "SubagentStop",
    "PreCompact",
    "PostCompact",
    "SessionEnd",
)
MODEL = "qwen3-coder-plus"


def hook(label: str) -> int:
    """Record the payload; answer with the markers described in the module docstring."""
    raw = sys.stdin.read()
    try:
        payload: Any = json.loads(raw)
    except ValueError:
        payload = {"_unparsed": raw}
    cap = Path(os.environ["E2E_CAPTURE_DIR"])
    path = payload.get("transcript_path") if isinstance(payload, dict) else None
    size = os.path.getsize(path) if isinstance(path, str) and os.path.exists(path) else None
    with (cap / "hooks.jsonl").open("a", encoding="utf-8") as f:
        f.write(json.dumps({"label": label, "payload": payload, "transcript_size": size}) + "\n")
    event = payload.get("hook_event_name", label) if isinstance(payload, dict) else label
    out: dict[str, Any] | None = None
    blocks = not os.environ.get("CAPTURE_NO_BLOCK")
    if label == "Stop" and blocks and not payload.get("stop_hook_active"):
        out = {"decision": "block", "reason": "STOP-BLOCK-MARKER", "systemMessage": "STOP-MSG"}
    elif label in ("SessionStart", "UserPromptSubmit", "PostToolUse", "PostToolUseFailure"):
        context = {"hookEventName": event, "additionalContext": f"{label}-CTX-MARKER"}
        out = {"hookSpecificOutput": context}
    if out is not None:
        sys.stdout.write(json.dumps(out))
    return 0


def _steps(prompts: list[int], final: str = "Done.") -> list[dict[str, Any]]:
    def usage(prompt: int) -> dict[str, int]:
        return {"prompt_tokens": prompt, "completion_tokens": 40, "cached_tokens": prompt // 2}

    steps: list[dict[str, Any]] = [
        {"shell": f"echo step{i}", "usage": usage(p)} for i, p in enumerate(prompts[:-1])
    ]
    steps.append({"text": final, "usage": usage(prompts[-1])})
    return steps


SCENARIOS: dict[str, tuple[dict[str, Any], list[list[str]]]] = {
    "print": (
        {"steps": _steps([12_000, 13_500, 15_000, 16_500])},
        [["-p", "Run the steps", "--yolo"]],
    ),
    "compress": (
        {"steps": _steps([12_000, 900_000, 30_000, 31_000]), "step_mode": "counter"},
        [
            ["-p", "Run the steps", "--yolo", "--output-format", "json"],
            ["--continue", "-p", "Say bye", "--yolo", "--output-format", "json"],
        ],
    ),
    "failure": (
        {
            "steps": [
                {
                    "tool": {
                        "name": "read_file",
                        "arguments": {"file_path": "/nonexistent/missing"},
                    },
                    "usage": {"prompt_tokens": 12_000, "completion_tokens": 40},
                },
                {
                    "shell": "echo step1; exit 3",
                    "usage": {"prompt_tokens": 13_500, "completion_tokens": 40},
                },
                {
                    "tool": {"name": "nosuchtool", "arguments": {"step": 2}},
                    "usage": {"prompt_tokens": 15_000, "completion_tokens": 40},
                },
                *_steps([16_500, 18_000]),
            ]
        },
        [["-p", "Run the steps", "--yolo"]],
    ),
}


#: The interactive scenario: the mock's steps, then (action, argument) for the UI in tmux.
INTERACTIVE: tuple[dict[str, Any], list[tuple[str, str]]] = (
    {
        "steps": [
            *_steps([12_000, 13_500, 15_000]),
            {"text": "Bye.", "usage": {"prompt_tokens": 9_000, "completion_tokens": 40}},
            {"text": "Hi.", "usage": {"prompt_tokens": 10_000, "completion_tokens": 40}},
        ],
        "step_mode": "counter",
    },
    [
        ("wait", "Type your message"),
        ("send", "Run the steps"),
        ("wait", "Done."),
        ("send", "/compress"),
        ("wait", "compressed from"),
        ("send", "Say bye"),
        ("wait", "Bye."),
        ("keys", "Escape Escape"),  # the rewind picker; its last entry ("Say bye") is selected
        ("wait", "Rewind Conversation"),
        ("keys", "Enter"),
        ("wait", "Restore conversation only"),
        ("keys", "Enter C-u"),  # rewound: the old prompt is back in the input, cleared
        ("send", "Say hi"),
        ("wait", "Hi."),
        ("send", "/quit"),
        ("wait", "QWEN-EXITED"),
    ],
)


def _drive(tmux: Any, actions: list[tuple[str, str]], log: Path) -> None:
    import time

    for action, arg in actions:
        time.sleep(1.5)  # let the UI settle (and its side requests finish)
        if action == "send":
            tmux.send(arg)
        elif action == "keys":
            for key in arg.split():
                tmux("send-keys", "-t", tmux.name, key)
                time.sleep(0.4)
        elif not tmux.wait(arg, 60):
            log.write_text(tmux.pane())
            raise RuntimeError(f"the UI never showed {arg!r}; its screen is in {log}")


def run_scenario(qwen: Path, name: str, out: Path) -> Path:
    import shlex

    from e2e_support import Mock, RunDir, Tmux, base_env, run, write_json

    actions: list[tuple[str, str]] = []  # typed into the interactive UI
    calls: list[list[str]] = []  # one `qwen` run each otherwise
    if name == "interactive":
        script, actions = INTERACTIVE
    else:
        script, calls = SCENARIOS[name]
    root = out / name
    if root.exists():
        shutil.rmtree(root)
    rd = RunDir.create(root)
    hooks: dict[str, Any] = {}
    for event in EVENTS:
        command = f"{sys.executable} {Path(__file__).resolve()} hook {event}"
        group: dict[str, Any] = {"hooks": [{"type": "command", "command": command, "timeout": 30}]}
        if "ToolUse" in event:
            group["matcher"] = "*"
        hooks[event] = [group]
    write_json(
        rd.home / ".qwen" / "settings.json",
        {
            "security": {"auth": {"selectedType": "openai"}},
            "model": {"name": MODEL},
            "general": {"enableAutoUpdate": False},
            "privacy": {"usageStatisticsEnabled": False},
            "telemetry": {"enabled": False},
            "hooks": hooks,
        },
    )
    mock = Mock("mock_openai_chat", rd.root, script, netns=True).start()
    try:
        env = base_env(
            rd,
            {
                "OPENAI_API_KEY": "sk-dummy-key-0000000000",
                "OPENAI_BASE_URL": mock.url + "/v1",
                "OPENAI_MODEL": MODEL,
                "HTTPS_PROXY": mock.url,
                "HTTP_PROXY": mock.url,
                "NO_PROXY": "127.0.0.1,localhost",
            },
        )
        if name == "interactive":
            env["CAPTURE_NO_BLOCK"] = "1"
            tmux = Tmux(root / "tmux.sock", "qwen")
            words = " ".join(shlex.quote(f"{k}={v}") for k, v in env.items())
            argv = shlex.join(mock.wrap([str(qwen), "--yolo"]))
            tmux.start(
                f"cd {shlex.quote(str(rd.work))} && env -i {words} {argv}; "
                "echo QWEN-EXITED rc=$?; sleep 30"
            )
            try:
                _drive(tmux, actions, root / "pane.txt")
            finally:
                tmux.kill()
        for i, args in enumerate(calls):
            res = run(mock.wrap([str(qwen), *args]), cwd=rd.work, env=env, timeout=200)
            (root / f"qwen.{i}.stdout").write_text(res.stdout)
            (root / f"qwen.{i}.stderr").write_text(res.stderr)
            print(f"{name}[{i}] rc={res.returncode} in {res.elapsed:.1f}s", file=sys.stderr)
    finally:
        mock.stop()
    return root


def save(root: Path, name: str, version: str) -> None:
    repo = E2E.parents[1]
    run_dir = str(root)
    slug = re.sub(r"[^A-Za-z0-9]", "-", str(root / "work"))

    def clean(text: str) -> str:
        return text.replace(slug, "$SLUG").replace(run_dir, "$RUN")

    payloads = repo / "tests" / "data" / "payloads" / "qwen" / version / name
    if payloads.exists():
        shutil.rmtree(payloads)
    payloads.mkdir(parents=True)
    for n, line in enumerate((root / "cap" / "hooks.jsonl").read_text().splitlines(), 1):
        record = json.loads(line)
        text = json.dumps(record["payload"], indent=1, ensure_ascii=False) + "\n"
        (payloads / f"{n:02d}-{record['label']}.json").write_text(clean(text))
    transcripts = repo / "tests" / "data" / "transcripts" / f"qwen-code-{version}"
    transcripts.mkdir(parents=True, exist_ok=True)
    (chat,) = (root / "home" / ".qwen" / "projects").glob("*/chats/*.jsonl")
    (transcripts / f"transcript.{name}.jsonl").write_text(clean(chat.read_text()))
    usage = []
    for line in (root / "requests.mock_openai_chat.jsonl").read_text().splitlines():
        answer = json.loads(line)["answer"]
        usage.append(json.dumps({k: answer.get(k) for k in ("kind", "step", "usage")}))
    (transcripts / f"usage.{name}.json").write_text("[\n" + ",\n".join(usage) + "\n]\n")


def main() -> int:
    if sys.argv[1:2] == ["hook"]:
        return hook(sys.argv[2])
    from e2e_support import cli_version, find_cli

    qwen = find_cli("qwen")
    if qwen is None:
        print("qwen is not installed: run tests/e2e/install-agents.sh", file=sys.stderr)
        return 1
    version = cli_version(qwen)
    out = Path(sys.argv[1]).resolve()
    chosen = [a for a in sys.argv[2:] if not a.startswith("--")]
    for name in chosen or (*SCENARIOS, "interactive"):
        root = run_scenario(qwen, name, out)
        if "--save" in sys.argv[2:]:
            save(root, name, version)
    return 0


if __name__ == "__main__":
    sys.exit(main())
