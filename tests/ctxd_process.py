"""`ctxd` run as the user runs it, a real `python -m ctxd` process, for the tests that read what
it prints (a private environment for it: the `env` fixture of tests/cli/conftest.py)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import orjson

__all__ = ["ctxd", "json_lines", "replay_json"]

REPO = Path(__file__).resolve().parents[1]


def ctxd(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "ctxd", *args], env=env, capture_output=True, text=True, timeout=60
    )


def json_lines(result: subprocess.CompletedProcess[str]) -> list[dict[str, Any]]:
    assert result.returncode == 0, result.stderr
    return [orjson.loads(line) for line in result.stdout.splitlines()]


def replay_json(*args: str) -> list[dict[str, Any]]:
    """The lines `ctxd replay --json *args` prints, run in the checkout with the test run's
    environment; it must exit 0."""
    result = subprocess.run(
        [sys.executable, "-m", "ctxd", "replay", "--json", *args],
        capture_output=True,
        cwd=REPO,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    return [orjson.loads(line) for line in result.stdout.splitlines()]
