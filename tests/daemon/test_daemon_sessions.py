"""Which sessions the daemon knows: found by watching the agents' roots, subagents kept apart
from their parents, ended by SessionEnd or by the transcript's deletion."""

from __future__ import annotations

import shutil
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from conftest import ClaudeTranscript, World

WATCH_TIMEOUT = 5.0
#: A root that appears is noticed by a periodic check (every 2 s) and then watched.
ROOT_TIMEOUT = 8.0


def keep_writing_until_listed(
    world: World,
    t: ClaudeTranscript,
    tokens: int,
    write: Callable[[], None] | None = None,
) -> dict[str, Any]:
    """Append `tokens` lines, as a live session does, until `t` is listed. (A file created in
    a directory created the same instant can be missed by inotify; its next write is not.)"""

    def listed() -> dict[str, Any] | None:
        if write is None:
            t.assistant(tokens)
        else:
            write()
        time.sleep(0.1)
        return world.row(t)

    return world.wait_for(listed, WATCH_TIMEOUT, f"{t.path} to be listed")


def test_new_transcript_is_discovered_without_any_hook(shared: World) -> None:
    # The project dir exists (the agent ran there before): this is about the new file. See
    # test_transcript_in_a_root_created_after_start_is_discovered for what events miss.
    (shared.claude_projects / "-home-user-discovered").mkdir()
    time.sleep(0.3)
    t = shared.claude(slug="-home-user-discovered")
    t.assistant(123_456)
    row = shared.wait_row(t, lambda r: r["tokens"] == 123_456, WATCH_TIMEOUT)
    assert row["session_id"] == t.session_id
    assert row["agent"] == "claude"
    assert row["model"] == "claude-opus-5-5"

    t.assistant(234_567)
    shared.wait_row(t, lambda r: r["tokens"] == 234_567, WATCH_TIMEOUT)


def test_a_session_registered_before_its_transcript_exists_stays_one_session(
    shared: World,
) -> None:
    # Claude Code fires SessionStart before it writes the transcript; the watcher then finds
    # the new file before any hook names it. Status must still list one session.
    t = shared.claude()
    t.path.unlink()
    shared.hook_out("claude", t.payload("SessionStart"))
    t.assistant(123_456)
    shared.wait_row(t, lambda r: r["tokens"] == 123_456, WATCH_TIMEOUT)
    time.sleep(0.2)  # a second row, if any, would be there by now
    shared.hook_out("claude", t.payload("PostToolUse"))
    rows = [r for r in shared.status()["sessions"] if r["session_id"] == t.session_id]
    assert [r["transcript_path"] for r in rows] == [str(t.path)]


def test_appends_show_in_status_within_bounded_time(shared: World) -> None:
    t = shared.claude()
    t.assistant(50_000)
    shared.hook_out("claude", t.payload("PostToolUse"))
    for tokens in (60_000, 70_000, 80_000):
        t.assistant(tokens)

        def shows(row: dict[str, Any], want: int = tokens) -> bool:
            return bool(row["tokens"] == want)

        shared.wait_row(t, shows, WATCH_TIMEOUT)


def test_transcript_in_a_root_created_after_start_is_discovered(world: World) -> None:
    # An agent used for the first time creates its root while the daemon runs; the session it
    # starts there writes its first lines at once and may then think for a while.
    world.remove_agent_roots()
    world.start()
    t = world.claude()
    t.assistant(42_000)
    world.wait_row(t, lambda r: r["tokens"] == 42_000, ROOT_TIMEOUT)


def test_new_agent_root_while_running_keeps_the_daemon_serving(world: World) -> None:
    # Claude Code is in use; then Gemini CLI runs for the first time and creates ~/.gemini/tmp.
    shutil.rmtree(world.home / ".gemini")
    world.start()
    first = world.ping()
    assert first is not None
    c = world.claude()
    keep_writing_until_listed(world, c, 10_000)
    g = world.gemini()

    def gemini_seen() -> bool:
        # Keep writing, as a live session does, so that only the watching is under test.
        g.gemini(20_000)
        row = world.row(g)
        return row is not None and row["tokens"] == 20_000

    world.wait_for(gemini_seen, ROOT_TIMEOUT, "the Gemini transcript in the new root")
    after = world.ping()
    assert after is not None and after["pid"] == first["pid"], world.log()[-2000:]
    # The roots known before keep being watched.
    c.assistant(11_000)
    world.wait_row(c, lambda r: r["tokens"] == 11_000, WATCH_TIMEOUT)
    assert world.proc is not None and world.proc.poll() is None


