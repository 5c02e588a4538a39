"""Writes ctxd/agents/pi/catalog.json, the windows pi runs its models with, from pi's own bundled
catalogs as tests/e2e/install-agents.sh installs them (`CTXD_E2E_CACHE`, else tests/e2e/.cache):

- pi 1.x, `@earendil-works/pi-ai` dist/providers/data/<provider>.json: `{api: {"<type>:<id>":
  {id, provider, contextWindow, ..., type}}}`; only `chat` entries are models a session runs
  (`classifier` and `image` entries are not);
- pi 0.73.1, the last 0.x, `@mariozechner/pi-ai` dist/models.generated.js: `export const MODELS =
  {provider: {id: {id, provider, ..., contextWindow, ...}}}`, a JavaScript object literal of
  plain values (unquoted keys, trailing commas), read here as JSON once those are mended.

pi 1.x's figure wins where both have one; 0.73.1 keeps the models removed since, which real 0.x
sessions ran (GitHub Copilot's claude-opus-4.6). Only the providers in `KEPT` go in (the reason
is in ctxd/agents/pi/catalog.py's docstring).

    python tests/agents/pi/make_pi_catalog.py           # writes the file, prints what it holds
    python tests/agents/pi/make_pi_catalog.py --check   # exit 1 when the file differs

Plain `json` and no ctxd imports: tests/agents/pi/test_pi_catalog.py runs it with `--check`.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[3]
OUT = ROOT / "ctxd" / "agents" / "pi" / "catalog.json"
PI1 = Path("pi/node_modules/@earendil-works/pi-ai")
PI0 = Path("npm/node_modules/@mariozechner/pi-ai")

#: The providers whose windows ctxd ships: the model makers' own APIs and sign-in plans, the
#: subscriptions that serve the makers' models under the makers' ids, and the makers' models on
#: the clouds that name them so.
KEPT = frozenset(
    {
        # the makers
        "anthropic",
        "openai",
        "openai-codex",  # ChatGPT sign-in
        "google",
        "google-vertex",
        "xai",
        "mistral",
        "deepseek",
        "meta",
        "moonshotai",
        "moonshotai-cn",
        "kimi-coding",
        "minimax",
        "minimax-cn",
        "zai",
        "zai-coding-cn",
        "xiaomi",
        "xiaomi-token-plan-ams",
        "xiaomi-token-plan-cn",
        "xiaomi-token-plan-sgp",
        "qwen-token-plan",
        "qwen-token-plan-cn",
        "qwen-token-plan-individual",
        "qwen-token-plan-individual-cn",
        "ant-ling",
        # the subscriptions
        "github-copilot",
        "opencode",
        "opencode-go",
        "radius",  # pi's own
        # OpenAI's models on Azure, under OpenAI's ids (the provider's name in 1.x, in 0.73.1)
        "azure",
        "azure-openai-responses",
    }
)

Windows = dict[str, dict[str, int]]


def cache_dir() -> Path:
    """Where tests/e2e/install-agents.sh installs the agents."""
    return Path(os.environ.get("CTXD_E2E_CACHE") or ROOT / "tests" / "e2e" / ".cache")


def _version(package: Path) -> str:
    return str(json.loads((package / "package.json").read_text(encoding="utf-8"))["version"])


def _window(model: dict[str, Any]) -> int | None:
    size = model.get("contextWindow")
    return size if type(size) is int and size > 0 else None


def read_pi1(package: Path) -> Windows:
    """Every chat model of pi 1.x's catalog: provider -> id -> contextWindow."""
    found: Windows = {}
    for path in sorted((package / "dist" / "providers" / "data").glob("[!.]*.json")):
        for models in json.loads(path.read_text(encoding="utf-8")).values():
            for model in models.values():
                size = _window(model)
                if model.get("type", "chat") == "chat" and size is not None:
                    found.setdefault(model["provider"], {})[model["id"]] = size
    return found


_KEY = re.compile(r"^(\s*)([A-Za-z_][A-Za-z0-9_]*):", re.MULTILINE)
_TRAILING_COMMA = re.compile(r",(\s*[}\]])")


def read_pi0(package: Path) -> Windows:
    """Every model of pi 0.x's catalog: provider -> id -> contextWindow."""
    text = (package / "dist" / "models.generated.js").read_text(encoding="utf-8")
    start = text.index("=", text.index("export const MODELS")) + 1
    literal = text[start : text.rindex("};") + 1]
    catalog = json.loads(_TRAILING_COMMA.sub(r"\1", _KEY.sub(r'\1"\2":', literal)))
    found: Windows = {}
    for models in catalog.values():
        for model in models.values():
            size = _window(model)
            if size is not None:
                found.setdefault(model["provider"], {})[model["id"]] = size
    return found


def build(cache: Path) -> dict[str, Any]:
    """The document catalog.json holds: where it comes from and the kept providers' windows."""
    pi1, pi0 = cache / PI1, cache / PI0
    merged: Windows = {}
    left_out: set[str] = set()
    for found in (read_pi0(pi0), read_pi1(pi1)):  # 1.x last: its figures win
        for provider, models in found.items():
            if provider in KEPT:
                merged.setdefault(provider, {}).update(models)
            else:
                left_out.add(provider)
    return {
        "about": (
            "The window pi runs each model with (contextWindow), by provider and model id,"
            " from pi's bundled catalogs, but for the providers left out (ctxd/agents/pi/"
            "catalog.py says why); written by tests/agents/pi/make_pi_catalog.py."
        ),
        "sources": {
            "@earendil-works/pi-ai": _version(pi1),
            "@mariozechner/pi-ai": _version(pi0),
        },
        "left_out": sorted(left_out),
        "windows": {p: dict(sorted(merged[p].items())) for p in sorted(merged)},
    }


def render(doc: dict[str, Any]) -> str:
    # One model a line: a new release shows in a diff as the lines it changes.
    return json.dumps(doc, indent=1, ensure_ascii=False) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="compare, do not write")
    args = parser.parse_args(argv)
    cache = cache_dir()
    if not (cache / PI1).is_dir() or not (cache / PI0).is_dir():
        print(
            f"no pi 1.x and 0.73.1 under {cache}: run tests/e2e/install-agents.sh", file=sys.stderr
        )
        return 2
    text = render(build(cache))
    if args.check:
        if OUT.read_text(encoding="utf-8") != text:
            print(f"{OUT} differs from what {cache} gives: run {__file__}", file=sys.stderr)
            return 1
        return 0
    OUT.write_text(text, encoding="utf-8")
    windows = json.loads(text)["windows"]
    entries = sum(len(models) for models in windows.values())
    print(f"{OUT}: {len(windows)} providers, {entries} models, {len(text.encode())} bytes")
    return 0


if __name__ == "__main__":
    sys.exit(main())
