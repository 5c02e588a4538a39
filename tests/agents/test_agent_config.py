"""The agents' own configuration, as far as their compaction rules need it: the environment
variables the hook client passes on, and the settings files the daemon reads (cached)."""

from __future__ import annotations

import os
from pathlib import Path

import ctxd_wire as wire
import orjson

from ctxd import agents
from ctxd.core.session import new_session, with_agent_config
from ctxd.daemon.agent_settings import AgentSettings


def test_the_hook_client_passes_exactly_the_variables_the_agents_read() -> None:
    # The client cannot import ctxd, so its list is written out; it must be the agents' union:
    # a missing name is a setting the rule never sees, an extra one is sent for nothing.
    union = {env for name in agents.AGENTS for env in agents.spec(name).config_env}
    assert set(wire.HOOK_ENV) == union
    assert len(wire.HOOK_ENV) == len(set(wire.HOOK_ENV))


def test_hook_env_passes_only_the_listed_plain_values() -> None:
    environ = {
        b"CLAUDE_AUTOCOMPACT_PCT_OVERRIDE": b"50",
        b"CLAUDE_CONFIG_DIR": b"/home/u/.claude-work",
        b"DISABLE_COMPACT": b'1"}',  # would need escaping: left out
        b"CODEX_HOME": b"/x\\y",
        b"DISABLE_AUTO_COMPACT": b"1\n",
        b"CLAUDE_CODE_MAX_OUTPUT_TOKENS": b"x" * (wire.MAX_ENV_VALUE + 1),
        b"ANTHROPIC_API_KEY": b"secret",  # not listed: never sent
    }
    text = wire.hook_env(environ)
    assert orjson.loads(text) == {
        "CLAUDE_AUTOCOMPACT_PCT_OVERRIDE": "50",
        "CLAUDE_CONFIG_DIR": "/home/u/.claude-work",
    }
    assert wire.hook_env({}) == b"{}"


def test_the_request_header_carries_the_env() -> None:
    request = wire.hook_request("claude", "PostToolUse", b"{}", b'{"DISABLE_COMPACT":"1"}')
    header = request[wire.HEADER_SIZE :].partition(b"\n")[0]
    assert orjson.loads(header) == {
        "v": 1,
        "op": "hook",
        "agent": "claude",
        "event": "PostToolUse",
        "env": {"DISABLE_COMPACT": "1"},
    }
    # An older client's header has no "env" at all.
    old = wire.hook_request("claude", None, b"{}")
    assert "env" not in orjson.loads(old[wire.HEADER_SIZE :].partition(b"\n")[0])


def _claude_session(cwd: Path, config: dict[str, str]):  # type: ignore[no-untyped-def]
    state = new_session("claude", "s1", None, 0.0, cwd=str(cwd))
    return with_agent_config(state, config)


def test_settings_files_are_merged_and_reread_only_when_changed(tmp_path: Path) -> None:
    user_dir, work = tmp_path / "claude", tmp_path / "work"
    (work / ".claude").mkdir(parents=True)
    user_dir.mkdir()
    (user_dir / "settings.json").write_text('{"autoCompactWindow": 500000, "hooks": {}}')
    local = work / ".claude" / "settings.local.json"
    local.write_text('{"autoCompactEnabled": false}')
    now = [0.0]
    cache = AgentSettings({"HOME": str(tmp_path)}, interval=1.0, clock=lambda: now[0])
    state = _claude_session(work, {"CLAUDE_CONFIG_DIR": str(user_dir)})

    assert dict(cache.config(state)) == {
        "autoCompactWindow": "500000",
        "autoCompactEnabled": "false",
    }
    # Within the interval nothing is looked at, not even a stat.
    local.write_text('{"autoCompactEnabled": true, "autoCompactWindow": 300000}')
    os.utime(local, ns=(1, 1))
    assert dict(cache.config(state))["autoCompactEnabled"] == "false"
    # After it, the changed file is read again; the project's file outranks the user's.
    now[0] = 2.0
    assert dict(cache.config(state)) == {
        "autoCompactWindow": "300000",
        "autoCompactEnabled": "true",
    }
    # A file that disappears stops counting.
    local.unlink()
    now[0] = 4.0
    assert dict(cache.config(state)) == {"autoCompactWindow": "500000"}


def test_the_rule_sees_the_settings_through_the_registry_path(tmp_path: Path) -> None:
    (tmp_path / ".claude").mkdir()
    (tmp_path / ".claude" / "settings.json").write_text('{"autoCompactWindow": 500000}')
    cache = AgentSettings({"HOME": str(tmp_path)})
    state = _claude_session(tmp_path, {})
    rule = agents.spec("claude").compaction
    assert rule(1_000_000, "claude-opus-5-5", {}, cache.config(state)) == 467_000


def test_a_session_restored_from_a_snapshot_still_finds_its_settings(tmp_path: Path) -> None:
    from dataclasses import replace

    user_dir = tmp_path / "claude"
    user_dir.mkdir()
    (user_dir / "settings.json").write_text('{"autoCompactEnabled": false}')
    state = _claude_session(tmp_path, {"CLAUDE_CONFIG_DIR": str(user_dir)})
    # JSON gives the pairs back as lists.
    restored = replace(state, agent_config=[list(p) for p in state.agent_config])
    assert dict(AgentSettings({"HOME": "/nowhere"}).config(restored)) == {
        "autoCompactEnabled": "false"
    }
