"""`ctxd VERB ...`: the command line. The only module that prints.

Every verb is a function `(args) -> exit code`; a `CtxdError` anywhere becomes one line on
stderr and that error's exit code.

Each verb imports what it needs when it runs, and its arguments are defined only when it is the
verb parsed (`VERBS`): `ctxd status` and `ctxd watch`, run often and by hand, import the
client's round trip alone (the daemon renders what they print), never the agent registry, the
daemon, json or orjson (tests/cli/test_cli_imports.py). `ctxd status`, which pollers run, and
`ctxd line` are read without argparse when their words are the usual ones (`main`), so this
module does not import it; the `ctxd` entry point sends the first straight to the daemon
(clients/ctxd_status.py), without importing this module at all.
"""

from __future__ import annotations

import os
import sys
import time

from ctxd import __version__
from ctxd.errors import CtxdError, InvalidInput

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing (and argparse, see `main`) costs start-up time; the checker needs it
    import argparse
    from collections.abc import Callable, Iterator, Sequence
    from pathlib import Path
    from typing import Any

    from ctxd.cli.install import Plan

    Verb = Callable[[argparse.Namespace], int]


def _print(line: str = "") -> None:
    sys.stdout.write(line + "\n")


def _print_json(value: Any) -> None:
    import orjson

    sys.stdout.buffer.write(orjson.dumps(value, option=orjson.OPT_NON_STR_KEYS) + b"\n")


# ---------------------------------------------------------------------- daemon verbs


def cmd_serve(args: argparse.Namespace) -> int:
    import logging

    from ctxd import paths
    from ctxd.daemon.lifecycle import AlreadyRunning, serve
    from ctxd.fileio import open_append

    logger = logging.getLogger("ctxd")

    os.umask(0o077)  # everything the daemon writes (state, log, lock) is for this user only
    handler: logging.Handler
    replaced = None
    if args.spawned:
        # Started by a hook client with stdio on /dev/null: log to the state dir instead, a
        # directory checked private first, to a file of our own (never through a link there).
        log_path = paths.state_dir() / "ctxd.log"
        paths.ensure_private_dir(log_path.parent)
        try:
            fd, replaced = open_append(log_path)
        except OSError as exc:
            raise CtxdError(f"cannot open the log {log_path}: {exc.strerror or exc}") from None
        handler = logging.StreamHandler(open(fd, "a", buffering=1, encoding="utf-8"))  # noqa: SIM115
    else:
        handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    logging.basicConfig(level=getattr(logging, args.log_level.upper()), handlers=[handler])
    if replaced is not None:
        logger.warning("the log's path held %s; replaced it with a new log file", replaced)
    try:
        serve(os.environ)
    except AlreadyRunning:
        if args.spawned:
            return 0  # a concurrent hook won the race; that daemon serves
        raise
    except KeyboardInterrupt:
        pass
    return 0


def cmd_status(args: argparse.Namespace) -> int:
    from ctxd.cli import status

    return status.run(args.session, as_json=args.json)


def cmd_watch(args: argparse.Namespace) -> int:
    from ctxd.cli import status
    from ctxd.errors import DaemonUnavailable

    try:
        while True:
            try:
                screen = status.printed(None, as_json=False)
            except DaemonUnavailable as exc:  # said, and asked again at the next redraw
                screen = f"{exc}\n".encode()
            sys.stdout.buffer.write(b"\x1b[H\x1b[2J" + screen)
            sys.stdout.buffer.flush()
            time.sleep(args.interval)
    except KeyboardInterrupt:
        return 0


def cmd_stop(args: argparse.Namespace) -> int:
    import fcntl

    from ctxd import paths
    from ctxd.cli.client import request_json

    answer = request_json("stop")
    lock = paths.runtime_dir() / "ctxd.lock"
    deadline = time.monotonic() + 5
    # The daemon holds its lock until it has saved its state and removed its socket.
    with open(lock, "rb") as f:
        while time.monotonic() < deadline:
            try:
                fcntl.flock(f, fcntl.LOCK_SH | fcntl.LOCK_NB)
            except BlockingIOError:
                time.sleep(0.02)
                continue
            _print(f"ctxd stopped (pid {answer.get('pid')})")
            return 0
    raise CtxdError(f"ctxd (pid {answer.get('pid')}) did not stop within 5 s")


# ---------------------------------------------------------------------- replay


