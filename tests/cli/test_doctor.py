"""`ctxd doctor` as a user runs it: one line per check, a fix for each failure, exit status."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from conftest import World


def _lines(world: World) -> tuple[int, dict[str, str]]:
    result = world.cli("doctor", timeout=60)
    marks = {}
    for line in result.stdout.splitlines():
        if line[:4] in ("ok  ", "FAIL", "skip"):
            marks[line[5:].split(":", 1)[0]] = line[:4].strip()
    return result.returncode, marks


def test_a_wired_setup_passes_and_unused_agents_are_skipped(world: World) -> None:
    world.start()
    assert world.cli("install", "claude", "--statusline").returncode == 0
    (world.claude_dir / "projects").mkdir(parents=True, exist_ok=True)
    code, marks = _lines(world)
    for name in (
        "daemon",
        "runtime dir",
        "socket",
        "claude hooks",
        "claude statusline",
        "config",
        "watched roots",
    ):
        assert marks[name] == "ok", (name, marks)
    assert marks["gemini hooks"] == "skip" and marks["codex hooks"] == "skip"
    assert "hook round trip" in marks  # its verdict depends on this machine's load
    assert code == (1 if marks["hook round trip"] == "FAIL" else 0)


def test_a_missing_daemon_and_a_broken_config_fail_with_a_fix(world: World) -> None:
    world.write_config("[thresholds]\nwarning = 'lots'\n")
    result = world.cli("doctor", timeout=60)
    assert result.returncode == 1
    out = result.stdout
    assert "FAIL daemon: no ctxd daemon is running" in out
    assert "FAIL config:" in out and "thresholds.warning must be a number" in out
    assert "fix: start it: `ctxd serve`" in out
