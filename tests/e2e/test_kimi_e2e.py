"""Kimi Code, the real CLI, offline against mock_openai_chat.py in a loopback-only network
namespace, wired to a real ctxd daemon by `ctxd install kimi`.

Kimi runs the model its environment names (`KIMI_MODEL_NAME`, an OpenAI-compatible provider at
`KIMI_MODEL_BASE_URL`) with the window `KIMI_MODEL_MAX_CONTEXT_SIZE` gives it, 200,000 here, and
config.toml's `[loop_control] reserved_context_size = 20000`: it compacts at
min(0.85 x 200,000, 200,000 - 20,000) = 170,000 (with Kimi's default reserve of 50,000 it would be
150,000). On ctxd's default "compaction" basis, which counts the prompt plus the answer's output
(40 tokens here), as Kimi does, that puts WARNING from 110,500 (35 % of the room before compaction
left), CRITICAL from 127,500 (25 %), the handoff from 119,000 (70 % used).

Only UserPromptSubmit's answer reaches Kimi's model, once a turn, and `kimi -p` runs one turn: a
session here is one `kimi -p` per turn, resumed with `-S`. Each turn is one answer without tool
calls; the mock's counter gives the agent loop's n-th request its n-th step.
"""

from __future__ import annotations

import json
import os
import re
import tomllib
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
    base_env,
    chat_usage,
    last_turn_text_chat,
    marks,
    run,
)

pytestmark = pytest.mark.e2e

MODEL = "kimi-mock-model"
WINDOW = 200_000
POINT = 170_000
WARNING = "CONTEXT WARNING:"
CRITICAL = "CONTEXT CRITICAL:"
HANDOFF = "CONTEXT HANDOFF:"
NOTE = "[ctxd continuity]"
#: The first words of Kimi's compaction request (its last user message).
COMPACTION_PROMPT = "You are about to run out of context"
USER_CONFIG = "# my own Kimi settings\n[loop_control]\nreserved_context_size = 20000\n"
_RESUME = re.compile(r"kimi -r (session_[A-Za-z0-9-]+)")


def kimi_prepare(rd: RunDir) -> Path:
    """Write `~/.kimi-code/config.toml` (returned): a user's own setting that ctxd keeps."""
    path = rd.home / ".kimi-code" / "config.toml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(USER_CONFIG, encoding="utf-8")
    return path


def answers(prompts: Sequence[int]) -> list[Json]:
    """One text answer per request, the i-th reporting prompt_tokens prompts[i]."""
    return [{"text": f"Answer {i}.", "usage": chat_usage(p)} for i, p in enumerate(prompts)]


@dataclass
class Rig(AgentRig):
    session: str | None = None

    def env(self, **extra: str) -> dict[str, str]:
        return base_env(
            self.rd,
            {
                "KIMI_MODEL_NAME": MODEL,
                "KIMI_MODEL_API_KEY": "sk-dummy-key-0000000000",
                "KIMI_MODEL_BASE_URL": f"{self.mock.url}/v1",
                "KIMI_MODEL_PROVIDER_TYPE": "openai",
                "KIMI_MODEL_MAX_CONTEXT_SIZE": str(WINDOW),
                # no telemetry, update checks or cron: each would keep `kimi -p` from exiting
                # for seconds, trying to reach outside hosts
                "KIMI_DISABLE_TELEMETRY": "1",
                "KIMI_CODE_NO_AUTO_UPDATE": "1",
                "KIMI_CLI_NO_AUTO_UPDATE": "1",
                "KIMI_DISABLE_CRON": "1",
                **self.ctxd.env,
                **extra,
            },
        )

    def turn(self, prompt: str, **extra_env: str) -> Result:
        """One `kimi -p` turn, in the rig's session once it has one."""
        resume = ["-S", self.session] if self.session else []
        argv = self.mock.wrap([str(self.bin), "-p", prompt, *resume])
        res = run(argv, cwd=self.rd.work, env=self.env(**extra_env), timeout=60)
        assert res.returncode == 0, res.describe()
        found = _RESUME.search(res.stdout + res.stderr)
        assert found, res.describe()
        assert self.session in (None, found[1]), res.describe()
        self.session = found[1]
        return res

    def reached(self, needle: str) -> list[bool]:
        """For each agent-loop request: did `needle` reach the model with it?"""
        return marks(self.main(), needle, last_turn_text_chat)

    def statusline(self, payload: Json) -> Result:
        """Run ctxd's status line command as Kimi's UI does (`sh -c`, the payload on stdin)."""
        config = tomllib.loads((self.rd.home / ".kimi-code" / "config.toml").read_text())
        hook = next(
            h["command"] for h in config["hooks"] if re.search(r"ctxd[-_]hook", h["command"])
        )
        env = self.env(KIMI_CODE_STATUS_LINE="1")
        argv = ["sh", "-c", f"{hook} statusline"]
        return run(argv, cwd=self.rd.work, env=env, stdin=json.dumps(payload), timeout=10)

    def row(self) -> Json:
        assert self.session is not None
        return self.ctxd.session(self.session)


