"""The windows pi runs models with where ctxd's shared table would say otherwise.

pi compacts against its own catalog's `contextWindow` (the model's as pi states it, not the 95 %
share Codex reports, which the shared table holds for Codex's models). Rows from pi 1.6.0's
bundled catalog, `@earendil-works/pi-ai` dist/providers/data/openai.json and openai-codex.json
(the OpenAI API and ChatGPT sign-in providers); through gateways (OpenRouter, Azure, Bedrock) the
same ids run with 1,050,000, which only pi's `custom` ctxd entry or the session's own usage tells.
"""

from __future__ import annotations

from ctxd.agents.models import ModelInfo

__all__ = ["MODELS"]

_CATALOG = "pi 1.6.0 catalog (pi-ai providers/data/openai.json, openai-codex.json: contextWindow)"

MODELS: tuple[ModelInfo, ...] = (
    ModelInfo("gpt-5.6-sol", 272_000, 128_000, _CATALOG),
    ModelInfo("gpt-5.6-terra", 272_000, 128_000, _CATALOG),
    ModelInfo("gpt-5.6-luna", 272_000, 128_000, _CATALOG),
    ModelInfo("gpt-5.6-cyber", 400_000, 128_000, _CATALOG),
    ModelInfo("gpt-5.5", 272_000, 128_000, _CATALOG),
)
