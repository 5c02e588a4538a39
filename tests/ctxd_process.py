"""`ctxd` run as the user runs it, a real `python -m ctxd` process, for the CLI tests that read
what it prints (its environment: the `env` fixture of tests/cli/conftest.py)."""

from __future__ import annotations

import subprocess
import sys
from typing import Any

import orjson

__all__ = ["ctxd", "json_lines"]


def ctxd(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "ctxd", *args], env=env, capture_output=True, text=True, timeout=60
    )


def json_lines(result: subprocess.CompletedProcess[str]) -> list[dict[str, Any]]:
    assert result.returncode == 0, result.stderr
    return [orjson.loads(line) for line in result.stdout.splitlines()]
