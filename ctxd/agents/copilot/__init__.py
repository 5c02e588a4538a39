"""GitHub Copilot CLI: everything ctxd knows about it, as one `AgentSpec`.

Its figures: each model request's usage is in its events file (`session.usage_record`, exact
figures from the provider) and the statusline payload (interactive UI only); hooks name the
session by id alone, and `implied_transcript` finds its events file from it.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from ctxd.agents.copilot import files, install
from ctxd.agents.copilot.compaction import compaction_point
from ctxd.agents.copilot.hooks import DIALECT
from ctxd.agents.copilot.statusline import parse_statusline, render_figures
from ctxd.agents.copilot.transcript import CopilotReader
from ctxd.agents.reader import NO_FACTS, FactListener
from ctxd.agents.spec import AgentSpec, Installer, InstallRequest, Json, Statusline
from ctxd.core.compaction import for_agent

__all__ = ["SPEC"]

NAME = "copilot"


def _open_reader(
    path: str | None, facts: FactListener = NO_FACTS, *, usage: bool = True
) -> CopilotReader:
    return CopilotReader(facts)  # it keeps no digest: usage is all it does


def _settings_files(env: Mapping[str, str], cwd: str | None) -> tuple[Path, ...]:
    return (install.settings_path(env),)


def _install(doc: Json, request: InstallRequest) -> tuple[Json, tuple[str, ...]]:
    return install.install(
        doc, request.command, request.command("statusline"), statusline=request.statusline
    )


def _uninstall(doc: Json, request: InstallRequest) -> tuple[Json, tuple[str, ...]]:
    return install.uninstall(doc)


SPEC = AgentSpec(
    name=NAME,
    title="Copilot CLI",
    dialect=DIALECT,
    files=files,
    open_reader=_open_reader,
    compaction=for_agent(NAME, compaction_point),
    installer=Installer(
        settings_path=install.settings_path,
        install=_install,
        uninstall=_uninstall,
        checks=install.checks,
    ),
    statusline=Statusline(parse=parse_statusline, render=render_figures),
    settings_files=_settings_files,
    implied_transcript=files.implied_transcript,
    # Where its session-state lives: a hook names only the session id, so the daemon finds
    # the events file under the agent's own home, not its own.
    config_env=("COPILOT_HOME",),
)
