"""Every test here runs with its own XDG_DATA_HOME: a ctxd command refreshes the hook client
copied under `$XDG_DATA_HOME/ctxd/client` when one is there, and a test's `python -m ctxd` must
never rewrite the real user's copy (the World fixture builds its own environment anyway)."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture(autouse=True)
def _own_data_home(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg-data"))
