"""OpenCode's own model limits and compaction settings (opencode.json): read as the daemon reads
an agent's settings files, they give the window over ctxd's table and move the compaction point
as OpenCode 1.18.33's `isOverflow` does."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from ctxd.agents import spec
from ctxd.agents.opencode import config_files
from ctxd.agents.opencode_family import config as opencode_config
from ctxd.agents.opencode_family.config import limit, setting, walk_top, worktree_root
from ctxd.core import session as core
from ctxd.core.events import UsageUpdate
from ctxd.core.settings import Settings
from ctxd.daemon.agent_settings import AgentSettings

OPENCODE = spec("opencode")


def read(doc: dict[str, Any]) -> dict[str, str]:
    return OPENCODE.read_settings(json.dumps(doc).encode())


def mock(**limit: int) -> dict[str, Any]:
    return {"provider": {"mock": {"models": {"mock-model": {"limit": limit}}}}}


# (opencode.json, model) -> (window from its config, compaction point on that window or the
# default 1,000,000 when it sets none)
@pytest.mark.parametrize(
    ("doc", "model", "window", "point"),
    [
        ({}, "mock-model", None, 1_000_000 - 32_000),
        (mock(context=200_000), "mock-model", 200_000, 168_000),
        (mock(context=200_000, output=8_000), "mock-model", 200_000, 192_000),
        (mock(context=200_000, output=64_000), "mock-model", 200_000, 168_000),
        # an input limit: the point is below it, by min(20,000, the output reserve)...
        (mock(context=400_000, input=272_000, output=128_000), "mock-model", 400_000, 252_000),
        (mock(context=400_000, input=272_000, output=8_000), "mock-model", 400_000, 264_000),
        # ...or by compaction.reserved
        (
            {**mock(context=400_000, input=272_000), "compaction": {"reserved": 50_000}},
            "mock-model",
            400_000,
            222_000,
        ),
        # a context limit of 0, or compaction.auto false: OpenCode never compacts
        (mock(context=0), "mock-model", None, None),
        ({**mock(context=200_000), "compaction": {"auto": False}}, "mock-model", 200_000, None),
        # another model's limits, or limits that are not whole numbers, say nothing
        (mock(context=200_000), "other-model", None, 968_000),
        (mock(context="200k"), "mock-model", None, 968_000),  # type: ignore[arg-type]
        ({"provider": {"mock": {"models": []}}}, "mock-model", None, 968_000),
        ({"provider": "mock"}, "mock-model", None, 968_000),
    ],
)
def test_the_config_gives_the_window_and_the_point(
    doc: dict[str, Any], model: str, window: int | None, point: int | None
) -> None:
    config = read(doc)
    assert OPENCODE.configured_window(model, config) == window
    assert OPENCODE.compaction(window or 1_000_000, model, {}, config) == point


def test_an_unreadable_config_is_no_config() -> None:
    assert OPENCODE.read_settings(b'{"provider": ') == {}
    assert OPENCODE.read_settings(b"[1, 2]") == {}


def test_the_files_global_then_opencode_config_then_the_projects_then_the_dot_dirs() -> None:
    env = {"HOME": "/h", "OPENCODE_CONFIG": "/etc/oc.json", "OPENCODE_CONFIG_DIR": "/d"}
    files = config_files(env, "/r/a/b", "/r")
    assert [str(f) for f in files] == [
        "/h/.config/opencode/config.json",
        "/h/.config/opencode/opencode.json",
        "/h/.config/opencode/opencode.jsonc",
        "/etc/oc.json",
        # the project's, from the worktree's root down to the session's directory
        "/r/opencode.json",
        "/r/opencode.jsonc",
        "/r/a/opencode.json",
        "/r/a/opencode.jsonc",
        "/r/a/b/opencode.json",
        "/r/a/b/opencode.jsonc",
        # the `.opencode/`s on the same walk, the session's own first
        "/r/a/b/.opencode/opencode.json",
        "/r/a/b/.opencode/opencode.jsonc",
        "/r/a/.opencode/opencode.json",
        "/r/a/.opencode/opencode.jsonc",
        "/r/.opencode/opencode.json",
        "/r/.opencode/opencode.jsonc",
        "/h/.opencode/opencode.json",
        "/h/.opencode/opencode.jsonc",
        "/d/opencode.json",
        "/d/opencode.jsonc",
    ]


def test_outside_git_under_home_the_walk_stops_at_home_and_reads_it_once() -> None:
    files = [str(f) for f in config_files({"XDG_CONFIG_HOME": "/c", "HOME": "/h"}, "/h/w", "/h")]
    assert files == [
        "/c/opencode/config.json",
        "/c/opencode/opencode.json",
        "/c/opencode/opencode.jsonc",
        "/h/opencode.json",
        "/h/opencode.jsonc",
        "/h/w/opencode.json",
        "/h/w/opencode.jsonc",
        "/h/w/.opencode/opencode.json",
        "/h/w/.opencode/opencode.jsonc",
        "/h/.opencode/opencode.json",  # ~/.opencode at its place on the walk, not again
        "/h/.opencode/opencode.jsonc",
    ]


def test_a_walk_with_no_top_above_the_session_reads_its_directory_alone() -> None:
    env = {"XDG_CONFIG_HOME": "/c", "HOME": "/h"}
    for top in (None, "/elsewhere", "/tmp/p/deeper"):
        files = [str(f) for f in config_files(env, "/tmp/p", top)]
        assert [f for f in files if not f.startswith(("/c/", "/h/"))] == [
            "/tmp/p/opencode.json",
            "/tmp/p/opencode.jsonc",
            "/tmp/p/.opencode/opencode.json",
            "/tmp/p/.opencode/opencode.jsonc",
        ]


def test_the_walk_stops_at_the_repository_root_or_home_never_at_the_root(tmp_path: Path) -> None:
    """OpenCode climbs to `/` outside git; ctxd stops at the repository's root, the home
    directory, or the session's own directory (any local user can write a `/tmp/opencode.json`)."""
    home, outside = tmp_path / "home", tmp_path / "shared"
    (home / "repo" / ".git").mkdir(parents=True)
    (home / "repo" / "sub").mkdir()
    (home / "plain" / "sub").mkdir(parents=True)
    (outside / "repo" / ".git").mkdir(parents=True)
    (outside / "repo" / "sub").mkdir()
    (outside / "p").mkdir()
    _outside_git(outside / "p")
    env = {"HOME": str(home)}
    assert walk_top(env, str(home / "repo" / "sub")) == str(home / "repo")
    assert walk_top(env, str(home / "plain" / "sub")) == str(home)
    assert walk_top(env, str(home)) == str(home)
    assert walk_top(env, str(outside / "repo" / "sub")) == str(outside / "repo")
    assert walk_top(env, str(outside / "p")) == str(outside / "p")
    assert walk_top({"HOME": "/"}, str(outside / "p")) == str(outside / "p")
    # through settings_files: nothing above the session's directory outside home and git,
    # `..` or not
    for cwd in (outside / "p", outside / "p" / ".." / "p"):
        files = OPENCODE.settings_files(env, str(cwd))
        assert not [f for f in files if f.name == "opencode.json" and f.parent == outside], files


