"""argparse's help formatter as ctxd's verbs use it: told the terminal's width, and naming the
agents with a session database only when help is printed.

A module of its own so that `ctxd.cli` need not import argparse: `ctxd status`, run by pollers
every few seconds, parses its few words by hand (docs/benchmarks.md §29).
"""

from __future__ import annotations

import argparse
import os
import sys

__all__ = ["WITH_STORE", "HelpFormatter"]

#: Stands in a help text for the agents whose sessions live in a database (`HelpFormatter`).
WITH_STORE = "{agents with a database}"


class HelpFormatter(argparse.HelpFormatter):
    """argparse's own, told the terminal's width as `shutil.get_terminal_size` would tell it:
    argparse asks shutil, whose import loads three compression modules, every run of every verb
    (measured in docs/benchmarks.md §13)."""

    def __init__(self, prog: str) -> None:
        super().__init__(prog, width=_columns() - 2)  # argparse's own margin

    def _get_help_string(self, action: argparse.Action) -> str | None:
        # The agents that keep a session database are named only when help is printed: naming
        # them imports every agent's package, which a verb about one agent need not.
        text = super()._get_help_string(action)
        if text is not None and WITH_STORE in text:
            text = text.replace(WITH_STORE, _with_store())
        return text


def _with_store() -> str:
    """The agents whose sessions live in a database rather than in transcript files."""
    from ctxd import agents

    return ", ".join(agents.spec(n).title for n in agents.AGENTS if agents.spec(n).store)


def _columns() -> int:
    """$COLUMNS, else the width of the terminal on stdout, else 80."""
    try:
        return int(os.environ["COLUMNS"])
    except (KeyError, ValueError):
        pass
    stdout = sys.__stdout__
    if stdout is None:
        return 80
    try:
        return os.get_terminal_size(stdout.fileno()).columns or 80
    except (ValueError, OSError):  # not a terminal, or closed
        return 80
