"""Gemini CLI and Codex CLI through real `ctxd-hook` processes, on their real payloads and
transcript formats.

Gemini CLI: window 1,048,576 (built-in table), compression at half of it (524,288 tokens), so
WARNING starts at 65 % of that (340,788 tokens) and the handoff at 70 % (367,002).
Codex CLI: the rollout reports 258,400 (95 % of 272,000); compaction at 90 % of 272,000 =
244,800 tokens, so WARNING starts at 159,120 tokens and the handoff at 171,360.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from conftest import CodexTranscript, GeminiTranscript, World


def context_of(out: Any, event: str) -> str:
    assert out is not None and set(out) == {"hookSpecificOutput"}, out
    spec = out["hookSpecificOutput"]
    assert spec["hookEventName"] == event
    text: str = spec["additionalContext"]
    return text


# ---------------------------------------------------------------------- Gemini CLI


def after_tool(world: World, g: GeminiTranscript, tokens: int) -> Any:
    g.gemini(tokens)
    return world.hook_out("gemini", g.payload("AfterTool"))


def test_gemini_after_tool_gets_an_after_tool_envelope(shared: World) -> None:
    g = shared.gemini()
    assert after_tool(shared, g, 300_000) is None  # 57 % of the room before compression
    text = context_of(after_tool(shared, g, 360_000), "AfterTool")
    assert text.startswith("CONTEXT WARNING:")
    assert "360,000 of 1,048,576 tokens" in text
    row = shared.row(g)
    assert row is not None
    assert (row["agent"], row["model"], row["window"]) == ("gemini", "gemini-3.8-flash", 1_048_576)
    assert row["tokens_to_compaction"] == 524_288 - 360_000


def test_gemini_precompress_auto_does_not_reset_the_debounce(shared: World) -> None:
    # Gemini CLI fires PreCompress(auto) before every model turn, compressed or not.
    g = shared.gemini()
    assert after_tool(shared, g, 360_000) is not None
    assert after_tool(shared, g, 361_000) is None
    assert shared.hook_out("gemini", g.payload("PreCompress")) is None
    assert after_tool(shared, g, 362_000) is None
    assert shared.hook_out("gemini", g.payload("PreCompress")) is None
    assert after_tool(shared, g, 363_000) is None
    row = shared.row(g)
    assert row is not None and row["compactions"] == 0


def test_gemini_escalation_and_after_agent_handoff(shared: World) -> None:
    g = shared.gemini()
    assert context_of(after_tool(shared, g, 360_000), "AfterTool").startswith("CONTEXT WARNING:")
    text = context_of(after_tool(shared, g, 400_000), "AfterTool")
    assert text.startswith("CONTEXT CRITICAL:")
    out = shared.hook_out("gemini", g.payload("AfterAgent"))
    assert set(out) == {"systemMessage"} and out["systemMessage"].startswith("CONTEXT HANDOFF:")
    assert shared.hook_out("gemini", g.payload("AfterAgent")) is None


def test_gemini_block_handoff_is_a_deny(world: World) -> None:
    world.write_config('[handoff]\naction = "block"\n')
    world.start()
    g = world.gemini()
    g.gemini(380_000)
    out = world.hook_out("gemini", g.payload("AfterAgent"))
    assert out is not None and out["decision"] == "deny"
    assert out["reason"].startswith("CONTEXT HANDOFF:")
    again = g.payload("AfterAgent", stop_hook_active=True)
    assert world.hook_out("gemini", again) is None


def test_gemini_silent_below_thresholds(shared: World) -> None:
    g = shared.gemini()
    g.gemini(100_000)
    for event in ("SessionStart", "BeforeAgent", "AfterTool", "PreCompress", "AfterAgent"):
        result = shared.hook("gemini", g.payload(event))
        assert (result.returncode, result.stdout, result.stderr) == (0, b"", b""), event


# ---------------------------------------------------------------------- Codex CLI


def post_tool_use(world: World, c: CodexTranscript, tokens: int) -> Any:
    # When PostToolUse fires, the response's token_usage_record is on disk but its token_count
    # is not (Codex writes that after the tool's output).
    c.response(tokens)
    out = world.hook_out("codex", c.payload("PostToolUse"))
    c.token_count(tokens)
    return out


def test_codex_post_tool_use_context_is_not_one_call_late(shared: World) -> None:
    c = shared.codex()
    assert post_tool_use(shared, c, 100_000) is None
    text = context_of(post_tool_use(shared, c, 165_000), "PostToolUse")
    assert text.startswith("CONTEXT WARNING:")
    assert "165,000 of" in text
    row = shared.row(c)
    assert row is not None
    assert (row["agent"], row["model"], row["tokens"]) == ("codex", "gpt-5.5", 165_000)
    assert row["tokens_to_compaction"] == 244_800 - 165_000


def test_codex_debounce_and_escalation(shared: World) -> None:
    c = shared.codex()
    got = [post_tool_use(shared, c, t) for t in (165_000, 166_000, 167_000, 190_000)]
    assert [out is not None for out in got] == [True, False, False, True]
    assert context_of(got[3], "PostToolUse").startswith("CONTEXT CRITICAL:")


def test_codex_stop_handoff_once(shared: World) -> None:
    c = shared.codex()
    c.response(175_000)  # 71.5 % of the room before compaction
    c.token_count(175_000)
    assert shared.hook_out("codex", c.payload("Stop.active")) is None
    out = shared.hook_out("codex", c.payload("Stop"))
    assert set(out) == {"systemMessage"}
    assert out["systemMessage"].startswith("CONTEXT HANDOFF:")
    assert shared.hook_out("codex", c.payload("Stop")) is None


def test_codex_block_handoff(world: World) -> None:
    world.write_config('[handoff]\naction = "block"\n')
    world.start()
    c = world.codex()
    c.response(175_000)
    out = world.hook_out("codex", c.payload("Stop"))
    assert out == {"decision": "block", "reason": out["reason"]}
    assert out["reason"].startswith("CONTEXT HANDOFF:")
    assert world.hook_out("codex", c.payload("Stop.active")) is None


def test_codex_precompact_resets_the_debounce(shared: World) -> None:
    c = shared.codex()
    assert post_tool_use(shared, c, 165_000) is not None
    assert post_tool_use(shared, c, 165_000) is None
    assert shared.hook_out("codex", c.payload("PreCompact")) is None
    assert post_tool_use(shared, c, 165_000) is not None


def test_codex_silent_below_thresholds(shared: World) -> None:
    c = shared.codex()
    c.response(50_000)
    for event in ("SessionStart", "UserPromptSubmit", "PostToolUse", "Stop"):
        result = shared.hook("codex", c.payload(event))
        assert (result.returncode, result.stdout, result.stderr) == (0, b"", b""), event


def test_gemini_compression_in_the_transcript_resets_the_debounce(shared: World) -> None:
    g = shared.gemini()
    assert after_tool(shared, g, 360_000) is not None
    assert after_tool(shared, g, 361_000) is None
    g.compress()
    # Warned again at once (the debounce starts afresh), with the note after a compaction once.
    text = context_of(after_tool(shared, g, 360_000), "AfterTool")
    assert text.startswith("[ctxd continuity]") and "\nCONTEXT WARNING:" in text, text
    assert after_tool(shared, g, 361_000) is None
    row = shared.row(g)
    assert row is not None and row["compactions"] == 1