@pytest.fixture
def make_rig(kimi_bin: Path, netns: bool, tmp_path: Path) -> Iterator[Callable[..., Rig]]:
    """`make(prompts, config)`: a run dir with ctxd installed by `ctxd install kimi`, a daemon
    in the mock's namespace, and the mock answering the agent loop's requests in turn."""
    with ExitStack() as cleanup:

        def make(prompts: Sequence[int], config: str = "") -> Rig:
            rd = RunDir.create(tmp_path)
            settings = kimi_prepare(rd)
            ctxd = Ctxd(rd, config, {})
            ctxd.install("kimi", settings)
            script: Json = {
                "steps": answers(prompts),
                "step_mode": "counter",  # compaction rewrites the history
                "aux_markers": [COMPACTION_PROMPT],
                "aux_text": "MOCK-COMPACTION-SUMMARY: the user asked for answers; given.",
            }
            mock = Mock("mock_openai_chat", rd.root, script, netns=netns)
            cleanup.callback(mock.stop)
            mock.start()
            cleanup.callback(ctxd.stop)  # stopped before the mock, whose namespace it runs in
            ctxd.start(mock.wrap)
            return Rig(kimi_bin, rd, ctxd, mock)

        yield make


def test_install_keeps_the_users_config_and_uninstall_gives_it_back(
    make_rig: Callable[..., Rig],
) -> None:
    rig = make_rig([1_000])
    config = rig.rd.home / ".kimi-code" / "config.toml"
    text = config.read_text(encoding="utf-8")
    assert text.startswith(USER_CONFIG)
    assert text.count("[[hooks]]") == 7 and re.search(r"ctxd[-_]hook", text)
    tui = config.parent / "tui.toml"
    assert tomllib.loads(tui.read_text())["status_line"]["command"].endswith(" kimi statusline")
    doctor = run([str(rig.bin), "doctor"], cwd=rig.rd.work, env=rig.env(), timeout=60)
    assert doctor.returncode == 0, doctor.describe()
    assert "OK config.toml" in doctor.stdout and "OK tui.toml" in doctor.stdout, doctor.describe()
    rig.turn("Say hi")  # Kimi reads it: a config it refused would fail the run
    res = rig.ctxd.ctl("uninstall", "kimi", "--settings", str(config))
    assert res.returncode == 0, res.describe()
    assert config.read_text(encoding="utf-8") == USER_CONFIG
    assert "status_line" not in tomllib.loads(tui.read_text())