def test_gemini_and_codex_transcripts_are_discovered(shared: World) -> None:
    # Their directories exist already (today's date dir, the project's chats dir): this is
    # about the files, see test_transcript_in_a_root_created_after_start_is_discovered.
    g_dir = shared.home / ".gemini" / "tmp" / "work" / "chats"
    c_dir = shared.codex_dir / "sessions" / "2026" / "11" / "29"
    for d in (g_dir, c_dir):
        if not d.is_dir():
            d.mkdir(parents=True)
            time.sleep(0.5)
    g = shared.gemini()
    g.gemini(77_000)
    c = shared.codex()
    c.response(88_000)
    assert shared.wait_row(g, lambda r: r["tokens"] == 77_000, WATCH_TIMEOUT)["agent"] == "gemini"
    row = shared.wait_row(c, lambda r: r["tokens"] == 88_000, WATCH_TIMEOUT)
    assert row["agent"] == "codex" and row["session_id"] == c.session_id


def test_session_end_hook_ends_the_session(shared: World) -> None:
    t = shared.claude()
    t.assistant(100_000)
    shared.hook_out("claude", t.payload("PostToolUse"))
    row = shared.row(t)
    assert row is not None and row["ended_at"] is None

    assert shared.hook_out("claude", t.payload("SessionEnd")) is None

    row = shared.row(t)
    assert row is not None
    assert row["ended_at"] is not None and row["ended_at"] >= row["updated_at"] - 1
    assert row["ended_reason"]


def test_deleted_transcript_ends_the_session(shared: World) -> None:
    t = shared.claude()
    t.assistant(100_000)
    shared.hook_out("claude", t.payload("PostToolUse"))
    t.path.unlink()
    row = shared.wait_row(t, lambda r: r["ended_at"] is not None, WATCH_TIMEOUT)
    assert "delet" in row["ended_reason"]


def test_deleted_project_dir_ends_its_sessions(shared: World) -> None:
    t = shared.claude(slug="-tmp-throwaway")
    t.assistant(100_000)
    shared.hook_out("claude", t.payload("PostToolUse"))
    shutil.rmtree(t.path.parent)
    shared.wait_row(t, lambda r: r["ended_at"] is not None, WATCH_TIMEOUT)


def test_subagent_usage_never_warns_the_parent(shared: World) -> None:
    parent = shared.claude()
    parent.assistant(100_000)
    assert shared.hook_out("claude", parent.payload("PostToolUse")) is None
    sub = shared.claude_subagent(parent, "a075576dd443f4b9")
    # Far past every threshold, in the subagent's own context.
    keep_writing_until_listed(shared, sub, 900_000)

    for _ in range(6):
        parent.assistant(110_000)
        result = shared.hook("claude", parent.payload("PostToolUse"))
        assert (result.returncode, result.stdout) == (0, b"")
    parent.assistant(110_000)
    assert shared.hook_out("claude", parent.payload("Stop")) is None

    rows = shared.status()["sessions"]
    parent_row = next(r for r in rows if r["transcript_path"] == str(parent.path))
    sub_row = next(r for r in rows if r["transcript_path"] == str(sub.path))
    assert parent_row["tokens"] == 110_000 and parent_row["parent"] is None
    assert parent_row["severity"] == "ok" and parent_row["warned"] == "ok"
    assert sub_row["parent"] == str(parent.path)
    assert sub_row["tokens"] == 900_000 and sub_row["severity"] == "critical"


