"""Fixtures for the hardening tests (conftest.py hands them to pytest); the machinery is in
daemon_proc.py."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from daemon_proc import Home


@pytest.fixture
def home() -> Iterator[Home]:
    """A fresh isolated user environment, no daemon running yet; everything ended after."""
    h = Home()
    try:
        yield h
    finally:
        h.close()
