"""The windows pi runs models with where ctxd's shared table would say otherwise, by model id.

pi compacts against its own catalog's `contextWindow` (the model's as pi states it, not the 95 %
share Codex reports, which the shared table holds for Codex's models). By provider and model,
`catalog.py` gives that window for every model of the providers it keeps; these rows stand where
it gives none (a model named without a provider pi's catalog keeps: an OpenRouter or Bedrock id,
normalised to the model's own) and carry the other windows the model's owner states (`sizes`).
Rows from pi 1.6.0's bundled catalog, `@earendil-works/pi-ai` dist/providers/data/openai.json
and openai-codex.json (the OpenAI API and ChatGPT sign-in providers). Elsewhere the same ids run
with 1,050,000: on Azure, GitHub Copilot and OpenCode `catalog.py` says so; through OpenRouter or
Bedrock only pi's `custom` ctxd entry or the session's own usage tells.

OpenAI's API takes the gpt-5.6 family beyond pi's 272,000: its owner states 372,000 (Codex
0.144.0's bundled catalog, `context_window` and `max_context_window`; Codex 0.144 reports
353,400 = 95 % of it) and up to 872,000 (Codex 0.171.0's `max_context_window`), and a real
gpt-5.6-sol session under pi held 371,566 and overflowed at 371,606. A session that holds more
than 272,000 ran with the next of those (`ModelInfo.sizes`), not with the 400,000 of another
model.
"""

from __future__ import annotations

from ctxd.agents.models import ModelInfo

__all__ = ["MODELS"]

#: The windows OpenAI states for the gpt-5.6 family besides 272,000 (see the docstring).
_GPT_5_6_SIZES = (372_000, 872_000)
_CATALOG = "pi 1.6.0 catalog (pi-ai providers/data/openai.json, openai-codex.json: contextWindow)"

MODELS: tuple[ModelInfo, ...] = (
    ModelInfo("gpt-5.6-sol", 272_000, 128_000, _CATALOG, _GPT_5_6_SIZES),
    ModelInfo("gpt-5.6-terra", 272_000, 128_000, _CATALOG, _GPT_5_6_SIZES),
    ModelInfo("gpt-5.6-luna", 272_000, 128_000, _CATALOG, _GPT_5_6_SIZES),
    ModelInfo("gpt-5.6-cyber", 400_000, 128_000, _CATALOG),
    ModelInfo("gpt-5.5", 272_000, 128_000, _CATALOG),
)
