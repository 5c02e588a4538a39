"""The Gemini models Gemini CLI runs: window and maximum output, each row with its source.

`window` is the input token limit Google documents; Gemini CLI's own `tokenLimit()` gives
1,048,576 for every model it knows and as its default, and compresses at a share of it.
"""

from __future__ import annotations

from ctxd.agents.models import ModelInfo

__all__ = ["DEFAULT_WINDOW", "MODELS"]

_PAGE = "ai.google.dev/gemini-api/docs/models/{}"
_CLI = "google-gemini/gemini-cli packages/core/src/core/tokenLimits.ts (window)"
_FLASH_GUIDE = "docs.cloud.google.com 'Developer's guide to Gemini 3.8 Flash', specifications"

#: Gemini CLI's window for a model it does not know (`tokenLimit()`'s default).
DEFAULT_WINDOW = 1_048_576

MODELS: tuple[ModelInfo, ...] = (
    ModelInfo("gemini-3.8-flash", 1_048_576, 65_536, _FLASH_GUIDE),
    ModelInfo("gemini-3.7-flash", 1_048_576, 65_536, _FLASH_GUIDE),
    ModelInfo("gemini-3.5-flash-lite", 1_048_576, 65_536, _PAGE.format("gemini-3.5-flash-lite")),
    ModelInfo("gemini-3.1-pro", 1_048_576, 65_536, _PAGE.format("gemini-3.1-pro-preview")),
    ModelInfo("gemini-3-pro", 1_048_576, 65_536, _PAGE.format("gemini-3-pro-preview")),
    ModelInfo("gemini-3-flash", 1_048_576, 65_536, _CLI),
    ModelInfo("gemini-2.5-pro", 1_048_576, 65_536, _CLI + "; " + _PAGE.format("gemini-2.5-pro")),
    ModelInfo(
        "gemini-2.5-flash", 1_048_576, 65_536, _CLI + "; " + _PAGE.format("gemini-2.5-flash")
    ),
    ModelInfo("gemini-2.5-flash-lite", 1_048_576, 65_536, _CLI + "; Oracle OCI model page"),
    # Every other Gemini id: Gemini CLI's default.
    ModelInfo("gemini", DEFAULT_WINDOW, 65_536, _CLI + " (default)"),
)
