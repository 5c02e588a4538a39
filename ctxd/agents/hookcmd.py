"""The exact command line an agent runs for a ctxd hook, and how to recognise one.

Hooks run on every tool call, so the command skips everything that costs start-up time: it names
the real interpreter (no shim, no console-script wrapper), runs with `-S -I` (no site import, no
user site, no environment-driven paths, not the agent's cwd on sys.path) and *imports* the
one-file client from its directory rather than running it as a script: a script is compiled on
every run, an imported module comes from its cached bytecode (docs/benchmarks.md).
"""

from __future__ import annotations

import importlib.util
import json
import os
import shlex
import sys
from pathlib import Path

from ctxd.errors import CtxdError

CLIENT_MODULE = "ctxd_hook"
CLIENT_SCRIPT = "ctxd-hook"

__all__ = [
    "CLIENT_MODULE",
    "build_command",
    "client_path",
    "hook_command",
    "interpreter",
    "is_ctxd_command",
    "real_interpreter",
]


def client_path() -> Path:
    """Where the installed `ctxd_hook.py` is; `CtxdError` when it cannot be found."""
    spec = importlib.util.find_spec(CLIENT_MODULE)
    if spec is None or not spec.origin or not spec.origin.endswith(".py"):
        raise CtxdError(
            f"the hook client module {CLIENT_MODULE!r} is not importable; reinstall ctxd"
        )
    return Path(spec.origin).absolute()


def real_interpreter(executable: str, prefix: str, version: tuple[int, int]) -> str:
    """The interpreter path to write into hooks, given `sys.executable`-like values.

    A pyenv (or asdf) shim is a shell script that re-resolves the version on every call, which
    costs tens of milliseconds and can pick another Python in another directory; it is replaced
    by the binary under `prefix`. Anything else, a venv's `bin/python` included, is kept as is:
    resolving a venv's symlink would lose the venv's site-packages.
    """
    path = Path(executable)
    if path.parent.name == "shims":
        major, minor = version
        for name in (f"python{major}.{minor}", f"python{major}", "python"):
            candidate = Path(prefix) / "bin" / name
            if candidate.exists():
                return str(candidate)
    return executable


def interpreter() -> str:
    """The real interpreter running ctxd now (see `real_interpreter`)."""
    executable = sys.executable or sys._base_executable  # type: ignore[attr-defined]
    if not executable:
        raise CtxdError("cannot tell which Python interpreter runs ctxd (sys.executable is empty)")
    return real_interpreter(
        os.path.abspath(executable), sys.base_prefix, (sys.version_info[0], sys.version_info[1])
    )


def build_command(python: str, client: Path | str, agent: str, event: str | None = None) -> str:
    """`<python> -S -I -c '<import the client from its dir; main()>' <agent> [event]`, quoted."""
    directory = str(Path(client).parent)
    module = Path(client).stem
    # A JSON string is a valid Python string literal, and its double quotes keep the shell
    # quoting around the whole snippet readable.
    code = f"import sys;sys.path[:0]=[{json.dumps(directory)}];import {module} as h;h.main()"
    parts = [python, "-S", "-I", "-c", code, agent]
    if event is not None:
        parts.append(event)
    return shlex.join(parts)


def hook_command(agent: str, event: str | None = None) -> str:
    """The command ctxd installs for `agent` (and `event`, e.g. "statusline"), for this install."""
    return build_command(interpreter(), client_path(), agent, event)


def is_ctxd_command(command: object) -> bool:
    """Whether a hook command is one ctxd installed: it runs `ctxd_hook.py` or `ctxd-hook`.

    Matches on the client's file or script name only, so a command survives a move of the
    interpreter or of the virtualenv and is still found (and replaced) by the next install.
    """
    if not isinstance(command, str):
        return False
    try:
        words = shlex.split(command)
    except ValueError:
        words = command.split()
    for word in words:
        name = word.replace("\\", "/").rsplit("/", 1)[-1]
        if name in (f"{CLIENT_MODULE}.py", CLIENT_SCRIPT) or f"import {CLIENT_MODULE} " in word:
            return True
    return False