def test_a_git_of_another_user_is_no_repository_root(tmp_path: Path) -> None:
    if os.geteuid() != 0:
        pytest.skip("needs root to give a folder to another user")
    (tmp_path / "shared" / ".git").mkdir(parents=True)
    (tmp_path / "shared" / "p").mkdir()
    os.chown(tmp_path / "shared" / ".git", 65534, 65534)
    _outside_git(tmp_path / "shared")
    cwd = str(tmp_path / "shared" / "p")
    assert worktree_root(cwd) is None
    assert walk_top({"HOME": str(tmp_path / "home")}, cwd) == cwd


def test_no_session_directory_or_no_project_config() -> None:
    assert [str(f) for f in config_files({"XDG_CONFIG_HOME": "/c", "HOME": "/h"}, None, None)] == [
        "/c/opencode/config.json",
        "/c/opencode/opencode.json",
        "/c/opencode/opencode.jsonc",
        "/h/.opencode/opencode.json",
        "/h/.opencode/opencode.jsonc",
    ]
    for flag in ("1", "true", "TRUE"):
        env = {"HOME": "/h", "OPENCODE_DISABLE_PROJECT_CONFIG": flag}
        assert config_files(env, "/r/a", "/r") == config_files({"HOME": "/h"}, None, None)
    env = {"HOME": "/h", "OPENCODE_DISABLE_PROJECT_CONFIG": "0"}
    assert Path("/r/a/opencode.json") in config_files(env, "/r/a", "/r")


