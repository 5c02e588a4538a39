"""Cline CLI, the real CLI (3.0.65), offline against mock_openai_chat.py in a loopback-only
network namespace, wired to a real ctxd daemon through Cline's own hooks.

Cline runs `mock-model` with the window the provider settings give it (`contextWindow` 40,000 in
providers.json, which Cline takes as the model's usable input) and compacts once the last
answer's `inputTokens` reach 0.9 of that: 36,000. On ctxd's default "compaction" basis that puts
WARNING from 23,400 (35 % of the room before compaction left) and CRITICAL from 27,000 (25 %).
Each tool call runs `seq` to 3,000, so that Cline's own estimate of the request stays within 4x of
the figures the mock reports (Cline scales its estimate by that factor at most: see
ctxd/agents/cline/compaction.py).

No proxy variables here (Cline sends the mock's own requests through one, refused): the
namespace alone keeps it from outside hosts. Every Cline run sets
CLINE_SESSION_BACKEND_MODE=local: otherwise the CLI starts a background "hub" daemon that
outlives it.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterator, Sequence
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
    chat_usage,
    last_turn_text_chat,
    run,
    write_json,
)

from ctxd.agents.cline.install import HOOK_FILES

pytestmark = pytest.mark.e2e

MODEL = "mock-model"
WINDOW = 40_000
WARNING = "CONTEXT WARNING:"
CRITICAL = "CONTEXT CRITICAL:"
HANDOFF = "CONTEXT HANDOFF:"
NOTE = "[ctxd continuity]"


def busy(i: int) -> str:
    # Each call its own command: Cline stops a run that repeats one call five times.
    return f"seq {i} {3000 + i}"


def cline_prepare(rd: RunDir, mock: Mock, bin: Path, data_dir: Path | None = None) -> Path:
    """The mock as an OpenAI-compatible provider, set by the real `cline auth` (a
    providers.json written by hand is not taken: the CLI then asks Cline's own API), then the
    window added to its settings; returns providers.json. `data_dir`: `--data-dir`'s."""
    moved = [] if data_dir is None else ["--data-dir", str(data_dir)]
    res = run(
        mock.wrap(
            [
                str(bin),
                "auth",
                *moved,
                "-p",
                "openai-compatible",
                "-k",
                "sk-dummy",
                "-m",
                MODEL,
                "-b",
                f"{mock.url}/v1",
            ]
        ),
        cwd=rd.work,
        env=base_env(rd, {}),
    )
    assert res.returncode == 0, res.describe()
    data = rd.home / ".cline" / "data" if data_dir is None else data_dir
    path = data / "settings" / "providers.json"
    doc = json.loads(path.read_text(encoding="utf-8"))
    doc["providers"]["openai-compatible"]["settings"]["contextWindow"] = WINDOW
    write_json(path, doc)
    return path


def install_hooks(ctxd: Ctxd) -> None:
    """`ctxd install cline`, as a user runs it: ctxd's hook files in ~/.cline/hooks, beside a
    hook of the user's own that must keep running."""
    folder = ctxd.rd.home / ".cline" / "hooks"
    folder.mkdir(parents=True, exist_ok=True)
    own = folder / "PostToolUse"
    own.write_text(f"#!/bin/sh\necho ran >> {ctxd.rd.root / 'own-hook.log'}\n")
    own.chmod(0o755)
    res = ctxd.ctl("install", "cline")
    assert res.returncode == 0, res.describe()
    assert all(os.access(folder / name, os.X_OK) for name in HOOK_FILES), res.describe()


def steps(prompts: Sequence[int], final: str = "All done.") -> list[Json]:
    """One `seq` call per figure, then a text answer with the last figure."""
    out: list[Json] = [
        {
            "tool": {"name": "run_commands", "arguments": {"commands": [busy(i)]}},
            "usage": chat_usage(p),
        }
        for i, p in enumerate(prompts)
    ]
    out.append({"text": final, "usage": chat_usage(prompts[-1])})
    return out


@dataclass
class Rig(AgentRig):
    def cline(self, prompt: str, *args: str, **extra_env: str) -> Result:
        env = base_env(
            self.rd,
            {
                **self.ctxd.env,
                "CLINE_SESSION_BACKEND_MODE": "local",
                **extra_env,
            },
        )
        res = run(self.mock.wrap([str(self.bin), *args, prompt]), cwd=self.rd.work, env=env)
        assert res.returncode == 0, res.describe()
        return res

    def summaries(self) -> list[Json]:
        """The compaction's summary requests (no tools: the mock's "aux")."""
        return self.mock.requests_of_kind("aux")

    def session_id(self) -> str:
        rows = [s for s in self.ctxd.status()["sessions"] if s.get("transcript_path")]
        assert len(rows) == 1, rows
        return str(rows[0]["session_id"])


@pytest.fixture
def make_rig(cline_bin: Path, netns: bool, tmp_path: Path) -> Iterator[Callable[..., Rig]]:
    with ExitStack() as cleanup:

        def make(script_steps: list[Json], config: str = "", data_dir: str = "") -> Rig:
            rd = RunDir.create(tmp_path)
            ctxd = Ctxd(rd, config, {})
            script: Json = {"steps": script_steps, "step_mode": "counter", "aux_text": "SUMMARY"}
            mock = Mock("mock_openai_chat", rd.root, script, netns=netns)
            cleanup.callback(mock.stop)
            mock.start()
            cline_prepare(rd, mock, cline_bin, rd.root / data_dir if data_dir else None)
            install_hooks(ctxd)
            cleanup.callback(ctxd.stop)
            ctxd.start(mock.wrap)
            return Rig(cline_bin, rd, ctxd, mock)

        yield make


def test_warnings_reach_the_model_and_reset_after_a_real_compaction(
    make_rig: Callable[..., Rig],
) -> None:
    """Cline compacts where its rule says (38,000 >= 36,000; 28,000 was left alone), and the
    warnings came from ctxd's hook through Cline's own `contextModification` at the calls that
    point predicts. Call 4 is still CRITICAL, inside the debounce: quiet. Call 5, the first
    after the compaction, warns at once: without the reset it would be inside the debounce."""
    # call:   0       1       2 (W)   3 (C)   4 (C, debounced; >= 36,000: compacted after it)
    prompts = [12_000, 18_000, 24_000, 28_000, 38_000, 24_500, 26_000]
    # call 5: past WARNING again after the compaction, with the continuity note; call 6
    # debounced; the answer after it (TaskComplete: 72 % used) passes the handoff point
    rig = make_rig(steps(prompts))
    res = rig.cline("Run the steps")

    main = rig.main()
    assert len(main) == len(prompts) + 1, res.describe()
    assert len(rig.summaries()) == 1, "Cline did not compact once"
    # the summary request came right after call 4's answer, not after call 3's
    kinds = [(r.get("answer") or {}).get("kind") for r in rig.mock.requests()]
    assert kinds.index("aux") == 5, kinds
    assert at_calls(main, CRITICAL) == [3]
    assert at_calls(main, WARNING) == [2, 5]
    assert at_calls(main, NOTE) == [5]  # once, with the first hook after the compaction

    row = rig.ctxd.session(rig.session_id())
    assert row["agent"] == "cline"
    assert row["compactions"] == 1
    assert row["tokens"] == prompts[-1]  # exactly what the mock reported last
    assert row["window"] == WINDOW

    # Cline reads nothing a stop hook prints: the handoff goes with the first tool call past
    # 70 % of the room (call 3: 28,000 of 36,000), and again once the compaction re-armed it
    # (call 6: 26,000), each time once, naming the draft ctxd wrote.
    assert at_calls(main, HANDOFF) == [3, 6]
    assert row["handoff_asked"]
    drafts = list((rig.rd.root / "state" / "ctxd" / "handoffs").glob("*.md"))
    assert [d.name for d in drafts] == [f"{rig.session_id()}.md"], drafts
    assert str(drafts[0]) in last_turn_text_chat(main[4]["body"])

    # the user's own PostToolUse hook ran beside ctxd's at every call
    assert (rig.rd.root / "own-hook.log").read_text().split() == ["ran"] * len(prompts)


def test_the_handoff_reaches_the_model_once(make_rig: Callable[..., Rig]) -> None:
    """Past the handoff point at call 1 (26,000: 72 % of the 36,000 before compaction), the
    request reaches the model with that call's result, once: calls 2 and 3 are past it too."""
    rig = make_rig(steps([12_000, 26_000, 27_000, 28_000]))
    rig.cline("Run the steps")
    main = rig.main()
    assert at_calls(main, HANDOFF) == [1]
    assert sum(HANDOFF in json.dumps(r["body"]) for r in main) == len(main) - 2  # then history
    assert rig.ctxd.session(rig.session_id())["handoff_asked"]


def test_without_a_daemon_the_session_completes_quietly(make_rig: Callable[..., Rig]) -> None:
    rig = make_rig(steps([24_000, 28_000]))
    rig.ctxd.stop_with_cli()
    res = rig.cline("Run the steps", CTXD_NO_SPAWN="1")
    assert "All done." in res.stdout, res.describe()
    assert "CONTEXT " not in json.dumps([r["body"] for r in rig.main()])
    assert not os.path.exists(rig.ctxd.env["CTXD_SOCKET"])


def test_a_data_dir_of_its_own_is_followed_through_the_hooks(make_rig: Callable[..., Rig]) -> None:
    """`cline --data-dir D` keeps its sessions and settings in D and hands its hooks
    CLINE_DATA_DIR=D, which the hook client passes on: ctxd finds the session (the daemon
    itself watches only ~/.cline/data) and the window in D's settings."""
    rig = make_rig(steps([12_000, 24_000, 25_000]), data_dir="cline-data")
    data_dir = rig.rd.root / "cline-data"
    rig.cline("Run the steps", "--data-dir", str(data_dir))

    assert at_calls(rig.main(), WARNING) == [1]
    row = rig.ctxd.session(rig.session_id())
    assert row["transcript_path"].startswith(f"{data_dir}/sessions/")
    assert (row["tokens"], row["window"]) == (25_000, WINDOW)
