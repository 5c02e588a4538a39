"""The OpenAI models Codex CLI runs: window and maximum output, each row with its source.

`window` is the window of Codex's model catalog (`context_window`), which is what Codex compacts
against; its rollouts report 95 % of it as `model_context_window`, which outranks this table.
"""

from __future__ import annotations

from ctxd.agents.models import ModelInfo

__all__ = ["MODELS"]

_CATALOG = "openai/codex codex-rs/core/models.json (context_window)"
_INFO = "openai/codex codex-rs/core/src/openai_model_info.rs"
#: What OpenAI states for the gpt-5.6 family, in the catalog Codex ships (and runs it with by
#: default); `max_context_window` is the most `model_context_window` may raise it to. The figure
#: moved between releases, so a rollout's own report (which outranks this row) decides.
_BUNDLED = (
    "Codex 0.171.0's bundled model catalog: context_window 272,000, max_context_window 872,000 "
    "(Codex 0.144.0's: 372,000 and 372,000)"
)

MODELS: tuple[ModelInfo, ...] = (
    ModelInfo("gpt-5.6-sol", 272_000, 128_000, _BUNDLED),
    ModelInfo("gpt-5.6-terra", 272_000, 128_000, _BUNDLED),
    ModelInfo("gpt-5.6-luna", 272_000, 128_000, _BUNDLED),
    ModelInfo(
        "gpt-5.5",
        272_000,
        128_000,
        "measured: Codex 0.171.0 reports 258,400 = 95 % of 272,000 (brief section 2)",
    ),
    ModelInfo("gpt-5.2-codex", 272_000, 128_000, _CATALOG + "; max output: " + _INFO),
    ModelInfo("gpt-5.2", 272_000, 128_000, _CATALOG + "; max output: " + _INFO),
    ModelInfo("gpt-5.1-codex-max", 272_000, 128_000, _CATALOG + "; max output: " + _INFO),
    ModelInfo("gpt-5.1-codex", 272_000, 128_000, _CATALOG + "; max output: " + _INFO),
    # Codex's own fallback for every other gpt-5* slug.
    ModelInfo("gpt-5", 272_000, 128_000, _INFO + ' (slug.starts_with("gpt-5"))'),
    ModelInfo("o3", 200_000, 100_000, _INFO),
    ModelInfo("o4-mini", 200_000, 100_000, _INFO),
)
