"""Kilo CLI, the real CLI (`kilo run`), offline against mock_openai_chat.py in a loopback-only
network namespace, with ctxd's plugin installed by `ctxd install kilo` and a real ctxd daemon
reading its database (`kilo.db`). Kilo is an OpenCode fork: the harness, the steps and the
expectations are OpenCode's (tests/e2e/test_opencode_e2e.py, whose docstring explains the turns),
run under Kilo's names.

The mock model has a 200,000 window (ctxd's `[windows]`, and `limit.context` in kilo.json); Kilo
compacts after a step whose count (input + output + cache) reaches 200,000 - 32,000 = 168,000,
as OpenCode does. `compaction.threshold_percent` lowers that point for a turn's first request.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path

import pytest
from e2e_support import (
    AgentRig,
    Ctxd,
    Json,
    Mock,
    Result,
    RunDir,
    at_calls,
    base_env,
    run,
    write_json,
)
from test_opencode_e2e import (
    CRITICAL,
    MODEL,
    WARNING,
    WINDOW,
    bash_steps,
    handoffs,
)

pytestmark = pytest.mark.e2e

#: In Kilo's request for a compaction's summary (7.7.7), which offers no tools.
SUMMARY_PROMPT = "mention the summary process"


def kilo_config(ctxd: Ctxd, mock: Mock, compaction: Json | None = None) -> Path:
    """Kilo's global config (where ctxd's XDG_CONFIG_HOME puts it): the mock as an
    OpenAI-compatible provider, no autoupdate, no sharing."""
    path = Path(ctxd.env["XDG_CONFIG_HOME"]) / "kilo" / "kilo.json"
    doc: Json = {
        "$schema": "https://app.kilo.ai/config.json",
        "autoupdate": False,
        "share": "disabled",
        "model": f"mock/{MODEL}",
        "provider": {
            "mock": {
                "npm": "@ai-sdk/openai-compatible",
                "name": "Mock",
                "options": {"baseURL": f"{mock.url}/v1", "apiKey": "sk-dummy"},
                "models": {MODEL: {"name": "Mock", "limit": {"context": WINDOW, "output": 32_000}}},
            }
        },
    }
    if compaction is not None:
        doc["compaction"] = compaction
    write_json(path, doc)
    return path


def env(rd: RunDir, mock: Mock, extra: Mapping[str, str]) -> dict[str, str]:
    return base_env(
        rd,
        {
            "KILO_DISABLE_MODELS_FETCH": "1",
            "KILO_DISABLE_AUTOUPDATE": "1",
            "KILO_DISABLE_SESSION_INGEST": "1",
            "HTTPS_PROXY": mock.url,
            "HTTP_PROXY": mock.url,
            "NO_PROXY": "127.0.0.1,localhost",
            **extra,
        },
    )


@dataclass
class Rig(AgentRig):
    def kilo(self, prompt: str, *args: str, **extra: str) -> Result:
        argv = self.mock.wrap([str(self.bin), "run", *args, prompt])
        res = run(argv, cwd=self.rd.work, env=env(self.rd, self.mock, {**self.ctxd.env, **extra}))
        assert res.returncode == 0, res.describe()
        return res

    def rows(self) -> list[Json]:
        return [s for s in self.ctxd.status()["sessions"] if s["agent"] == "kilo"]


@pytest.fixture
def rig(kilo_bin: Path, netns: bool, tmp_path: Path) -> Iterator[Rig]:
    with ExitStack() as cleanup:
        rd = RunDir.create(tmp_path)
        ctxd = Ctxd(rd, f'[windows]\n"{MODEL}" = {WINDOW}\n', {})
        mock = Mock("mock_openai_chat", rd.root, {"steps": [{"text": "idle"}]}, netns=netns)
        cleanup.callback(mock.stop)
        mock.start()
        cleanup.callback(ctxd.stop)
        yield Rig(kilo_bin, rd, ctxd, mock)


def start(rig: Rig, steps: list[Json], compaction: Json | None = None, **script: object) -> None:
    rig.mock.stop()
    rig.mock.script = {"steps": steps, **script}
    rig.mock.start()
    rig.ctxd.install("kilo", kilo_config(rig.ctxd, rig.mock, compaction))  # the new port


def test_warnings_reach_the_model_the_handoff_is_asked_once_and_status_has_the_figures(
    rig: Rig,
) -> None:
    # As OpenCode's: step 2's WARNING at call 3, its 5th-call repeat at 8, step 8's CRITICAL at
    # 9, the handoff asked once when the session goes idle at 76 % used. Unlike `opencode run`,
    # `kilo run` disposes its instance as soon as the session is idle, without waiting for the
    # plugin: the handoff turn the plugin starts then is cut off ("All fibers interrupted"), so
    # here it is asked (the row says so) but never reaches the model.
    prompts = [50_000, 60_000, 110_000, 111_000, 112_000, 113_000, 114_000, 115_000, 127_000]
    start(rig, bash_steps([*prompts, 127_500, 128_000]))
    rig.ctxd.start(rig.mock.wrap)
    res = rig.kilo("Run the steps")
    assert "Done." in res.stdout, res.describe()

    main = rig.main()
    assert len(main) == len(prompts) + 2, res.describe()  # 10 calls and the answer
    assert at_calls(main, WARNING) == [3, 8]
    assert at_calls(main, CRITICAL) == [9]
    assert handoffs(main) == []

    rows = rig.rows()
    assert len(rows) == 1, rig.ctxd.status()
    assert rows[0]["tokens"] == 128_000  # the mock's last prompt_tokens, exactly
    assert rows[0]["window"] == WINDOW
    assert rows[0]["compaction_at"] == 168_000
    assert rows[0]["handoff_asked"] is True


def test_a_real_compaction_resets_the_warnings(rig: Rig) -> None:
    # step 3 reports 170,000 + 40 (over 168,000): Kilo compacts after its call, asks the model
    # for a summary and goes on; step 5's WARNING is given at once (reset), not held back by
    # call 1's debounce.
    prompts = [50_000, 115_000, 116_000, 170_000, 60_000, 115_000, 116_000, 117_000]
    start(rig, bash_steps(prompts), step_mode="counter")
    rig.ctxd.start(rig.mock.wrap)
    res = rig.kilo("Run the steps")
    assert "Done." in res.stdout, res.describe()

    main = rig.main()
    assert len(main) == len(prompts), res.describe()
    summaries = [r for r in rig.mock.requests() if SUMMARY_PROMPT in json.dumps(r.get("body"))]
    assert len(summaries) == 1, [r.get("answer") for r in rig.mock.requests()]
    assert main[3]["ts"] < summaries[0]["ts"] < main[4]["ts"]
    assert at_calls(main, WARNING) == [2, 6]
    assert handoffs(main) == []

    rows = rig.rows()
    assert len(rows) == 1, rig.ctxd.status()
    assert rows[0]["compactions"] == 1
    assert rows[0]["tokens"] == 117_000


def test_a_stopped_daemon_leaves_the_session_working_quietly(rig: Rig) -> None:
    start(rig, bash_steps([120_000, 130_000, 140_000]))
    rig.ctxd.start(rig.mock.wrap)
    rig.ctxd.stop_with_cli()
    res = rig.kilo("Run the steps", CTXD_NO_SPAWN="1")
    assert "Done." in res.stdout, res.describe()
    assert "ctxd" not in res.stderr.lower(), res.describe()
    assert "CONTEXT " not in json.dumps([r["body"] for r in rig.main()])
    assert len(rig.main()) == 3  # no handoff turn either
    assert not Path(rig.ctxd.env["CTXD_SOCKET"]).exists(), "a daemon was spawned"
