"""Qwen Code: everything ctxd knows about it, as one `AgentSpec`."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from types import MappingProxyType

from ctxd.agents.qwen import files, install
from ctxd.agents.qwen.compaction import WINDOWS, compaction_point, settings_config
from ctxd.agents.qwen.hooks import DIALECT
from ctxd.agents.qwen.transcript import QwenReader
from ctxd.agents.reader import NO_FACTS, FactListener
from ctxd.agents.settings_file import settings_reader
from ctxd.agents.spec import AgentSpec, Installer, InstallRequest, Json
from ctxd.core.compaction import for_agent

__all__ = ["SPEC"]

NAME = "qwen"


def _open_reader(
    path: str | None, facts: FactListener = NO_FACTS, *, usage: bool = True
) -> QwenReader:
    return QwenReader(facts)  # it keeps no digest: usage is all it does


def _settings_files(env: Mapping[str, str], cwd: str | None) -> tuple[Path, ...]:
    # User settings, then the workspace's, which outrank them.
    user = install.settings_path(env)
    return (user, Path(cwd) / ".qwen" / "settings.json") if cwd else (user,)


def _install(doc: Json, request: InstallRequest) -> tuple[Json, tuple[str, ...]]:
    return install.install(doc, request.command(None), request.http_url)


def _uninstall(doc: Json, request: InstallRequest) -> tuple[Json, tuple[str, ...]]:
    return install.uninstall(doc)


SPEC = AgentSpec(
    name=NAME,
    title="Qwen Code",
    dialect=DIALECT,
    files=files,
    open_reader=_open_reader,
    compaction=for_agent(NAME, compaction_point),
    installer=Installer(
        settings_path=install.settings_path,
        install=_install,
        uninstall=_uninstall,
        checks=install.checks,
        http_hooks=True,
    ),
    windows=MappingProxyType(dict(WINDOWS)),
    settings_files=_settings_files,
    read_settings=settings_reader(settings_config),
)
