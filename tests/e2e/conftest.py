"""The end-to-end suite's fixtures and report header, which live in e2e_fixtures.py: mypy checks
each test directory as a top level, as pytest imports it, and a second module named `conftest`
there would clash with tests/conftest.py; pyproject's [tool.mypy] leaves this file out."""

from e2e_fixtures import (
    claude_bin,
    claude_release,
    cline_bin,
    codex_bin,
    copilot_bin,
    gemini_bin,
    kilo_bin,
    kimi_bin,
    netns,
    opencode_bin,
    pi0_bin,
    pi_bin,
    pytest_report_header,
    qwen_bin,
)

__all__ = [
    "claude_bin",
    "claude_release",
    "cline_bin",
    "codex_bin",
    "copilot_bin",
    "gemini_bin",
    "kilo_bin",
    "kimi_bin",
    "netns",
    "opencode_bin",
    "pi0_bin",
    "pi_bin",
    "pytest_report_header",
    "qwen_bin",
]