def test_warnings_reach_the_model_at_kimis_point_and_the_handoff_once(
    make_rig: Callable[..., Rig],
) -> None:
    """Turn by turn (what the turn's prompt hook saw -> what the turn's answer reports):
    1: nothing -> 100,000; 2: OK -> 112,000 (WARNING level); 3: WARNING reaches the model ->
    120,000, its Stop is past the handoff point: the handoff, as a Stop block whose reason Kimi
    gives the model, which answers once more (121,000); 4: the same level, nothing -> 130,000;
    5: CRITICAL reaches the model -> 131,000, and its Stop asks for no handoff again."""
    prompts = [100_000, 112_000, 120_000, 121_000, 130_000, 131_000]
    rig = make_rig(prompts)
    for n in range(1, 6):
        rig.turn(f"Turn {n}")

    main = rig.main()
    assert len(main) == 6, [r["answer"] for r in main]
    assert rig.reached(WARNING) == [False, False, True, False, False, False]
    assert rig.reached(CRITICAL) == [False, False, False, False, False, True]
    assert rig.reached(HANDOFF) == [False, False, False, True, False, False]
    assert not rig.mock.requests_of_kind("aux"), "Kimi compacted below its point"

    row = rig.row()
    assert row["agent"] == "kimi"
    assert row["tokens"] == 131_000  # exactly the prompt the mock reported last
    assert row["window"] == WINDOW  # KIMI_MODEL_MAX_CONTEXT_SIZE, passed on by the hook client
    assert row["compaction_at"] == POINT

    # Kimi's UI runs its status line command with this payload (2.1.0's statusLinePayload); `-p`
    # runs none, so the test runs the command ctxd's install names, as Kimi would.
    payload = {
        "model": "Kimi Mock",
        "cwd": str(rig.rd.work),
        "gitBranch": None,
        "permissionMode": "default",
        "planMode": False,
        "contextUsage": 0.6552,
        "contextTokens": 131_040,
        "maxContextTokens": WINDOW,
        "sessionId": rig.session,
        "version": "2.1.0",
    }
    res = rig.statusline(payload)
    assert res.returncode == 0, res.describe()
    # CRITICAL (23 % of the room before compaction left); 170,000 - 131,040 to compact
    assert res.stdout.startswith("!! kimi-mock-model "), res.describe()
    assert "131k/200k" in res.stdout and "38k to compact" in res.stdout, res.describe()
    assert rig.row()["agent_version"] == "2.1.0"


def test_kimi_compacts_where_ctxd_said_and_the_warnings_start_over(
    make_rig: Callable[..., Rig],
) -> None:
    """1: -> 130,000 (CRITICAL level, past the handoff point): its Stop hands off, the block's
    answer reports 131,000; 2: CRITICAL reaches the model -> 171,000 (with its 40 of output past
    170,000); 3: Kimi compacts before the turn's request (its prompt hook saw CRITICAL again:
    nothing) -> 115,000; 4: WARNING reaches the model: the compaction reset the warnings (without
    it, a WARNING after a CRITICAL would wait for the debounce)."""
    rig = make_rig([130_000, 131_000, 171_000, 115_000, 116_000])
    rig.turn("Turn 1")
    rig.turn("Turn 2")
    assert not rig.mock.requests_of_kind("aux"), "Kimi compacted before its point"
    assert rig.row()["compactions"] == 0
    rig.turn("Turn 3")
    assert rig.mock.requests_of_kind("aux"), "Kimi did not compact past its point"
    rig.turn("Turn 4")

    assert rig.reached(HANDOFF) == [False, True, False, False, False]
    assert rig.reached(CRITICAL) == [False, False, True, False, False]
    assert rig.reached(WARNING) == [False, False, False, False, True]
    # the continuity note, from the session's digest, at the first prompt after the compaction
    assert rig.reached(NOTE) == [False, False, False, False, True]
    note = last_turn_text_chat(rig.main()[4]["body"])
    assert "## Last request\\nTurn 3" in note, note
    row = rig.row()
    assert row["compactions"] == 1
    assert row["tokens"] == 116_000


def test_without_a_daemon_kimi_runs_quietly(make_rig: Callable[..., Rig]) -> None:
    rig = make_rig([130_000, 171_000])
    rig.ctxd.stop_with_cli()
    rig.turn("Turn 1", CTXD_NO_SPAWN="1")
    res = rig.turn("Turn 2", CTXD_NO_SPAWN="1")
    assert "Answer 1." in res.stdout, res.describe()
    assert "CONTEXT " not in json.dumps([r["body"] for r in rig.main()]) + res.stderr
    assert not os.path.exists(rig.ctxd.env["CTXD_SOCKET"]), "a daemon was spawned"
