"""Kimi Code: ctxd's hooks as `[[hooks]]` tables in `$KIMI_CODE_HOME/config.toml`.

config.toml is the user's whole configuration (providers, keys, models), in TOML, which Python
can read but not rewrite while keeping its comments and layout. So ctxd never rewrites the
user's text: its hooks go in one block of its own at the end of the file, between two marker
comments, and uninstall removes that block and nothing else. The parsed document is what
install and uninstall transform (`hooks` gains or loses ctxd's entries); `render` writes the
user's text as it was, byte for byte, plus a newline and the block for ctxd's entries, and
refuses a result that does not parse back to that document (a config whose `hooks` is an inline
array, say).
"""

from __future__ import annotations

import json
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ctxd.agents.hookcmd import is_ctxd_command
from ctxd.agents.kimi.files import kimi_home
from ctxd.agents.spec import Check, Json
from ctxd.errors import SettingsFileError
from ctxd.untrusted import read_untrusted

__all__ = [
    "EVENTS",
    "checks",
    "install",
    "parse",
    "render",
    "settings_path",
    "statusline_checks",
    "uninstall",
    "without_block",
]

#: Seconds (Kimi's unit; it waits 30 by default).
TIMEOUT = 10
#: The events ctxd needs: the prompt (its context reaches the model), the Stop it may block,
#: tool calls (the debounce counts them), the compaction and the session's ends.
EVENTS = (
    "SessionStart",
    "UserPromptSubmit",
    "PostToolUse",
    "PostToolUseFailure",
    "Stop",
    "PostCompact",
    "SessionEnd",
)
TUI_FILE = "tui.toml"
BEGIN = "# >>> ctxd hooks (ctxd install kimi; ctxd uninstall kimi removes this block) >>>"
END = "# <<< ctxd hooks <<<"
#: What uninstall leaves of a config.toml that held ctxd's hooks alone (ctxd created it).
EMPTIED = "# Kimi Code's config (ctxd's hooks were removed: ctxd uninstall kimi)\n"


def settings_path(env: Mapping[str, str]) -> Path:
    """`$KIMI_CODE_HOME/config.toml`, else `~/.kimi-code/config.toml`."""
    return kimi_home(env) / "config.toml"


def parse(text: str | None, path: Path) -> Json:
    """config.toml's text as a document ({} for no file); SettingsFileError when it is not
    TOML."""
    if text is None:
        return {}
    try:
        return tomllib.loads(text)
    except (tomllib.TOMLDecodeError, RecursionError) as exc:
        raise SettingsFileError(f"{path} is not valid TOML: {exc}") from None


def _is_ours(hook: object) -> bool:
    return isinstance(hook, dict) and is_ctxd_command(hook.get("command"))


def _hooks(doc: Mapping[str, Any]) -> list[Any]:
    hooks = doc.get("hooks")
    return list(hooks) if isinstance(hooks, list) else []


def install(doc: Json, command: str) -> Json:
    """`doc` with one ctxd hook per event in `EVENTS` after the user's own (an earlier ctxd
    hook is replaced)."""
    if "hooks" in doc and not isinstance(doc["hooks"], list):
        raise SettingsFileError("config.toml's `hooks` is not a list of tables: left alone")
    ours = [{"event": e, "command": command, "timeout": TIMEOUT} for e in EVENTS]
    return {**doc, "hooks": [h for h in _hooks(doc) if not _is_ours(h)] + ours}


def uninstall(doc: Json) -> Json:
    """`doc` without ctxd's hooks (no `hooks` at all when none is left)."""
    if "hooks" not in doc:
        return doc
    kept = [h for h in _hooks(doc) if not _is_ours(h)]
    new = {k: v for k, v in doc.items() if k != "hooks"}
    return {**new, "hooks": kept} if kept else new


def without_block(text: str, begin_mark: str = BEGIN, end_mark: str = END) -> str:
    """`text` without ctxd's blocks (from a `begin_mark` line to an `end_mark` line) and the
    one newline `render` put before each: the user's text exactly as it was (a block someone
    edited into pieces goes line by line)."""
    while True:
        begin = text.find(begin_mark)
        end = text.find(end_mark, begin) if begin >= 0 else -1
        if begin < 0 or end < 0:
            return text
        end += len(end_mark)
        if text.startswith("\n", end):
            end += 1
        if begin > 0 and text[begin - 1] == "\n":
            begin -= 1
        text = text[:begin] + text[end:]


def _block(hooks: list[Any]) -> str:
    tables = []
    for hook in hooks:
        rows = [f"{key} = {json.dumps(value)}" for key, value in hook.items()]
        tables.append("[[hooks]]\n" + "\n".join(rows) + "\n")
    return f"{BEGIN}\n" + "\n".join(tables) + f"{END}\n"


def render(doc: Json, like: str | None) -> str:
    """The user's text (`like`) without ctxd's old block, plus a block for ctxd's hooks in
    `doc`; SettingsFileError when that text would not read back as `doc`."""
    base = without_block(like or "")
    ours = [h for h in _hooks(doc) if _is_ours(h)]
    text = base + ("\n" if base and ours else "") + (_block(ours) if ours else "")
    if not text.strip():  # a file that held ctxd's hooks alone: an empty one would be refused
        text = EMPTIED
    try:
        back = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise SettingsFileError(
            f"ctxd's [[hooks]] cannot be added to config.toml as it is ({exc}): add them by hand"
        ) from None
    if back != doc:
        raise SettingsFileError(
            "config.toml has ctxd hooks outside ctxd's block, or a `hooks` that is not "
            "[[hooks]] tables: edit it by hand"
        )
    return text


def checks(doc: Json) -> list[Check]:
    """`ctxd doctor`'s line when ctxd's hooks in config.toml miss an event it needs."""
    have = {h.get("event") for h in _hooks(doc) if _is_ours(h)}
    missing = [e for e in EVENTS if e not in have]
    if not have or not missing:
        return []
    return [
        Check(
            "kimi hook events",
            False,
            f"ctxd's hooks miss {', '.join(missing)}",
            "run `ctxd install kimi` again",
        )
    ]


def statusline_checks(doc: Json, path: Path) -> list[Check]:
    """`ctxd doctor`'s line on Kimi's status line: `[status_line] command` in the tui.toml
    beside config.toml (`path`), where `ctxd install kimi` puts ctxd's (`tui.py`)."""
    tui = path.parent / TUI_FILE
    name = "kimi statusline"
    fix = "`ctxd install kimi` sets it"
    try:
        table = tomllib.loads(read_untrusted(tui).decode("utf-8")).get("status_line")
    except FileNotFoundError:
        return [Check(name, True, f"{tui} does not exist: Kimi shows its own footer", fix, True)]
    except (OSError, ValueError, RecursionError) as exc:  # TOMLDecodeError, UnicodeDecodeError
        return [Check(name, False, f"{tui} cannot be read: {exc}", "fix the file by hand")]
    command = table.get("command") if isinstance(table, dict) else None
    if isinstance(command, str) and is_ctxd_command(command):
        return [Check(name, True, f"{tui} runs ctxd's status line")]
    if isinstance(command, str) and command.strip():
        detail = f"{tui} runs the user's own status line command: left alone"
        return [Check(name, True, detail, skipped=True)]
    return [Check(name, True, f"{tui} sets no status line command", fix, True)]
