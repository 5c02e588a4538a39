"""Cline CLI: everything ctxd knows about it, as one `AgentSpec`."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from ctxd.agents.cline import files, install
from ctxd.agents.cline.compaction import (
    LEAD,
    compaction_point,
    configured_window,
    settings_config,
)
from ctxd.agents.cline.digest import ClineFacts
from ctxd.agents.cline.hooks import DIALECT
from ctxd.agents.cline.transcript import ClineReader
from ctxd.agents.reader import NO_FACTS, FactListener
from ctxd.agents.settings_file import settings_reader
from ctxd.agents.spec import AgentSpec, Installer
from ctxd.core.compaction import for_agent

__all__ = ["SPEC"]

NAME = "cline"


def _open_reader(
    path: str | None, facts: FactListener = NO_FACTS, *, usage: bool = True
) -> ClineReader:
    return ClineReader(path, facts, usage)


def _open_facts(path: str | None) -> ClineFacts:
    return ClineFacts()


def _settings_files(env: Mapping[str, str], cwd: str | None) -> tuple[Path, ...]:
    settings = files.data_dir(env) / "settings"
    return (settings / "providers.json", settings / "global-settings.json")


def _implied_transcript(session_id: str, env: Mapping[str, str]) -> str | None:
    # Cline's hooks name the session, never its file: its layout puts it by the id.
    return files.messages_path(session_id, env)


SPEC = AgentSpec(
    name=NAME,
    title="Cline CLI",
    dialect=DIALECT,
    files=files,
    open_reader=_open_reader,
    compaction=for_agent(NAME, compaction_point),
    compaction_lead=LEAD,
    installer=Installer(
        settings_path=install.settings_path,
        install=install.install,
        uninstall=install.uninstall,
        edits_settings=False,
        files=install.files,
    ),
    config_env=files.FOLDER_ENV,
    settings_files=_settings_files,
    read_settings=settings_reader(settings_config),
    configured_window=configured_window,
    implied_transcript=_implied_transcript,
    open_facts=_open_facts,
    version_command=("cline", "--version"),
)
