"""OpenCode's own model limits and compaction settings (opencode.json): read as the daemon reads
an agent's settings files, they give the window over ctxd's table and move the compaction point
as OpenCode 1.18.33's `isOverflow` does."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from ctxd.agents import spec
from ctxd.agents.opencode.config import settings_files
from ctxd.core import session as core
from ctxd.core.events import UsageUpdate
from ctxd.core.settings import Settings
from ctxd.daemon.agent_settings import AgentSettings

OPENCODE = spec("opencode")


def read(doc: dict[str, Any]) -> dict[str, str]:
    return OPENCODE.read_settings(json.dumps(doc).encode())


def mock(**limit: int) -> dict[str, Any]:
    return {"provider": {"mock": {"models": {"mock-model": {"limit": limit}}}}}


# (opencode.json, model) -> (window from its config, compaction point on that window or the
# default 1,000,000 when it sets none)
@pytest.mark.parametrize(
    ("doc", "model", "window", "point"),
    [
        ({}, "mock-model", None, 1_000_000 - 32_000),
        (mock(context=200_000), "mock-model", 200_000, 168_000),
        (mock(context=200_000, output=8_000), "mock-model", 200_000, 192_000),
        (mock(context=200_000, output=64_000), "mock-model", 200_000, 168_000),
        # an input limit: the point is below it, by min(20,000, the output reserve)...
        (mock(context=400_000, input=272_000, output=128_000), "mock-model", 400_000, 252_000),
        (mock(context=400_000, input=272_000, output=8_000), "mock-model", 400_000, 264_000),
        # ...or by compaction.reserved
        (
            {**mock(context=400_000, input=272_000), "compaction": {"reserved": 50_000}},
            "mock-model",
            400_000,
            222_000,
        ),
        # a context limit of 0, or compaction.auto false: OpenCode never compacts
        (mock(context=0), "mock-model", None, None),
        ({**mock(context=200_000), "compaction": {"auto": False}}, "mock-model", 200_000, None),
        # another model's limits, or limits that are not whole numbers, say nothing
        (mock(context=200_000), "other-model", None, 968_000),
        (mock(context="200k"), "mock-model", None, 968_000),  # type: ignore[arg-type]
        ({"provider": {"mock": {"models": []}}}, "mock-model", None, 968_000),
        ({"provider": "mock"}, "mock-model", None, 968_000),
    ],
)
def test_the_config_gives_the_window_and_the_point(
    doc: dict[str, Any], model: str, window: int | None, point: int | None
) -> None:
    config = read(doc)
    assert OPENCODE.configured_window(model, config) == window
    assert OPENCODE.compaction(window or 1_000_000, model, {}, config) == point


def test_an_unreadable_config_is_no_config() -> None:
    assert OPENCODE.read_settings(b'{"provider": ') == {}
    assert OPENCODE.read_settings(b"[1, 2]") == {}


def test_the_files_global_then_opencode_config_then_the_projects() -> None:
    env = {"HOME": "/h", "OPENCODE_CONFIG": "/etc/oc.json"}
    assert settings_files(env, "/w") == (
        Path("/h/.config/opencode/opencode.json"),
        Path("/h/.config/opencode/opencode.jsonc"),
        Path("/etc/oc.json"),
        Path("/w/opencode.json"),
        Path("/w/opencode.jsonc"),
        Path("/w/.opencode/opencode.json"),
        Path("/w/.opencode/opencode.jsonc"),
    )
    assert settings_files({"XDG_CONFIG_HOME": "/c"}, None) == (
        Path("/c/opencode/opencode.json"),
        Path("/c/opencode/opencode.jsonc"),
    )


def test_a_session_is_measured_on_the_window_its_project_config_gives(tmp_path: Path) -> None:
    home, work = tmp_path / "home", tmp_path / "work"
    (home / ".config" / "opencode").mkdir(parents=True)
    (home / ".config" / "opencode" / "opencode.json").write_text(
        json.dumps(mock(context=200_000, output=8_000))
    )
    (work / ".opencode").mkdir(parents=True)
    # the project's file overrides the global one key by key (a comment allowed, as in .jsonc)
    (work / ".opencode" / "opencode.jsonc").write_text(
        '// the big variant\n{"provider": {"mock": {"models": {"mock-model": '
        '{"limit": {"context": 400000}}}}}}'
    )
    state = core.new_session("opencode", "ses_1", None, 0.0, cwd=str(work))
    state = core.apply_usage(state, UsageUpdate(tokens=100_000, model="mock-model"), 1.0)
    grounds = core.Grounds(
        Settings(windows={"mock-model": 128_000}),  # ctxd's own table: below OpenCode's config
        OPENCODE.compaction,
        AgentSettings({"HOME": str(home)}).config(state),
        configured_window=OPENCODE.configured_window,
    )
    fig = core.figures(state, grounds)
    assert (fig.window.size, fig.window.source, fig.compaction_at) == (400_000, "config", 392_000)
    assert fig.used_pct == 25.0
