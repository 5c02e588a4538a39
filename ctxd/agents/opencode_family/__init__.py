"""OpenCode and its fork Kilo CLI: everything ctxd knows about them, as one `AgentSpec` per
member built from its declaration (`family.Family`); shared by `ctxd.agents.opencode` and
`ctxd.agents.kilo`, and itself no agent (no agent imports another).

A member writes no transcript files (`files`): every session is in one SQLite database
(`opencode.db`, `kilo.db`), followed as a session store read by rowid (`store`,
`AgentSpec.store`), which keeps each session's digest from its parts as they arrive (`digest`).
What `opencode export` (`kilo export`) prints, the same messages and parts as one JSON document,
is its transcript for `ctxd replay` (`export`), each step's figures made as the store makes them
(`usage`). Its model limits and compaction settings come from its config files (`config`). It
runs no command hooks: ctxd's plugin, clients/opencode_family/plugin.js, forwards its events
(`hooks`: a warning after a tool call, the handoff as the user's next message when a session
goes idle), and `ctxd doctor` runs that plugin through `Installer.plugin_run` (`doctor`).
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import partial
from typing import Any

from ctxd.agents.opencode_family import config, doctor, install
from ctxd.agents.opencode_family.compaction import compaction_point, threshold_point
from ctxd.agents.opencode_family.digest import session_digest
from ctxd.agents.opencode_family.export import ExportReader
from ctxd.agents.opencode_family.family import Family
from ctxd.agents.opencode_family.files import FamilyFiles
from ctxd.agents.opencode_family.hooks import DIALECT
from ctxd.agents.opencode_family.store import OpenCodeStore, database_path, problem, recognises
from ctxd.agents.reader import NO_FACTS, FactListener
from ctxd.agents.settings_file import settings_reader
from ctxd.agents.spec import AgentSpec, Installer
from ctxd.agents.store import SessionStore
from ctxd.core.compaction import for_agent

__all__ = ["Family", "family_spec"]


def _open_reader(
    path: str | None, facts: FactListener = NO_FACTS, *, usage: bool = True
) -> ExportReader:
    # No digest is read from an export: the handoff reads a session's from the database.
    return ExportReader(path)


def _open_store(path: str, position: Mapping[str, Any] | None = None) -> OpenCodeStore:
    return OpenCodeStore(path, position)


def family_spec(family: Family) -> AgentSpec:
    """The `AgentSpec` of the family member `family` declares."""
    rule = threshold_point if family.threshold_percent else compaction_point
    return AgentSpec(
        name=family.name,
        title=family.title,
        dialect=DIALECT,
        files=FamilyFiles(family),
        open_reader=_open_reader,
        compaction=for_agent(family.name, rule),
        installer=Installer(
            settings_path=partial(install.settings_path, family),
            install=partial(install.install, family),
            uninstall=partial(install.uninstall, family),
            checks=partial(install.checks, family),
            plugin=True,
            plugin_run=partial(doctor.plugin_run, family),
        ),
        settings_files=partial(config.settings_files, family),
        read_settings=settings_reader(config.settings_config),
        configured_window=config.configured_window,
        store=SessionStore(
            path=partial(database_path, family),
            open=_open_store,
            recognises=partial(recognises, own_tables=family.own_tables),
            digest=session_digest,
            problem=problem,
        ),
    )