def test_subagent_stop_tracks_the_subagent_apart(shared: World) -> None:
    parent = shared.claude()
    parent.assistant(100_000)
    sub = shared.claude_subagent(parent, "b1c2d3e4f5a6b7c8")
    sub.assistant(850_000)
    payload = parent.payload(
        "SubagentStop",
        agent_id="b1c2d3e4f5a6b7c8",
        agent_transcript_path=str(sub.path),
    )
    result = shared.hook("claude", payload)
    assert result.returncode == 0
    sub_row = shared.wait_row(sub, lambda r: r["tokens"] == 850_000)
    assert sub_row["parent"] == str(parent.path)
    parent.assistant(100_000)
    assert shared.hook_out("claude", parent.payload("PostToolUse")) is None


def test_sidechain_lines_of_a_subagent_transcript_count_for_the_subagent(shared: World) -> None:
    # Claude Code marks every line of a subagent's own transcript `isSidechain: true` (with its
    # `agentId`). In the parent's file such lines are skipped; in the subagent's file they are
    # the subagent's context and must be counted for it.
    parent = shared.claude()
    parent.assistant(100_000)
    sub = shared.claude_subagent(parent, "c0ffee0123456789")
    row = keep_writing_until_listed(
        shared, sub, 400_000, lambda: sub.assistant(400_000, sidechain=True, agent_id=sub.name)
    )
    assert row["parent"] == str(parent.path)
    assert row["tokens"] == 400_000


def test_sidechain_lines_in_the_parent_do_not_count(shared: World) -> None:
    t = shared.claude()
    t.assistant(100_000)
    t.assistant(900_000, sidechain=True)
    assert shared.hook_out("claude", t.payload("PostToolUse")) is None
    row = shared.row(t)
    assert row is not None and row["tokens"] == 100_000


def test_ended_sessions_leave_the_list_after_ended_minutes(world: World) -> None:
    world.write_config("[sessions]\nended_minutes = 0\n")
    world.start()
    t = world.claude()
    t.assistant(100_000)
    world.hook_out("claude", t.payload("PostToolUse"))
    assert world.row(t) is not None
    world.hook_out("claude", t.payload("SessionEnd"))
    world.wait_for(lambda: world.row(t) is None, WATCH_TIMEOUT, "the ended session to go")


def test_codex_resume_moves_the_session_to_its_new_rollout(shared: World) -> None:
    old = shared.codex()
    old.response(100_000)
    shared.hook_out("codex", old.payload("PostToolUse"))
    new = shared.codex(old.session_id, started="2026-11-29T22-10-00")  # `codex resume`
    new.response(120_000)
    shared.hook_out("codex", new.payload("SessionStart"))
    old_row, new_row = shared.row(old), shared.row(new)
    assert old_row is not None and old_row["ended_at"] is not None
    assert new_row is not None and new_row["ended_at"] is None and new_row["tokens"] == 120_000
    listed = [r for r in shared.status()["sessions"] if r["session_id"] == old.session_id]
    assert sum(r["ended_at"] is None for r in listed) == 1


def test_the_claude_code_version_in_the_transcript_picks_its_compaction_rule(
    shared: World,
) -> None:
    # Claude Code 2.1.197 never auto-compacted claude-opus-4-8 on a 1M window (the brief); 2.1.332
    # compacts it at 967,000. The daemon reads the version from each line of the transcript.
    t = shared.claude()
    t.model = "claude-opus-4-8"
    row = keep_writing_until_listed(
        shared, t, 500_000, lambda: t.assistant(500_000, version="2.1.197")
    )
    row = shared.wait_row(t, lambda r: r["tokens"] == 500_000, WATCH_TIMEOUT)
    assert (row["agent_version"], row["auto_compaction"], row["compaction_at"]) == (
        "2.1.197",
        False,
        None,
    )
    t.assistant(510_000, version="2.1.332")  # updated within the session
    row = shared.wait_row(t, lambda r: r["tokens"] == 510_000, WATCH_TIMEOUT)
    assert (row["agent_version"], row["auto_compaction"], row["compaction_at"]) == (
        "2.1.332",
        True,
        967_000,
    )
