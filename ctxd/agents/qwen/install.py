"""Qwen Code: ctxd's hooks in `~/.qwen/settings.json` (or `$QWEN_HOME/settings.json`), as pure
transformations."""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ctxd.agents.hookcmd import is_ctxd_command
from ctxd.agents.hookmap import HookSpec, Json, add_hooks, hook_urls, remove_hooks, specs_for
from ctxd.agents.qwen.files import qwen_home
from ctxd.agents.spec import Check

__all__ = [
    "ALLOWED_URLS",
    "EVENTS",
    "checks",
    "hook_specs",
    "http_handler",
    "install",
    "settings_path",
    "uninstall",
]

NAME = "ctxd"
#: Seconds (Qwen Code reads 1000 or more as legacy milliseconds).
TIMEOUT_S = 10
EVENTS: tuple[tuple[str, str | None], ...] = (
    ("SessionStart", None),
    ("UserPromptSubmit", None),
    # Tool matchers: "*" (or "", ".*") is every tool; anything else a name or a regex.
    ("PostToolUse", "*"),
    # A call that fails as it runs fires this instead of PostToolUse.
    ("PostToolUseFailure", "*"),
    ("Stop", None),
    ("PostCompact", None),
    ("SessionEnd", None),
)
_DISABLED = "disableAllHooks"
#: `security.allowedHttpHookUrls`: the URL patterns (`*` a wildcard) Qwen Code's HTTP hooks may
#: post to. Empty or absent (the default) allows every URL; loopback passes its SSRF checks.
ALLOWED_URLS = ("security", "allowedHttpHookUrls")
#: A URL ctxd itself wrote: the daemon's hook route on a host and port, no wildcard.
_OUR_URL = re.compile(r"http://[^/*\s]+/ctxd/hook/[A-Za-z0-9_-]+(?:/[A-Za-z0-9_-]+)?")


def settings_path(env: Mapping[str, str]) -> Path:
    """The user settings Qwen Code reads: `<QWEN_HOME, else ~/.qwen>/settings.json`."""
    return qwen_home(env) / "settings.json"


def hook_specs(command: str, http_url: str | None = None) -> tuple[HookSpec, ...]:
    """One named hook per event ctxd needs: a command, or with `http_url` an HTTP hook posting
    to the daemon for every event but SessionStart, whose command starts the daemon when it is
    down (Qwen Code 0.24.4 would run an HTTP hook there too, but nothing would start ctxd)."""
    handler = {"type": "command", "name": NAME, "command": command, "timeout": TIMEOUT_S}
    return specs_for(EVENTS, handler, None if http_url is None else http_handler(http_url))


def http_handler(url: str) -> dict[str, object]:
    """A named HTTP hook posting the payload to `url` (Qwen Code 0.24.4's HttpHookRunner: it
    posts `{...input, hook_event_name}` as JSON and reads a JSON answer's `decision`, `reason`,
    `systemMessage` and `hookSpecificOutput` as it reads a command's stdout).

    No `X-Ctxd-Env-*` headers: Qwen Code would interpolate `${NAME}` in them from the variables
    named in `allowedEnvVars`, as Claude Code does, but its compaction rule reads only its
    settings files (the spec has no `config_env`), so there is nothing to pass.
    """
    return {"type": "http", "name": NAME, "url": url, "timeout": TIMEOUT_S}


def _disabled_notes(doc: Mapping[str, Any]) -> tuple[str, ...]:
    if doc.get(_DISABLED) is True:
        return (f"{_DISABLED} is true: Qwen Code runs no hooks, ctxd's included",)
    return ()


def _pattern(pattern: str) -> re.Pattern[str]:
    """A `security.allowedHttpHookUrls` entry as Qwen Code 0.24.4 compiles it (UrlValidator):
    `*` is `.*`, anchored, case-insensitive; an entry holding `\\.` is taken as pre-escaped."""
    if "\\." in pattern:
        escaped = pattern.replace("*", ".*")
    else:
        escaped = re.sub(r"[.+?^${}()|\[\]\\]", lambda m: "\\" + m.group(0), pattern)
        escaped = escaped.replace("*", ".*")
    return re.compile(f"^{escaped}$", re.IGNORECASE)


