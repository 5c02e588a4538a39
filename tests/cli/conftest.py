"""Every test here runs with its own XDG_DATA_HOME: a ctxd command refreshes the hook client
copied under `$XDG_DATA_HOME/ctxd/client` when one is there, and a test's `python -m ctxd` must
never rewrite the real user's copy (the World fixture builds its own environment anyway).
The `env` fixture is the environment of such a command with nothing of the user's."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from ctxd_wire import HOOK_ENV


@pytest.fixture(autouse=True)
def _own_data_home(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg-data"))


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    """Nothing of the user's: no agent variables, a HOME and config dirs of its own."""
    own = {k: v for k, v in os.environ.items() if k not in HOOK_ENV and k != "CTXD_CONFIG"}
    own.update(
        HOME=str(tmp_path / "home"),
        XDG_CONFIG_HOME=str(tmp_path / "config"),
        XDG_DATA_HOME=str(tmp_path / "data"),
    )
    return own