def test_opencode_config_dir_is_read_once_at_its_first_place() -> None:
    # the global directory itself: read again right after the global files' turn
    env = {"HOME": "/h", "OPENCODE_CONFIG_DIR": "/h/.config/opencode"}
    files = [str(f) for f in config_files(env, "/r", "/r")]
    assert files[-6:] == [
        "/h/.config/opencode/opencode.json",
        "/h/.config/opencode/opencode.jsonc",
        "/r/.opencode/opencode.json",
        "/r/.opencode/opencode.jsonc",
        "/h/.opencode/opencode.json",
        "/h/.opencode/opencode.jsonc",
    ]
    # one of the walk's `.opencode/`s: not again at the end
    env = {"HOME": "/h", "OPENCODE_CONFIG_DIR": "/r/.opencode"}
    assert [str(f) for f in config_files(env, "/r", "/r")][-4:] == [
        "/r/.opencode/opencode.json",
        "/r/.opencode/opencode.jsonc",
        "/h/.opencode/opencode.json",
        "/h/.opencode/opencode.jsonc",
    ]


def test_the_worktree_root_is_the_nearest_directory_holding_a_git(tmp_path: Path) -> None:
    (tmp_path / "repo" / ".git").mkdir(parents=True)
    (tmp_path / "repo" / "sub" / "a").mkdir(parents=True)
    (tmp_path / "repo" / "linked" / "a").mkdir(parents=True)
    (tmp_path / "repo" / "linked" / ".git").write_text("gitdir: ../.git/worktrees/linked\n")
    assert worktree_root(str(tmp_path / "repo" / "sub" / "a")) == str(tmp_path / "repo")
    assert worktree_root(str(tmp_path / "repo")) == str(tmp_path / "repo")
    assert worktree_root(str(tmp_path / "repo" / "linked" / "a")) == str(
        tmp_path / "repo" / "linked"
    )


def _outside_git(path: Path) -> None:
    if worktree_root(str(path)) is not None:
        pytest.skip(f"{path} is inside a git worktree")


Layout = dict[str, dict[str, Any] | str | None]


def _layout(root: Path, files: Layout) -> None:
    """Each path under `root`: a config file (a dict, as JSON), a file's text, or a directory
    (None: a `.git`)."""
    for name, doc in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        if doc is None:
            path.mkdir()
        else:
            path.write_text(doc if isinstance(doc, str) else json.dumps(doc))


def reserved(n: int) -> dict[str, Any]:
    return {"compaction": {"reserved": n}}


NEVER = {"compaction": {"auto": False}}  # read, it would say OpenCode never compacts

# (files laid out under tmp_path, the session's directory, extra env) -> what OpenCode 1.18.33
# reads there (`opencode debug config`): compaction.reserved, compaction.auto, limit.context
LAYOUTS: list[tuple[str, Layout, str, dict[str, str], Any]] = [
    (
        "the repo root's config, the session in a subfolder",
        {"repo/.git": None, "repo/opencode.json": reserved(1)},
        "repo/sub/dir",
        {},
        (1, None, None),
    ),
    (
        "a nearer config overrides the root's key by key",
        {
            "repo/.git": None,
            "repo/opencode.json": {**reserved(1), **mock(context=300_000)},
            "repo/sub/opencode.json": reserved(2),
        },
        "repo/sub/dir",
        {},
        (2, None, 300_000),
    ),
    (
        "opencode.jsonc over opencode.json in one directory",
        {
            "repo/.git": None,
            "repo/opencode.json": reserved(1),
            "repo/opencode.jsonc": reserved(2),
        },
        "repo/sub",
        {},
        (2, None, None),
    ),
    (
        "a config above the git root is not read",
        {"top/opencode.json": NEVER, "top/repo/.git": None, "top/repo/opencode.json": reserved(1)},
        "top/repo/sub",
        {},
        (1, None, None),
    ),
    (
        "a linked worktree (its .git a file) stops the walk too",
        {
            "top/opencode.json": NEVER,
            "top/wt/.git": "gitdir: /elsewhere\n",
            "top/wt/opencode.json": reserved(1),
        },
        "top/wt/sub",
        {},
        (1, None, None),
    ),
    (
        "outside git and home the walk does not climb (OpenCode's would, to the root)",
        {"top/opencode.json": NEVER, "top/a/b/opencode.json": reserved(3)},
        "top/a/b",
        {},
        (3, None, None),
    ),
    (
        "outside git under home the walk goes up to home, not above it",
        {"opencode.json": NEVER, "home/opencode.json": reserved(3)},
        "home/a/b",
        {},
        (3, None, None),
    ),
    (
        "a .opencode/ higher up overrides a nearer one; both the project files",
        {
            "repo/.git": None,
            "repo/.opencode/opencode.json": reserved(4),
            "repo/sub/.opencode/opencode.json": {**reserved(5), **mock(context=300_000)},
            "repo/sub/opencode.json": reserved(6),
        },
        "repo/sub",
        {},
        (4, None, 300_000),
    ),
    (
        "~/.opencode over the project's .opencode/s",
        {
            "repo/.git": None,
            "repo/sub/.opencode/opencode.json": reserved(5),
            "home/.opencode/opencode.jsonc": reserved(7),
        },
        "repo/sub",
        {},
        (7, None, None),
    ),
    (
        "OPENCODE_CONFIG_DIR over everything",
        {
            "repo/.git": None,
            "home/.opencode/opencode.json": reserved(7),
            "oc-dir/opencode.json": reserved(8),
        },
        "repo",
        {"OPENCODE_CONFIG_DIR": "{tmp}/oc-dir"},
        (8, None, None),
    ),
    (
        "OPENCODE_DISABLE_PROJECT_CONFIG: no project file, no project .opencode/",
        {
            "repo/.git": None,
            "repo/opencode.json": reserved(1),
            "repo/.opencode/opencode.json": NEVER,
        },
        "repo",
        {"OPENCODE_DISABLE_PROJECT_CONFIG": "1"},
        (None, None, None),
    ),
    (
        "the global config.json under the global opencode.json",
        {
            "home/.config/opencode/config.json": {**reserved(9), **mock(context=300_000)},
            "home/.config/opencode/opencode.json": reserved(10),
        },
        "home",
        {},
        (10, None, 300_000),
    ),
]