def cmd_replay(args: argparse.Namespace) -> int:
    from ctxd import agents, paths
    from ctxd.cli.replay import regular_file, replay, replay_store
    from ctxd.daemon.config import load_settings
    from ctxd.errors import TranscriptError

    if args.plot is not None and args.plot.suffix.lower() != ".svg":
        raise InvalidInput(f"--plot writes SVG: name the file *.svg, not {args.plot.name}")
    # The daemon's figures: ctxd's settings, and the agent's as this environment gives them.
    settings = load_settings(paths.config_path(os.environ))
    regular_file(args.path)  # before anything opens it
    if agents.store_owner(args.path) is None:
        if args.session is not None:
            raise InvalidInput(
                f"--session picks a session of an agent's database; {args.path} is not one"
            )
        _replay_timeline(args, replay(args.path, args.agent, args.window, settings, os.environ))
        return 0
    # A database: each session's timeline under a line that names it.
    timelines = list(
        replay_store(args.path, args.agent, args.window, settings, os.environ, args.session)
    )
    if not timelines:
        raise TranscriptError(f"{args.path}: no session in it has usage yet: nothing to replay")
    if args.plot is not None and len(timelines) > 1:
        raise InvalidInput(f"--plot draws one session: name one of {len(timelines)} with --session")
    for i, (info, items) in enumerate(timelines):
        if not args.json:
            title = f"{agents.spec(info.agent).title} session {info.session_id}"
            if info.parent_id is not None:
                title += f" (subagent of {info.parent_id})"
            _print(("\n" if i else "") + title + (f" in {info.cwd}" if info.cwd else ""))
        _replay_timeline(args, items, {"session_id": info.session_id}, info.parent_id)
    return 0


def _replay_timeline(
    args: argparse.Namespace,
    items: Iterator[Any],
    tag: dict[str, Any] | None = None,
    parent: str | None = None,
) -> None:
    """Print one timeline of `ctxd replay` (its rows, then the final line); `tag` is added
    to each JSON line (the session of a database)."""
    from ctxd import agents
    from ctxd.cli.replay import Row
    from ctxd.cli.report import (
        REPLAY_HEADER,
        replay_final_json,
        replay_final_line,
        replay_row_json,
        replay_row_line,
    )
    from ctxd.core.session import SessionState
    from ctxd.errors import TranscriptError

    tag = tag or {}
    last: Row | None = None
    rows: list[Row] = []
    for item in items:
        if isinstance(item, SessionState):
            if args.json:
                final = replay_final_json(item, last, args.window)
                _print_json({**final, **tag, **({"parent_id": parent} if tag else {})})
            elif last is not None:
                _print(replay_final_line(item, last))
            if last is None:
                title = agents.spec(item.agent).title
                raise TranscriptError(
                    f"{args.path}: a {title} transcript with no usage in it yet (no model turn "
                    "has finished): nothing to replay"
                )
            if args.plot is not None:
                _write_plot(args.plot, rows, item, args.path)
        else:
            if last is None and not args.json:
                _print(REPLAY_HEADER)
            last = item
            rows.append(item)
            if args.json:
                _print_json({**replay_row_json(item), **tag})
            else:
                _print(replay_row_line(item))


def _write_plot(path: Any, rows: list[Any], state: Any, transcript: str) -> None:
    from ctxd import agents
    from ctxd.cli.plot import svg
    from ctxd.daemon.config import default_settings
    from ctxd.fileio import write_atomic

    title = f"{agents.spec(state.agent).title} · {state.model or 'model unknown'} · " + (
        os.path.basename(transcript)
    )
    text = svg(rows, default_settings().thresholds, title)
    try:
        write_atomic(path, text.encode(), 0o644)
    except OSError as exc:
        raise CtxdError(f"cannot write {path}: {exc.strerror or exc}") from None
    sys.stderr.write(f"plot written to {path}\n")


# ---------------------------------------------------------------------- install & service


def _print_plan(plan: Any, dry_run: bool) -> None:
    also = getattr(plan, "also", ())  # an install's plan: the companion file's too
    if dry_run and (plan.changed or any(extra.changed for extra in also)):
        _print(plan.diff())
        for written in (plan, *also):
            if written.changed:
                _print(f"(dry run: {written.path} not written)")
    if dry_run:
        for step in plan.files:
            _print(step.describe(True))
            if step.action == "write":
                _print(step.file.text.rstrip("\n"))
    for note in (note for each in (plan, *also) for note in each.notes):
        _print(f"note: {note}")


