"""OpenCode: everything ctxd knows about it, as one `AgentSpec`.

It writes no transcript files (`files`): every session is in one SQLite database,
`opencode.db`, followed as a session store read by rowid (`store`, `AgentSpec.store`), which
keeps each session's digest from its parts as they arrive (`digest`). What `opencode export`
prints, the same messages and parts as one JSON document, is its transcript for `ctxd replay`
(`export`), each step's figures made as the store makes them (`usage`). Its model limits and
compaction settings come from its `opencode.json` (`config`). It runs no command hooks: ctxd's
plugin, clients/opencode/ctxd.js, forwards its events (`hooks`: a warning after a tool call, the
handoff as the user's next message when a session goes idle), and `ctxd doctor` runs that plugin
through `Installer.plugin_run` (`doctor`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ctxd.agents.opencode import config, doctor, files, install
from ctxd.agents.opencode.compaction import compaction_point
from ctxd.agents.opencode.digest import session_digest
from ctxd.agents.opencode.export import ExportReader
from ctxd.agents.opencode.hooks import DIALECT
from ctxd.agents.opencode.store import OpenCodeStore, database_path, problem, recognises
from ctxd.agents.reader import NO_FACTS, FactListener
from ctxd.agents.settings_file import settings_reader
from ctxd.agents.spec import AgentSpec, Installer
from ctxd.agents.store import SessionStore
from ctxd.core.compaction import for_agent

__all__ = ["SPEC"]

NAME = "opencode"


def _open_reader(
    path: str | None, facts: FactListener = NO_FACTS, *, usage: bool = True
) -> ExportReader:
    # No digest is read from an export: the handoff reads a session's from the database.
    return ExportReader(path)


def _open_store(path: str, position: Mapping[str, Any] | None = None) -> OpenCodeStore:
    return OpenCodeStore(path, position)


SPEC = AgentSpec(
    name=NAME,
    title="OpenCode",
    dialect=DIALECT,
    files=files,
    open_reader=_open_reader,
    compaction=for_agent(NAME, compaction_point),
    installer=Installer(
        settings_path=install.settings_path,
        install=install.install,
        uninstall=install.uninstall,
        checks=install.checks,
        plugin=True,
        plugin_run=doctor.plugin_run,
    ),
    settings_files=config.settings_files,
    read_settings=settings_reader(config.settings_config),
    configured_window=config.configured_window,
    store=SessionStore(
        path=database_path,
        open=_open_store,
        recognises=recognises,
        digest=session_digest,
        problem=problem,
    ),
)
