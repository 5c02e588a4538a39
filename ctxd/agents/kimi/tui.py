"""Kimi Code's status line: ctxd's command as `[status_line] command` in `tui.toml`, the file
beside config.toml that holds Kimi's UI settings (2.1.0: `status_line.command`, run with `sh -c`,
its payload on stdin, its first line shown).

The companion of the config.toml install (`install.py`), by the same rules: the user's text is
never rewritten. With no `[status_line]` table ctxd appends one in a block between two marker
comments; in a `[status_line]` table of the user's that sets no command it adds one line, marked
by a trailing comment; a command of the user's own is wrapped, as `ctxd install claude` does
(`hookcmd.wrap_command`: ctxd's client runs it, Kimi shows its line as it was, and the payload
reaches ctxd too), on the user's line, which the comment after it keeps as it was. Uninstall
removes exactly what install added.
"""

from __future__ import annotations

import json
import re
import tomllib
from pathlib import Path
from typing import Any

from ctxd.agents.hookcmd import is_ctxd_command, unwrap_command, wrap_command
from ctxd.agents.kimi.install import without_block
from ctxd.agents.spec import InstallRequest, Json
from ctxd.errors import SettingsFileError

__all__ = ["TUI_FILE", "install", "render", "tui_path", "uninstall"]

TUI_FILE = "tui.toml"
BEGIN = "# >>> ctxd status line (ctxd uninstall kimi removes this block) >>>"
END = "# <<< ctxd status line <<<"
LINE_MARK = "# ctxd (ctxd uninstall kimi removes this line)"
#: After ctxd's command that wraps the user's own, on the user's line: the line as it was.
WRAP_MARK = "# ctxd runs your status line in this one; ctxd uninstall kimi puts back: "
_COMMAND = re.compile(r"^[ \t]*command[ \t]*=")
_ANY_HEADER = re.compile(r"^[ \t]*\[")
_HEADER = re.compile(r"^[ \t]*\[[ \t]*status_line[ \t]*\][ \t]*(#.*)?$", re.MULTILINE)


def tui_path(config_path: Path) -> Path:
    """tui.toml, beside config.toml."""
    return config_path.parent / TUI_FILE


def _table(doc: Json) -> Any:
    return doc.get("status_line")


def install(doc: Json, request: InstallRequest) -> tuple[Json, tuple[str, ...]]:
    """`doc` with ctxd's status line command, unless the user has a command of their own."""
    ours = request.command("statusline")
    table = _table(doc)
    if table is not None and not isinstance(table, dict):
        return doc, (f"{request.path.parent / TUI_FILE}'s status_line is not a table: left alone",)
    command = table.get("command") if table else None
    foreign = unwrap_command(command)
    if isinstance(command, str) and command.strip() and not is_ctxd_command(command):
        foreign = command
    if foreign is not None:
        # Kimi runs one command: ctxd's client runs the user's, whose line Kimi shows as it
        # was, and hands the payload to ctxd too.
        note = (
            f"{request.path.parent / TUI_FILE}: your own status line command still draws the "
            "line, run by ctxd's client, which hands its payload to ctxd"
        )
        wrapped = wrap_command(ours, foreign)
        return {**doc, "status_line": {**(table or {}), "command": wrapped}}, (note,)
    return {**doc, "status_line": {**(table or {}), "command": ours}}, ()


def uninstall(doc: Json, request: InstallRequest) -> tuple[Json, tuple[str, ...]]:
    """`doc` without ctxd's status line command (and without a table left empty)."""
    table = _table(doc)
    if not isinstance(table, dict) or not is_ctxd_command(table.get("command")):
        return doc, ()
    foreign = unwrap_command(table.get("command"))
    if foreign is not None:
        return {**doc, "status_line": {**table, "command": foreign}}, ()
    rest = {k: v for k, v in table.items() if k != "command"}
    out = {k: v for k, v in doc.items() if k != "status_line"}
    return ({**out, "status_line": rest} if rest else out), ()


def _without_ours(text: str) -> str:
    text = without_block(text, BEGIN, END)
    out = []
    for line in text.splitlines(keepends=True):
        if line.rstrip().endswith(LINE_MARK):
            continue
        at = line.find(WRAP_MARK)
        if at >= 0:  # the user's own line, as it was
            line = line[at + len(WRAP_MARK) :]
        out.append(line)
    return "".join(out)


def _wrap_line(text: str, command: str) -> str:
    """`text` with the user's `command = ...` line of its [status_line] table replaced by
    ctxd's wrapping `command`, the user's line kept after `WRAP_MARK`."""
    header = _HEADER.search(text)
    if header is None:
        return text  # the render's check refuses what cannot be read back
    offset = text.find("\n", header.end())
    while offset >= 0:
        start = offset + 1
        end = text.find("\n", start)
        line = text[start:] if end < 0 else text[start:end]
        if _ANY_HEADER.match(line):
            break
        if _COMMAND.match(line):
            ours = f"command = {json.dumps(command)}  {WRAP_MARK}{line}"
            return text[:start] + ours + text[start + len(line) :]
        offset = end
    return text


def _normal(doc: Json) -> Json:
    # An empty [status_line] table and none at all say the same to Kimi.
    return {k: v for k, v in doc.items() if not (k == "status_line" and v == {})}


def render(doc: Json, like: str | None) -> str:
    """The user's text (`like`) without what ctxd added, plus ctxd's command in `doc`, if any;
    SettingsFileError when that text would not read back as `doc`."""
    base = _without_ours(like or "")
    table = _table(doc)
    command = table.get("command") if isinstance(table, dict) else None
    text = base
    if isinstance(command, str) and unwrap_command(command) is not None:
        text = _wrap_line(base, command)
    elif is_ctxd_command(command):
        line = f"command = {json.dumps(command)}"
        header = _HEADER.search(base)
        if header is not None:
            at = base.find("\n", header.end())
            at = len(base) if at < 0 else at + 1
            text = base[:at] + f"{line}  {LINE_MARK}\n" + base[at:]
        else:
            block = f"{BEGIN}\n[status_line]\n{line}\n{END}\n"
            text = base + ("\n" if base else "") + block
    try:
        back = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise SettingsFileError(
            f"ctxd's status line cannot be added to {TUI_FILE} as it is ({exc}): add it by hand"
        ) from None
    if _normal(back) != _normal(doc):
        raise SettingsFileError(
            f"{TUI_FILE} sets its status line in a way ctxd does not edit: add it by hand"
        )
    return text if text.strip() else "# Kimi Code's UI settings (ctxd's status line removed)\n"
