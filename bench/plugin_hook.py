"""What one PostToolUse hook of the Claude Code plugin costs, against the command `ctxd install`
writes, each run the way the agents run a hook command: through a shell (`/bin/sh -c` is Claude
Code's, Gemini CLI's is `bash -c`).

  - `ctxd install`'s command: the base interpreter, `-S -I`, importing the per-user copy of the
    client (`ctxd.agents.hookcmd.hook_command`);
  - the plugin's command, `ctxd-hook claude`: the console script, found on PATH (the venv's bin
    dir first, as a pip user's shell has it); its wrapper imports `re` and runs with `site`;
  - the same call as a plain `#!python` script (what installers write for a wheel's scripts),
    which imports no `re`;
  - a candidate plugin command (`candidate`) that runs the per-user copy when there is one (with
    the interpreter its `ctxd-command` file names, `-S -I`) and `ctxd-hook` otherwise: with the
    copy, and without it (the fallback).

The same real PostToolUse payload and transcript as hook_roundtrip.py; a real daemon answers
every run (checked). Commands are interleaved round by round; CPU is user + system from wait4
(the shell and what it execs).

    .venv/bin/python bench/plugin_hook.py [--runs 100]
"""

from __future__ import annotations

import argparse
import os
import shlex
import shutil
import sys
from pathlib import Path

import common as c
from hook_roundtrip import SESSION_ID, Command, run_interleaved


def candidate(agent: str) -> str:
    """A plugin hook command that prefers the per-user copy of the client (`ctxd install`'s,
    kept in step by every ctxd run) to the console script. POSIX sh; the copy's directory goes
    to the client as an argument, never into the code, so any path works."""
    code = "import sys;sys.path[:0]=[sys.argv.pop(1)];import ctxd_hook as h;h.main()"
    return (
        'd="${XDG_DATA_HOME:-$HOME/.local/share}/ctxd/client"; '
        'if [ -f "$d/ctxd_hook.py" ] && IFS= read -r p < "$d/ctxd-command" && [ -x "$p" ]; '
        f'then exec "$p" -S -I -c \'{code}\' "$d" {agent}; fi; exec ctxd-hook {agent}'
    )


FLOOR = "floor: sh -c 'python3 -S -I -c pass'"
INSTALLED = "ctxd install's command"
PLUGIN = "plugin now: ctxd-hook claude"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=100)
    parser.add_argument("--warmup", type=int, default=10)
    args = parser.parse_args()

    from ctxd.agents.hookcmd import hook_command, install_client

    bin_dir = Path(c.PYTHON).parent
    if not (bin_dir / "ctxd-hook").exists():
        parser.error(f"no ctxd-hook beside {c.PYTHON}: pip install -e . into this venv")
    sh = shutil.which("sh") or "/bin/sh"
    c.header("Plugin hook command (PostToolUse)", shlex.join([c.PYTHON, *sys.argv]))

    with c.sandbox("plugin") as box:
        with_copy = str(box.root / "data-with-copy")
        without = str(box.root / "data-without-copy")
        os.makedirs(without)
        install_client({**box.env, "XDG_DATA_HOME": with_copy})
        installed = hook_command("claude", env={**box.env, "XDG_DATA_HOME": with_copy})
        box.env["PATH"] = f"{bin_dir}{os.pathsep}{box.env.get('PATH', '/usr/bin:/bin')}"
        cwd = str(box.root / "work")
        transcript = c.place_claude_transcript(
            box, c.CLAUDE_TRANSCRIPT.read_bytes(), SESSION_ID, cwd
        )
        payload = box.root / "post-tool-use.json"
        payload.write_bytes(c.claude_payload(SESSION_ID, transcript, cwd))
        # what pip writes for a `#!python` script shipped as is (a wheel's scripts), rather than
        # for an entry point: the same call, without the wrapper's `import re`
        bare = box.root / "bin" / "ctxd-hook"
        bare.parent.mkdir()
        bare.write_text(f"#!{c.PYTHON}\nimport sys\nfrom ctxd_hook import main\nsys.exit(main())\n")
        bare.chmod(0o755)
        commands = [
            Command(FLOOR, [sh, "-c", f"{shlex.quote(c.REAL_PYTHON)} -S -I -c pass"]),
            Command(INSTALLED, [sh, "-c", installed], payload),
            Command(PLUGIN, [sh, "-c", "ctxd-hook claude"], payload),
            Command(
                "ctxd-hook as a bare #!python script (no `re`)",
                [sh, "-c", "ctxd-hook claude"],
                payload,
                {"PATH": f"{bare.parent}{os.pathsep}{box.env['PATH']}"},
            ),
            Command(
                "candidate, copy present",
                [sh, "-c", candidate("claude")],
                payload,
                {"XDG_DATA_HOME": with_copy},
            ),
            Command(
                "candidate, no copy (ctxd-hook)",
                [sh, "-c", candidate("claude")],
                payload,
                {"XDG_DATA_HOME": without},
            ),
        ]
        hooks = len(commands) - 1
        with c.running_daemon(box):
            before = c.status(box)["hooks_answered"]
            times = run_interleaved(commands, box.env, args.runs, args.warmup)
            answered = c.status(box)["hooks_answered"] - before
    walls = {name: c.summarize(t.wall_ms) for name, t in times.items()}
    cpus = {name: c.summarize(t.cpu_ms) for name, t in times.items()}
    rows = [
        [
            cmd.name,
            walls[cmd.name].p50,
            walls[cmd.name].p95,
            cpus[cmd.name].mean,
            cpus[cmd.name].p50,
            f"{cpus[cmd.name].p50 / cpus[INSTALLED].p50:.2f}×",
        ]
        for cmd in commands
    ]
    print(
        c.table(
            [
                "command (via sh -c)",
                "wall p50 ms",
                "wall p95 ms",
                "CPU ms mean",
                "CPU ms p50",
                "CPU × install's",
            ],
            rows,
        )
    )
    expected = (args.runs + args.warmup) * hooks
    ok = answered == expected
    print(
        f"\nevery timed hook was answered by the daemon: {answered} of {expected}, {c.verdict(ok)}"
    )
    print("\ncommands:")
    for cmd in commands:
        print(f"  {cmd.name}: {cmd.shell()}")
    c.save_json(
        "plugin_hook",
        {
            "machine": c.machine(),
            "runs": args.runs,
            "commands": {cmd.name: cmd.shell() for cmd in commands},
            "wall_ms": {n: t.wall_ms for n, t in times.items()},
            "cpu_ms": {n: t.cpu_ms for n, t in times.items()},
            "answered": answered,
        },
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
