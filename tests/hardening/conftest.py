"""The hardening tests' fixtures, which live in hardening_fixtures.py: mypy checks each test
directory as a top level, as pytest imports it, and a second module named `conftest` there
would clash with tests/conftest.py; pyproject's [tool.mypy] leaves this file out."""

from hardening_fixtures import home

__all__ = ["home"]
