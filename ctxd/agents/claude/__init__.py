"""Claude Code: everything ctxd knows about it, as one `AgentSpec`."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from types import MappingProxyType

from ctxd.agents.claude import files, install
from ctxd.agents.claude.compaction import (
    CONFIG_ENV,
    CONFIG_KEYS,
    compact_window,
    compaction_point,
    settings_config,
)
from ctxd.agents.claude.digest import ClaudeFacts
from ctxd.agents.claude.hooks import DIALECT
from ctxd.agents.claude.idle import compacts_at_resume, idle_compaction_at
from ctxd.agents.claude.models import MODELS
from ctxd.agents.claude.statusline import parse_statusline
from ctxd.agents.claude.transcript import ClaudeReader
from ctxd.agents.hookcmd import is_ctxd_command, plugin_command, unwrap_command
from ctxd.agents.models import windows as model_windows
from ctxd.agents.reader import NO_FACTS, FactListener
from ctxd.agents.settings_file import settings_reader
from ctxd.agents.spec import (
    AgentSpec,
    Check,
    Installer,
    InstallRequest,
    Json,
    Packaged,
    Statusline,
)
from ctxd.agents.statusline import render_figures
from ctxd.core.compaction import for_agent

__all__ = ["SPEC"]

NAME = "claude"


def _open_reader(
    path: str | None, facts: FactListener = NO_FACTS, *, usage: bool = True
) -> ClaudeReader:
    return ClaudeReader(path is not None and files.is_subagent_path(path), facts, usage)


def _open_facts(path: str | None) -> ClaudeFacts:
    return ClaudeFacts()


def _settings_files(env: Mapping[str, str], cwd: str | None) -> tuple[Path, ...]:
    # Claude Code's settings, lowest precedence first: user, project, local (managed settings
    # outrank them all).
    user = install.settings_path(env)
    if not cwd:
        return (user, _MANAGED)
    project = Path(cwd) / ".claude"
    return (user, project / "settings.json", project / "settings.local.json", _MANAGED)


_MANAGED = Path("/etc/claude-code/managed-settings.json")


def _install(doc: Json, request: InstallRequest) -> tuple[Json, tuple[str, ...]]:
    return install.install(
        doc,
        request.command(None),
        request.command("statusline"),
        statusline=request.statusline,
        http_url=request.http_url,
        version=request.agent_version,
    )


def _uninstall(doc: Json, request: InstallRequest) -> tuple[Json, tuple[str, ...]]:
    return install.uninstall(doc)


def _packaged(doc: Json, path: Path) -> Packaged | None:
    key = install.enabled_plugin(doc)
    return None if key is None else Packaged("plugin", key, plugin_command(NAME))


def _statusline_check(doc: Json) -> list[Check]:
    line = doc.get("statusLine")
    command = line.get("command") if isinstance(line, dict) else None
    ours = is_ctxd_command(command)
    foreign = unwrap_command(command)
    if foreign is not None:
        return [Check("claude statusline", True, f"your own `{foreign}`, run by ctxd's client")]
    # Keeping one's own statusline is a choice, not a fault: ctxd's hooks work without it.
    return [
        Check(
            "claude statusline",
            ours,
            "ctxd's line" if ours else f"your own: `{command}`" if command else "none set",
            None if ours else "`ctxd install claude --statusline` to show ctxd's line",
            skipped=not ours,
        )
    ]


SPEC = AgentSpec(
    name=NAME,
    title="Claude Code",
    dialect=DIALECT,
    files=files,
    open_reader=_open_reader,
    compaction=for_agent(NAME, compaction_point),
    config_keys=CONFIG_KEYS,
    installer=Installer(
        settings_path=install.settings_path,
        install=_install,
        uninstall=_uninstall,
        checks=_statusline_check,
        http_hooks=True,
        packaged=_packaged,
    ),
    parent_transcript=files.parent_transcript,
    subagent_transcript=files.subagent_transcript,
    statusline=Statusline(parse=parse_statusline, render=render_figures),
    windows=MappingProxyType(model_windows(MODELS)),
    # CLAUDE_CONFIG_DIR too: it says where the user's settings.json is.
    config_env=(*CONFIG_ENV, "CLAUDE_CONFIG_DIR"),
    settings_files=_settings_files,
    read_settings=settings_reader(settings_config),
    open_facts=_open_facts,
    idle_compaction=idle_compaction_at,
    version_command=("claude", "--version"),
    compact_window=compact_window,
    resume_compaction=compacts_at_resume,
)