def _print_done(args: argparse.Namespace, plan: Plan, backup: Path | None) -> None:
    """Say what an applied install or uninstall plan changed, the settings file first."""
    if args.verb == "install":
        done = f"registered ctxd's hooks in {plan.path}"
    elif args.statusline:
        done = f"removed ctxd's statusline from {plan.path}"
    else:
        done = f"removed ctxd from {plan.path}"
    _print(done + (f" (backup: {backup})" if backup else ""))
    for extra in plan.also:
        if extra.changed:
            verb = "set" if args.verb == "install" else "removed"
            _print(f"{verb} ctxd's part of {extra.path}")


def _apply_files(plan: Plan, verb: str, client: Path | None) -> None:
    """Write or remove the agent's own files of `plan`, saying what was done."""
    from ctxd.cli.placed import apply_files

    for line in apply_files(plan.files):
        _print(line)
    if client is not None:
        _print(f"ctxd's hook files run the client copied to {client}")
    elif verb == "uninstall" and not any(step.action == "remove" for step in plan.files):
        where = sorted({str(step.file.path.parent) for step in plan.files})
        _print(f"no hook files of ctxd's in {', '.join(where)}: nothing to remove")


def cmd_install(args: argparse.Namespace) -> int:
    from ctxd.agents.hookcmd import install_client
    from ctxd.cli.install import apply_plan, default_transport, plan_install, plan_uninstall

    if args.verb == "install" and not args.dry_run:
        # Before the plan, which names the native client once it is built; also when the
        # settings already name the client (the copy may be gone).
        where = install_client(os.environ)
    hint = None
    if args.verb == "install":
        chosen = None if args.transport else default_transport(args.agent)
        plan = plan_install(
            args.agent,
            settings=args.settings,
            statusline=args.statusline,
            transport=chosen.name if chosen is not None else args.transport,
        )
        if chosen is not None and chosen.reason:  # said after what was done: it is a hint
            hint = f"transport: {chosen.name}: {chosen.reason}"
    else:
        plan = plan_uninstall(args.agent, settings=args.settings, statusline=args.statusline)
    if plan.files and not args.dry_run:
        _apply_files(plan, args.verb, where if args.verb == "install" else None)
    if not plan.changes:
        if args.verb == "install" and not plan.files:
            _print(f"ctxd's hooks are already in {plan.path}: nothing to change")
            if not args.dry_run:
                _print_client(where)
    elif not args.dry_run:
        _print_done(args, plan, apply_plan(plan))
        if args.verb == "install":
            _print(f"the hooks run the client copied to {where}")
            _print_client(where)
    _print_plan(plan, args.dry_run)
    if hint is not None:
        _print(hint)
    return 0


def _print_client(where: os.PathLike[str]) -> None:
    from pathlib import Path

    from ctxd.agents.nativeclient import client_choice

    _print(f"hook client: {client_choice(Path(where), os.environ).describe()}")


def cmd_service(args: argparse.Namespace) -> int:
    from ctxd.cli import service

    if args.action == "status":
        for line in service.service_status():
            _print(line)
        return 0
    plan = (
        service.plan_service_install()
        if args.action == "install"
        else service.plan_service_uninstall()
    )
    if plan.manager == "none":
        for note in plan.notes:  # says exactly what it would do with a service manager
            _print(note)
        # Nothing was installed: a script that goes on as if it had been must be told.
        return 1 if args.action == "install" and not args.dry_run else 0
    if args.dry_run:
        for line in plan.describe():
            _print(line)
        for path, content in plan.files.items():
            _print(f"\n# {path}\n{content.rstrip()}")
        return 0
    for line in service.apply_service_plan(plan):
        _print(line)
    return 0


def cmd_handoff(args: argparse.Namespace) -> int:
    from ctxd.cli import handoff

    doc = handoff.run(args)
    if args.json:
        _print_json(doc)
    else:
        sys.stdout.write(doc["markdown"])
    return 0


def cmd_dashboard(args: argparse.Namespace) -> int:
    from ctxd.cli.web import dashboard_url

    url = dashboard_url(os.environ, check=True)
    _print(url)
    if not args.print:
        import webbrowser

        webbrowser.open(url)
    return 0


