"""pi (`@earendil-works/pi-coding-agent`, 1.x; `@mariozechner/pi-coding-agent` up to 0.73.1):
everything ctxd knows about it, as one `AgentSpec`."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from types import MappingProxyType

from ctxd.agents.models import sizes_of
from ctxd.agents.models import windows as model_windows
from ctxd.agents.pi import files, install
from ctxd.agents.pi.compaction import compaction_point, settings_config
from ctxd.agents.pi.digest import PiFacts
from ctxd.agents.pi.hooks import DIALECT
from ctxd.agents.pi.models import MODELS
from ctxd.agents.pi.transcript import PiReader
from ctxd.agents.reader import NO_FACTS, FactListener
from ctxd.agents.settings_file import settings_reader
from ctxd.agents.spec import AgentSpec, Installer, InstallRequest, Json
from ctxd.core.compaction import for_agent

__all__ = ["SPEC"]

NAME = "pi"


def _open_reader(
    path: str | None, facts: FactListener = NO_FACTS, *, usage: bool = True
) -> PiReader:
    return PiReader(facts)  # its usage work is done either way


def _open_facts(path: str | None) -> PiFacts:
    return PiFacts()


def _settings_files(env: Mapping[str, str], cwd: str | None) -> tuple[Path, ...]:
    # The user's settings, then the project's, which outrank them.
    user = install.settings_path(env)
    return (user, Path(cwd) / ".pi" / "settings.json") if cwd else (user,)


def _install(doc: Json, request: InstallRequest) -> tuple[Json, tuple[str, ...]]:
    return install.install(doc, install.extension_path())


def _uninstall(doc: Json, request: InstallRequest) -> tuple[Json, tuple[str, ...]]:
    return install.uninstall(doc)


SPEC = AgentSpec(
    name=NAME,
    title="pi coding agent",
    dialect=DIALECT,
    files=files,
    open_reader=_open_reader,
    compaction=for_agent(NAME, compaction_point),
    installer=Installer(
        settings_path=install.settings_path,
        install=_install,
        uninstall=_uninstall,
        checks=install.checks,
        plugin=True,
    ),
    windows=MappingProxyType(model_windows(MODELS)),
    window_sizes=sizes_of(MODELS),
    config_env=("PI_CODING_AGENT_DIR",),
    settings_files=_settings_files,
    read_settings=settings_reader(settings_config),
    open_facts=_open_facts,
)
