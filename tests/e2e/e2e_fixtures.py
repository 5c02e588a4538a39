"""Fixtures of the end-to-end suite: the installed CLIs (a test skips with the reason when its CLI
is not installed) and the loopback-only network namespace every CLI but Claude Code runs in.
conftest.py hands them to pytest."""

from __future__ import annotations

from pathlib import Path

import pytest
from e2e_support import cli_version, find_cli, missing_cli_reason, netns_available

from ctxd.agents import AGENTS


def _cli(name: str) -> Path:
    path = find_cli(name)
    if path is None:
        pytest.skip(missing_cli_reason(name))
    return path


@pytest.fixture(scope="session")
def claude_bin() -> Path:
    return _cli("claude")


#: The Claude Code releases the suite verifies: the registry's last `@anthropic-ai/claude-code`
#: and the newer one shipped in the Agent SDK's platform package (install-agents.sh).
CLAUDE_RELEASES = {"2.1.332": "claude", "2.1.337": "claude-sdk"}


@pytest.fixture(scope="session", params=sorted(CLAUDE_RELEASES))
def claude_release(request: pytest.FixtureRequest) -> tuple[str, Path]:
    """Each verified Claude Code release in turn: (its version, its CLI). The tests whose
    behaviour differs between releases take this one; the others run on `claude_bin`."""
    version = str(request.param)
    cli = _cli(CLAUDE_RELEASES[version])
    says = cli_version(cli)
    if not says.startswith(f"{version} "):
        # CTXD_E2E_LATEST=1 or an override installed another release: its cases are not these.
        pytest.skip(f"{cli} is {says!r}; these cases are for Claude Code {version}")
    return version, cli


@pytest.fixture(scope="session")
def gemini_bin() -> Path:
    return _cli("gemini")


@pytest.fixture(scope="session")
def codex_bin() -> Path:
    return _cli("codex")


@pytest.fixture(scope="session")
def qwen_bin() -> Path:
    return _cli("qwen")


@pytest.fixture(scope="session")
def opencode_bin() -> Path:
    return _cli("opencode")


@pytest.fixture(scope="session")
def kilo_bin() -> Path:
    return _cli("kilo")


@pytest.fixture(scope="session")
def pi_bin() -> Path:
    return _cli("pi")


@pytest.fixture(scope="session")
def pi0_bin() -> Path:
    """pi 0.x (`@mariozechner/pi-coding-agent` 0.73.1, its last release), for a smoke test."""
    return _cli("pi0")


@pytest.fixture(scope="session")
def copilot_bin() -> Path:
    return _cli("copilot")


@pytest.fixture(scope="session")
def cline_bin() -> Path:
    return _cli("cline")


@pytest.fixture(scope="session")
def kimi_bin() -> Path:
    return _cli("kimi")


@pytest.fixture(scope="session")
def netns() -> bool:
    """Every CLI but Claude Code only ever runs in a namespace with nothing but loopback (Gemini
    CLI and Codex CLI reach for outside hosts). Where `unshare -rn` is refused the tests that
    need it skip."""
    if not netns_available():
        pytest.skip("`unshare -rn` is not available: cannot isolate the CLI from the network")
    return True


def pytest_report_header() -> list[str]:
    lines = []
    for name in (*AGENTS, "pi0", "claude-sdk"):
        path = find_cli(name)
        lines.append(f"e2e {name}: {cli_version(path) if path else 'not installed'}")
    return lines