def cmd_metrics(args: argparse.Namespace) -> int:
    from ctxd.cli.client import request_json
    from ctxd.cli.web import metrics_text, write_textfile

    text = metrics_text(request_json("status"))
    if args.textfile is not None:
        write_textfile(args.textfile, text)
    else:
        sys.stdout.write(text)
    return 0


def cmd_doctor(args: argparse.Namespace) -> int:
    from ctxd.cli.doctor import run_checks

    failed = 0
    for check in run_checks():
        mark = "ok  " if check.ok else "skip" if check.skipped else "FAIL"
        _print(f"{mark} {check.name}: {check.detail}")
        if not check.ok:
            failed += 0 if check.skipped else 1
            if check.fix:
                _print(f"     {'hint' if check.skipped else 'fix'}: {check.fix}")
    return 1 if failed else 0


# ---------------------------------------------------------------------- parser
#
# One function per verb adds its arguments, and runs only when that verb is the one parsed (all
# of them for `ctxd --help` or a word that is no verb): a verb's options pay for what they need
# (the agents' names come from the agent registry) without making every other verb pay too.


def _positive_int(text: str) -> int:
    """A number of tokens as ctxd prints one (`725k`, `1M`) or in digits (`parse_tokens`)."""
    import argparse

    from ctxd.core.measure import parse_tokens

    try:
        return parse_tokens(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _positive_seconds(text: str) -> float:
    import argparse

    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of seconds: {text!r}") from None
    # nan and inf pass float(); 0 would redraw in a busy loop, a negative one cannot sleep.
    if not 0 < value < float("inf"):
        raise argparse.ArgumentTypeError(f"must be a positive number of seconds, got {text}")
    return value


def _serve_arguments(serve: argparse.ArgumentParser) -> None:
    import argparse

    serve.add_argument("--spawned", action="store_true", help=argparse.SUPPRESS)
    serve.add_argument(
        "--log-level",
        default="info",
        choices=["debug", "info", "warning"],
        help="how much the daemon logs to stderr (default: info)",
    )


def _status_arguments(status: argparse.ArgumentParser) -> None:
    status.add_argument(
        "session",
        nargs="?",
        metavar="SESSION",
        help="only this session, in full: its id or any unique start of it",
    )
    status.add_argument("--json", action="store_true", help="one JSON object")


def _watch_arguments(watch: argparse.ArgumentParser) -> None:
    watch.add_argument(
        "--interval",
        type=_positive_seconds,
        default=1.0,
        metavar="SECONDS",
        help="seconds between redraws (default: 1)",
    )


def _line_arguments(line: argparse.ArgumentParser) -> None:
    line.add_argument(
        "--cwd", metavar="DIR", help="the pane's directory (default: the current one)"
    )
    line.add_argument("--tmux", action="store_true", help="coloured with tmux #[fg=...] styles")


def cmd_line(args: argparse.Namespace) -> int:
    import ctxd_line  # the stdlib client `ctxd-line`, which tmux runs without ctxd's imports

    return ctxd_line.main(
        [*(["--tmux"] if args.tmux else []), *(["--cwd", args.cwd] if args.cwd else [])]
    )


def _no_arguments(parser: argparse.ArgumentParser) -> None:
    pass


def _replay_arguments(replay: argparse.ArgumentParser) -> None:
    from pathlib import Path

    from ctxd.agents import AGENTS
    from ctxd.cli.helpformat import WITH_STORE

    replay.add_argument(
        "path",
        metavar="PATH",
        help="a transcript file that an agent wrote (JSON lines, or one JSON document as an "
        "agent's export prints it), or its session database",
    )
    replay.add_argument(
        "--agent",
        choices=AGENTS,
        help="the agent that wrote it (default: told from the file; a mismatch is refused)",
    )
    replay.add_argument(
        "--session",
        metavar="ID",
        help=f"of an agent's session database ({WITH_STORE}): only the session whose "
        "id starts with ID (default: every session, each subagent's after its parent's)",
    )
    replay.add_argument(
        "--window",
        type=_positive_int,
        metavar="N",
        help="measure against this window: tokens, as 200000, 200k or 1M",
    )
    replay.add_argument("--json", action="store_true", help="one JSON object per line")
    replay.add_argument(
        "--plot",
        type=Path,
        metavar="FILE.svg",
        help="also draw the context over the turns, with the warning, critical and compaction "
        "levels and each compaction, into this SVG file",
    )


def _settings_arguments(sub: argparse.ArgumentParser, verb: str) -> None:
    """install's and uninstall's arguments (`verb`: which of the two)."""
    from pathlib import Path

    from ctxd import agents
    from ctxd.agents import AGENTS

    specs = [agents.spec(name) for name in AGENTS]
    with_statusline = ", ".join(s.title for s in specs if s.statusline is not None)
    with_http = ", ".join(s.title for s in specs if s.installer.http_hooks)
    sub.add_argument("agent", choices=AGENTS, metavar="AGENT", help=f"one of: {', '.join(AGENTS)}")
    sub.add_argument("--settings", type=Path, help="the settings file to edit")
    sub.add_argument("--dry-run", action="store_true", help="print the change, write nothing")
    sub.add_argument(
        "--statusline",
        action="store_true",
        help=f"make ctxd the agent's statusline even if one is set ({with_statusline})"
        if verb == "install"
        else f"remove only ctxd's statusline, keep its hooks ({with_statusline})",
    )
    if verb == "install":
        sub.add_argument(
            "--transport",
            choices=["command", "http"],
            help="http: the agent posts its hooks to the daemon's [http] listener, no process "
            f"per event ({with_http}; SessionStart stays a command, which starts the daemon). "
            "Default: http where systemd keeps that port (`ctxd service install` with [http] "
            "on), else command; install says which and why",
        )


def _install_arguments(install: argparse.ArgumentParser) -> None:
    _settings_arguments(install, "install")


def _uninstall_arguments(uninstall: argparse.ArgumentParser) -> None:
    _settings_arguments(uninstall, "uninstall")


def _service_arguments(service: argparse.ArgumentParser) -> None:
    service.add_argument("action", choices=["install", "uninstall", "status"])
    service.add_argument(
        "--dry-run",
        action="store_true",
        help="print the files and commands install/uninstall would write and run; do nothing",
    )


def _dashboard_arguments(dashboard: argparse.ArgumentParser) -> None:
    dashboard.add_argument("--print", action="store_true", help="print its address, open nothing")


def _metrics_arguments(metrics: argparse.ArgumentParser) -> None:
    from pathlib import Path

    metrics.add_argument(
        "--textfile",
        type=Path,
        metavar="PATH",
        help="write it atomically to PATH (node_exporter's textfile collector), print nothing",
    )


def _doctor_arguments(doctor: argparse.ArgumentParser) -> None:
    pass


def _handoff_arguments(handoff: argparse.ArgumentParser) -> None:
    from ctxd.agents import AGENTS
    from ctxd.cli.helpformat import WITH_STORE

    handoff.add_argument("session", nargs="?", help="the start of its id (default: the latest)")
    handoff.add_argument("--json", action="store_true", help="the digest and the note as JSON")
    handoff.add_argument(
        "--transcript",
        metavar="PATH",
        help=f"a transcript file instead, or an agent's session database ({WITH_STORE})",
    )
    handoff.add_argument(
        "--session",
        dest="session_option",
        metavar="ID",
        help="the same as SESSION: the start of its id (of the database's sessions with "
        "--transcript; default: its latest main session)",
    )
    handoff.add_argument("--agent", choices=AGENTS, help="whose transcript (default: detected)")
    handoff.add_argument(
        "--tokens", type=_positive_int, default=2000, help="the note's size limit (default 2000)"
    )


#: Every verb, in the order `ctxd --help` lists them: its one line of help, the function adding
#: its arguments, the function running it.
VERBS: dict[str, tuple[str, Callable[[argparse.ArgumentParser], None], Verb]] = {
    "serve": ("run the daemon in the foreground", _serve_arguments, cmd_serve),
    "status": ("every tracked session's context usage", _status_arguments, cmd_status),
    "watch": ("redraw the status live", _watch_arguments, cmd_watch),
    "line": ("one line for a terminal bar (tmux)", _line_arguments, cmd_line),
    "stop": ("stop the daemon", _no_arguments, cmd_stop),
    "replay": ("the usage timeline of a transcript", _replay_arguments, cmd_replay),
    "install": ("register ctxd's hooks in an agent's settings", _install_arguments, cmd_install),
    "uninstall": (
        "remove ctxd's hooks from an agent's settings",
        _uninstall_arguments,
        cmd_install,
    ),
    "service": ("run ctxd under systemd or launchd", _service_arguments, cmd_service),
    "dashboard": ("open the live dashboard ([http] enabled)", _dashboard_arguments, cmd_dashboard),
    "metrics": ("the status as Prometheus text", _metrics_arguments, cmd_metrics),
    "doctor": ("check the setup, one line per check", _doctor_arguments, cmd_doctor),
    "handoff": ("a session's digest as a handoff note (Markdown)", _handoff_arguments, cmd_handoff),
}

#: The verbs that only look at what the daemon answers, and are run often (a `watch` redraws
#: every second): they leave the hook client's copy to be refreshed by any other verb or by the
#: daemon's own start, since refreshing it imports the agent registry (~100 ms).
_LOOKS = frozenset({"status", "watch", "line"})


def build_parser(verb: str | None = None) -> argparse.ArgumentParser:
    """The command line's parser: every verb, or with `verb` only that one (what `main` parses
    a known verb with: each verb's parser costs its construction, gettext's look-ups included,
    and its arguments what they import)."""
    import argparse

    from ctxd.cli.helpformat import HelpFormatter

    parser = argparse.ArgumentParser(
        prog="ctxd",
        description="Know how full every coding agent's context window is.",
        formatter_class=HelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"ctxd {__version__}")
    verbs = parser.add_subparsers(dest="verb", required=True, metavar="VERB")
    for name, (text, add_arguments, func) in VERBS.items():
        if verb is None or verb == name:
            sub = verbs.add_parser(
                name, help=text, description=_describe(text), formatter_class=HelpFormatter
            )
            add_arguments(sub)
            sub.set_defaults(func=func)
    return parser


def _describe(text: str) -> str:
    """A verb's one line of help as the description its own `--help` opens with."""
    return text[:1].upper() + text[1:] + "."


def usage_lines() -> list[str]:
    """What bare `ctxd` prints: how to call it and each verb in a line."""
    width = max(len(name) for name in VERBS)
    return [
        "usage: ctxd VERB [options]   (ctxd VERB --help: that verb's options)",
        "",
        *(f"  {name:<{width}}  {text}" for name, (text, _, _) in VERBS.items()),
    ]


def _verb(argv: Sequence[str]) -> str | None:
    """The verb `argv` names: its first word that is not an option (ctxd's own options take no
    value); None when there is none, or no such verb (the full parser then says so)."""
    first = next((word for word in argv if not word.startswith("-")), None)
    return first if first in VERBS else None


def _refresh_client() -> None:
    """Keep the hook client copied by `ctxd install` in step with this ctxd (its version, and
    where ctxd now lives for a hook that has to start it): every run of ctxd but `status` and
    `watch` (`_LOOKS`) checks, so a reinstall is noticed at the next such command or daemon
    start."""
    from ctxd.agents.hookcmd import refresh_client

    try:
        refresh_client(os.environ)
    except CtxdError as exc:  # never a reason to fail the command the user asked for
        import logging

        logging.getLogger("ctxd").warning("%s", exc)


def main(argv: Sequence[str] | None = None) -> int:
    words = sys.argv[1:] if argv is None else list(argv)
    if not words:  # a usage, not argparse's "the following arguments are required"
        sys.stderr.write("\n".join(usage_lines()) + "\n")
        return 2
    if words[:1] == ["line"] and not {"-h", "--help"} & set(words):
        # A bar runs this every few seconds: straight to the client, without argparse.
        import ctxd_line

        return ctxd_line.main(words[1:])
    if words[:1] == ["status"]:
        # Polled too (a menu bar, a script): its usual words go to the front door the `ctxd`
        # entry point is, without argparse, whose import and parser cost more than the request
        # (docs/benchmarks.md §29); anything else (help, a misspelt option) goes to argparse,
        # which says what is wrong.
        import ctxd_status

        if ctxd_status.parse(words[1:]) is not None:
            return ctxd_status.main(words)
    args = build_parser(_verb(words)).parse_args(words)
    func: Verb = args.func
    if args.verb not in _LOOKS:
        _refresh_client()
    return _run(args.verb, lambda: func(args))


def _run(verb: str, call: Callable[[], int]) -> int:
    """`call`'s exit code; a CtxdError as one line on stderr and its exit code."""
    try:
        return call()
    except CtxdError as exc:
        sys.stderr.write(f"ctxd {verb}: {exc}\n")
        return exc.exit_code
    except BrokenPipeError:
        return 0