@pytest.mark.parametrize(
    ("files", "cwd", "extra", "expected"),
    [case[1:] for case in LAYOUTS],
    ids=[case[0] for case in LAYOUTS],
)
def test_the_config_a_session_reads_from_its_directory_layout(
    tmp_path: Path,
    files: Layout,
    cwd: str,
    extra: dict[str, str],
    expected: tuple[int | None, bool | None, int | None],
) -> None:
    _outside_git(tmp_path)
    _layout(tmp_path, files)
    (tmp_path / cwd).mkdir(parents=True, exist_ok=True)
    env = {"HOME": str(tmp_path / "home")} | {k: v.format(tmp=tmp_path) for k, v in extra.items()}
    state = core.new_session("opencode", "ses_1", None, 0.0, cwd=str(tmp_path / cwd))
    config = AgentSettings(env).config(state)
    got = (
        setting(config, "reserved"),
        setting(config, "auto"),
        limit(config, "context", "mock-model"),
    )
    assert got == expected


def test_the_git_root_is_looked_for_once_and_a_config_written_later_is_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _layout(tmp_path, {"repo/.git": None})
    (tmp_path / "repo" / "sub").mkdir()
    lookups: list[str] = []

    def counted(cwd: str, top: str | None = None) -> str | None:
        lookups.append(cwd)
        return worktree_root(cwd, top)

    monkeypatch.setattr(opencode_config, "worktree_root", counted)
    now = [0.0]
    cache = AgentSettings({"HOME": str(tmp_path / "home")}, clock=lambda: now[0])
    state = core.new_session("opencode", "ses_1", None, 0.0, cwd=str(tmp_path / "repo" / "sub"))
    assert setting(cache.config(state), "reserved") is None
    (tmp_path / "repo" / "opencode.json").write_text(json.dumps(reserved(1)))
    for step in range(1, 5):
        now[0] = 2.0 * step
        assert setting(cache.config(state), "reserved") == 1
    assert lookups == [str(tmp_path / "repo" / "sub")]


def test_a_session_is_measured_on_the_window_its_project_config_gives(tmp_path: Path) -> None:
    home, work = tmp_path / "home", tmp_path / "work"
    (home / ".config" / "opencode").mkdir(parents=True)
    (home / ".config" / "opencode" / "opencode.json").write_text(
        json.dumps(mock(context=200_000, output=8_000))
    )
    (work / ".opencode").mkdir(parents=True)
    # the project's file overrides the global one key by key (a comment allowed, as in .jsonc)
    (work / ".opencode" / "opencode.jsonc").write_text(
        '// the big variant\n{"provider": {"mock": {"models": {"mock-model": '
        '{"limit": {"context": 400000}}}}}}'
    )
    state = core.new_session("opencode", "ses_1", None, 0.0, cwd=str(work))
    state = core.apply_usage(state, UsageUpdate(tokens=100_000, model="mock-model"), 1.0)
    grounds = core.Grounds(
        Settings(windows={"mock-model": 128_000}),  # ctxd's own table: below OpenCode's config
        OPENCODE.compaction,
        AgentSettings({"HOME": str(home)}).config(state),
        configured_window=OPENCODE.configured_window,
    )
    fig = core.figures(state, grounds)
    assert (fig.window.size, fig.window.source, fig.compaction_at) == (400_000, "config", 392_000)
    assert fig.used_pct == 25.0
