"""The Claude models Claude Code runs: window and maximum output, each row with its source.

`window` is the window Claude Code gives the model id as its transcript and hooks name it (no
"[1m]" suffix): the API's documented window, except where Claude Code was measured to run the
bare id smaller (claude-sonnet-4-6: 200k without "[1m]", brief section 2). A "[1m]" in the
statusline's id outranks the table (`ctxd.core.window`), and so does the statusline's own size.

`max_output` is the documented maximum output. Claude Code's compaction rule uses only
min(max output, 20,000) (`compaction.py`), so any figure of 20,000 or more gives the same point;
no model here documents less. Claude Code's own default `max_tokens` per model is not published.
"""

from __future__ import annotations

from ctxd.agents.models import ModelInfo

__all__ = ["MODELS"]

_OVERVIEW = "platform.claude.com/docs/en/models/overview"
_PAGE = "platform.claude.com/docs/en/models/{}/overview"
_LEGACY = "Anthropic legacy model figures as quoted in provider catalogs (not re-checked)"

MODELS: tuple[ModelInfo, ...] = (
    ModelInfo(
        "claude-fable-5-2",
        1_000_000,
        128_000,
        "platform.claude.com model pages, 'compares to the current lineup' table",
    ),
    ModelInfo("claude-fable-5-1", 1_000_000, 128_000, _OVERVIEW),
    ModelInfo("claude-fable-5", 1_000_000, 128_000, _PAGE.format("fable-5")),
    ModelInfo(
        "claude-mythos-5",
        1_000_000,
        128_000,
        _PAGE.format("fable-5") + " (Mythos 5 shares Fable 5's specifications)",
    ),
    ModelInfo(
        "claude-opus-5-5",
        1_000_000,
        128_000,
        _PAGE.format("opus-5-5") + "; measured: statusline window 1,000,000 (Claude Code 2.1.332)",
    ),
    ModelInfo("claude-opus-5", 1_000_000, 128_000, _PAGE.format("opus-5")),
    ModelInfo("claude-opus-4-8", 1_000_000, 128_000, _PAGE.format("opus-4-8")),
    ModelInfo(
        "claude-opus-4-7", 1_000_000, 128_000, "docs.aws.amazon.com Bedrock model card 'Opus 4.7'"
    ),
    ModelInfo("claude-opus-4-6", 1_000_000, 128_000, _PAGE.format("opus-4-6")),
    ModelInfo("claude-opus-4-5", 200_000, 64_000, _PAGE.format("opus-4-5")),
    ModelInfo("claude-opus-4-1", 200_000, 32_000, _LEGACY),
    ModelInfo("claude-opus-4", 200_000, 32_000, _LEGACY),
    ModelInfo("claude-sonnet-5-5", 1_000_000, 128_000, _PAGE.format("sonnet-5-5")),
    ModelInfo("claude-sonnet-5", 1_000_000, 128_000, _PAGE.format("sonnet-5")),
    ModelInfo(
        "claude-sonnet-4-6",
        200_000,
        128_000,
        _PAGE.format("sonnet-4-6") + " (1M by API); measured: Claude Code runs the bare id at "
        "200,000 and compacts at 167,000 (2.1.197, 2.1.332)",
    ),
    ModelInfo(
        "claude-sonnet-4-5", 200_000, 64_000, _PAGE.format("sonnet-4-5") + " (1M only with [1m])"
    ),
    ModelInfo("claude-sonnet-4", 200_000, 64_000, _LEGACY),
    ModelInfo("claude-3-7-sonnet", 200_000, 64_000, _LEGACY),
    ModelInfo("claude-haiku-5-5", 1_000_000, 128_000, _PAGE.format("haiku-5-5")),
    ModelInfo("claude-haiku-4-5", 200_000, 64_000, _OVERVIEW),
)