def _allows(patterns: list[Any], url: str) -> bool:
    for pattern in patterns:
        if isinstance(pattern, str):
            try:
                if _pattern(pattern).search(url):
                    return True
            except re.error:
                continue
    return False


def _is_our_url(pattern: object) -> bool:
    return isinstance(pattern, str) and _OUR_URL.fullmatch(pattern) is not None


def _allow_list(doc: Json, http_url: str | None) -> tuple[Json, tuple[str, ...]]:
    """`doc` with ctxd's hook URL in `security.allowedHttpHookUrls` where that list would
    otherwise refuse it (`http_url`), and without the URLs ctxd added there before.

    An absent or empty list allows every URL and is left alone. ctxd's URL is added only to a
    list of the user's own patterns, none of which matches it. A list left holding nothing but
    ctxd's URLs is kept as is: emptying it would allow every URL.
    """
    section, key = ALLOWED_URLS
    table = doc.get(section)
    current = table.get(key) if isinstance(table, dict) else None
    if not isinstance(current, list) or not current:
        return doc, ()
    users = [p for p in current if not _is_our_url(p)]
    notes: tuple[str, ...] = ()
    if not users:
        if http_url is None or current == [http_url]:
            if http_url is None:
                notes = (
                    f"{section}.{key} holds only ctxd's hook URL, kept: an empty list would let "
                    "Qwen Code's HTTP hooks post anywhere; edit it by hand",
                )
            return doc, notes
        wanted: list[Any] = [http_url]
    elif http_url is not None and not _allows(users, http_url):
        wanted = [*users, http_url]
        if http_url not in current:
            notes = (
                f"{section}.{key}: {http_url} added, or Qwen Code would refuse ctxd's HTTP hooks "
                "(a list in Qwen Code's system settings must name it too)",
            )
    else:
        wanted = users
    if wanted == current:
        return doc, notes
    out = dict(doc)
    out[section] = {**table, key: wanted}  # type: ignore[dict-item]
    return out, notes


def install(doc: Json, command: str, http_url: str | None = None) -> tuple[Json, tuple[str, ...]]:
    """`doc` with ctxd's hooks (HTTP hooks posting to `http_url` where given, and that URL in
    an allow-list that would refuse it); a note when the user's settings switch hooks off."""
    out = add_hooks(doc, hook_specs(command, http_url), is_ctxd_command)
    out, notes = _allow_list(out, http_url)
    return out, (*_disabled_notes(doc), *notes)


def uninstall(doc: Json) -> tuple[Json, tuple[str, ...]]:
    """`doc` without ctxd's hooks and without the hook URL ctxd added to the allow-list."""
    return _allow_list(remove_hooks(doc, is_ctxd_command), None)


def checks(doc: Json) -> list[Check]:
    """`ctxd doctor`: whether Qwen Code will run the hooks at all (and, for HTTP hooks, whether
    the user's `security.allowedHttpHookUrls` lets them post)."""
    if doc.get(_DISABLED) is True:
        return [
            Check(
                "qwen hooks enabled",
                False,
                f"{_DISABLED} is true in the Qwen Code settings",
                f'remove "{_DISABLED}" from the settings file',
            )
        ]
    found = [Check("qwen hooks enabled", True, f"{_DISABLED} is not set")]
    urls = hook_urls(doc, is_ctxd_command)
    if urls:
        section, key = ALLOWED_URLS
        table = doc.get(section)
        patterns = table.get(key) if isinstance(table, dict) else None
        if isinstance(patterns, list) and patterns:
            refused = [url for url in urls if not _allows(patterns, url)]
            found.append(
                Check(
                    "qwen http hooks allowed",
                    not refused,
                    f"{section}.{key} refuses {', '.join(refused)}"
                    if refused
                    else f"{section}.{key} allows {', '.join(urls)}",
                    "`ctxd install qwen --transport http` adds ctxd's URL" if refused else None,
                )
            )
    return found
