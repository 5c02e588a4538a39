"""Independent reference figures for the public transcripts under tests/data/public/.

Deliberately simple and self-contained: plain `json`, no ctxd imports, whole-file reads.
It states, per file, the context-token timeline ctxd *should* report, so a test can compare
`ctxd replay` against numbers computed by a second, naive implementation of the same rules.

    expected(path) -> {"agent": "claude"|"codex"|"gemini"|"copilot"|"opencode"|"pi",
                       "final_tokens": int | None,   # context size after the last turn
                       "turn_tokens": [int, ...],    # one figure per assistant turn, in order
                       "window": int | None,         # window the transcript itself states
                       "compactions": [int, ...]}    # pi only: each compaction's tokensBefore

Every rule below carries the reason it exists.
"""

from __future__ import annotations

import json
import os
from typing import Any

DATA_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "public")


def _records(path: str) -> list[dict[str, Any]]:
    """Every JSON object in a JSON-lines file, in order.

    Blank or unparsable lines are skipped: a live transcript can end in a half-written line,
    and none of the saved public files has a bad line, so skipping changes no figure."""
    out: list[dict[str, Any]] = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            line = line.strip()
            if not line:
                continue
            try:
                obj = json.loads(line)
            except ValueError:
                continue
            if isinstance(obj, dict):
                out.append(obj)
    return out


def _int(value: Any) -> int:
    # Usage fields are absent on some older records; absent counts as 0, never as an error.
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


# --------------------------------------------------------------------------- Claude Code


def _is_claude_subagent_file(path: str) -> bool:
    # Subagent transcripts are named agent-<id>.jsonl, both in the 2.0.x layout (beside the
    # session file) and the 2.1.x layout (<session>/subagents/agent-<id>.jsonl). Every line in
    # them has isSidechain: true, so for such a file the sidechain IS the conversation.
    return os.path.basename(path).startswith("agent-")


def _claude(path: str) -> dict[str, Any]:
    subagent = _is_claude_subagent_file(path)
    order: list[str] = []  # message ids in order of first appearance
    by_id: dict[str, int] = {}
    anonymous = 0
    for rec in _records(path):
        # Only top-level `assistant` records are API responses of this conversation. In 2.1.x,
        # `progress` records (data.type == "agent_progress") embed a running subagent's
        # assistant messages *with usage*; those are the subagent's context, not ours.
        if rec.get("type") != "assistant":
            continue
        # Sidechain lines in a main session file are a subagent's (Task tool, 1.0.x) turns and
        # measure the subagent's own context, not the main conversation's.
        if rec.get("isSidechain") is True and not subagent:
            continue
        # API error placeholders carry zero/fake usage; they are not a measurement.
        if rec.get("isApiErrorMessage") is True:
            continue
        msg = rec.get("message")
        if not isinstance(msg, dict):
            continue
        # `<synthetic>` messages are written by Claude Code itself (e.g. "No response
        # requested."), with all-zero usage: no request was made, the context did not change.
        if msg.get("model") == "<synthetic>":
            continue
        usage = msg.get("usage")
        if not isinstance(usage, dict):
            continue
        # Context = everything the model read for this request: fresh input plus the cached
        # prefix (written this turn or read from cache). output_tokens is excluded: it becomes
        # input of the *next* request and is counted there.
        tokens = (
            _int(usage.get("input_tokens"))
            + _int(usage.get("cache_creation_input_tokens"))
            + _int(usage.get("cache_read_input_tokens"))
        )
        mid = msg.get("id")
        if not isinstance(mid, str) or not mid:
            anonymous += 1
            mid = f"\0anonymous-{anonymous}"
        # One API response is written as several lines (one per content block: thinking, text,
        # tool_use), all with the same message.id and a usage that may grow as it streams. It
        # is one turn; the last copy holds the final usage.
        if mid not in by_id:
            order.append(mid)
        by_id[mid] = tokens
    turns = [by_id[m] for m in order]
    # The transcript never states Claude's window (it depends on model and plan), so None.
    return {
        "agent": "claude",
        "final_tokens": turns[-1] if turns else None,
        "turn_tokens": turns,
        "window": None,
    }


# --------------------------------------------------------------------------- Codex CLI

_CODEX_CATEGORIES = (
    "input_tokens",
    "cached_input_tokens",
    "cache_write_input_tokens",
    "output_tokens",
    "reasoning_output_tokens",
)


def _codex(path: str) -> dict[str, Any]:
    turns: list[int] = []
    final: int | None = None
    window: int | None = None
    previous_total_usage: Any = None
    for rec in _records(path):
        payload = rec.get("payload")
        if rec.get("type") != "event_msg" or not isinstance(payload, dict):
            continue
        if payload.get("type") != "token_count":
            continue
        info = payload.get("info")
        # info is null on the first token_count of a session (rate limits only): no figure.
        if not isinstance(info, dict):
            continue
        last = info.get("last_token_usage")
        if not isinstance(last, dict):
            continue
        total = last.get("total_tokens")
        if not isinstance(total, int):
            continue
        win = info.get("model_context_window")
        win = win if isinstance(win, int) and win > 0 else None
        # Around a compaction Codex writes impossible figures: a usage whose every category but
        # total_tokens is 0, or a total larger than the window itself. Neither is a context size.
        if all(_int(last.get(k)) == 0 for k in _CODEX_CATEGORIES):
            continue
        if win is not None and total > win:
            continue
        # last_token_usage is the usage of the latest request alone (total_token_usage is the
        # session's running sum, which grows past the window and is no context size); its
        # total_tokens = input (cached included) + output is what that request left in context.
        final = total
        # model_context_window is stated on every token_count (null in old versions, e.g.
        # 0.39 via the VS Code extension): take it from the same record as the final figure.
        window = win
        # Codex re-emits an identical token_count (same cumulative total_token_usage) when only
        # rate limits changed; that is the same turn again, not a new one.
        total_usage = info.get("total_token_usage")
        if total_usage is not None and total_usage == previous_total_usage:
            continue
        previous_total_usage = total_usage
        turns.append(total)
    return {"agent": "codex", "final_tokens": final, "turn_tokens": turns, "window": window}


# --------------------------------------------------------------------------- Gemini CLI


def _gemini_messages(path: str) -> list[dict[str, Any]]:
    if path.endswith(".json"):
        # Older recordings (chats/session-*.json): one object rewritten in place, with the
        # conversation in `messages`.
        with open(path, encoding="utf-8") as f:
            doc = json.load(f)
        msgs = doc.get("messages") if isinstance(doc, dict) else None
        return [m for m in msgs if isinstance(m, dict)] if isinstance(msgs, list) else []
    # Newer recordings (chats/session-*.jsonl): line 1 is session metadata, `{"$set": ...}`
    # lines update metadata; message records are the lines with a `type`. A message is
    # re-appended whole when it changes (same id), so the last copy of an id wins, in the
    # position of its first appearance.
    order: list[str] = []
    by_id: dict[str, dict[str, Any]] = {}
    for n, rec in enumerate(_records(path)):
        if "type" not in rec:
            continue
        mid = rec.get("id")
        key = mid if isinstance(mid, str) and mid else f"\0line-{n}"
        if key not in by_id:
            order.append(key)
        by_id[key] = rec
    return [by_id[k] for k in order]


def _gemini(path: str) -> dict[str, Any]:
    turns: list[int] = []
    for msg in _gemini_messages(path):
        if msg.get("type") != "gemini":
            continue
        tokens = msg.get("tokens")
        if not isinstance(tokens, dict):
            continue
        # An all-zero `tokens` (seen in 2025-10 recordings) is a request that reported no usage
        # (cancelled/failed); it says nothing about the context, so it is not a turn.
        if all(_int(v) == 0 for v in tokens.values()):
            continue
        # tokens.input is the prompt size of that request (it already includes `cached`, which
        # is the cached part of the input), i.e. the context the model saw.
        turns.append(_int(tokens.get("input")))
    # The recording does not state the model's window, so None.
    return {
        "agent": "gemini",
        "final_tokens": turns[-1] if turns else None,
        "turn_tokens": turns,
        "window": None,
    }


# --------------------------------------------------------------------------- Copilot CLI


def _copilot_metrics(data: dict[str, Any]) -> dict[str, Any]:
    # modelMetrics sits at the top of a shutdown (1.0.102 copies it into accountingSnapshot).
    metrics = data.get("modelMetrics")
    return metrics if isinstance(metrics, dict) else {}


def _copilot_limit(data: dict[str, Any]) -> int:
    # Copilot compacts against the prompt's limit, where the model states one.
    info = data.get("modelInfo") or {}
    limits = (info.get("capabilities") or {}).get("limits") or {}
    return _int(limits.get("max_prompt_tokens")) or _int(limits.get("max_context_window_tokens"))


def _copilot_shutdown(data: dict[str, Any]) -> tuple[Any, bool]:
    """(figure, whether the provider reported it) for one process's shutdown."""
    metrics = _copilot_metrics(data)
    counts = {
        m: _int((v.get("requests") or {}).get("count"))
        for m, v in metrics.items()
        if isinstance(v, dict)
    }
    if sum(counts.values()) == 1:
        # One request in the process: its summed usage is that request's prompt.
        (only,) = [m for m, n in counts.items() if n == 1]
        return _int((metrics[only].get("usage") or {}).get("inputTokens")), True
    if "currentTokens" in data:
        return _int(data.get("currentTokens")), False  # Copilot's own count at exit
    return None, False


def _copilot_request(kind: Any, rec: dict[str, Any], data: dict[str, Any]) -> int | None:
    """The prompt of one agent-loop request as the provider reported it, where the record
    states one: a usage record's inputTokens (its whole prompt), or (1.0.93) the main
    conversation's last model call in a usage checkpoint."""
    if kind == "session.usage_record":
        usage = data.get("usage")
        if isinstance(usage, dict) and usage.get("interactionType", "conversation-agent") == (
            "conversation-agent"
        ):
            return _int(usage.get("inputTokens"))
    if kind == "session.usage_checkpoint" and "agentId" not in rec:
        for state in data.get("promptCacheBreakState") or []:
            if state.get("conversation") == "main":
                return _int(state["models"][state["lastActiveModel"]]["prompt_tokens"])
    return None


def _copilot_parts(data: dict[str, Any]) -> int | None:
    keys = ("systemTokens", "conversationTokens", "toolDefinitionsTokens")
    parts = [_int(data.get(k)) for k in keys if data.get(k) is not None]
    return sum(parts) if parts else None


def _copilot(path: str) -> dict[str, Any]:
    turns: list[int] = []  # figures the provider reported
    final: int | None = None
    window: int | None = None
    per_request = False  # this process wrote per-request figures
    for rec in _records(path):
        kind = rec.get("type")
        data = rec.get("data")
        if not isinstance(data, dict):
            continue
        # The limit Copilot compacts against: a compaction's tokenLimit, or the model's limits
        # that 1.0.91 names on every model call.
        window = _int(data.get("tokenLimit")) or _copilot_limit(data) or window
        prompt = _copilot_request(kind, rec, data)
        # Each process (a start or a resume) writes its own shutdown.
        if kind in ("session.start", "session.resume"):
            per_request = False
        elif prompt is not None:
            per_request = True
            usage = data.get("usage")
            if isinstance(usage, dict):  # a usage record names the prompt's limit too
                window = _int(usage.get("maxPromptTokens")) or window
            turns.append(prompt)
            final = prompt
        elif kind == "session.compaction_start":
            if not per_request:  # Copilot's own count, no provider's
                final = _int(data.get("currentTokens")) or _copilot_parts(data) or final
        elif kind == "session.compaction_complete" and data.get("success") is True:
            # Copilot's UI: the parts of the context left, summed; postCompactionTokens counts
            # the conversation only, unless it is marked as the whole context (1.0.102).
            post = _int(data.get("postCompactionTokens"))
            whole = data.get("tokenAccountingBasis") == "local_full_context_estimate"
            final = (post if whole else None) or _copilot_parts(data) or post or final
        elif kind == "session.shutdown" and not per_request:
            figure, measured = _copilot_shutdown(data)
            if measured:
                turns.append(figure)
            final = figure if figure is not None else final
    return {"agent": "copilot", "final_tokens": final, "turn_tokens": turns, "window": window}


# --------------------------------------------------------------------------- OpenCode


def _opencode_export(path: str) -> dict[str, Any]:
    """What `opencode export` prints, one JSON document: each step-finish part states the
    step's prompt as input plus the cache read and written (the output is not context yet)."""
    with open(path, encoding="utf-8") as f:
        doc = json.load(f)
    turns = []
    for message in doc["messages"]:
        for part in message["parts"]:
            if part.get("type") == "step-finish":
                tokens = part["tokens"]
                cache = tokens.get("cache") or {}
                turns.append(
                    _int(tokens.get("input")) + _int(cache.get("read")) + _int(cache.get("write"))
                )
    final = turns[-1] if turns else None
    return {"agent": "opencode", "final_tokens": final, "turn_tokens": turns, "window": None}


# --------------------------------------------------------------------------- pi


def _pi(path: str) -> dict[str, Any]:
    """A pi session file: the header line, then one entry a line."""
    turns: list[int] = []
    compactions: list[int] = []
    for rec in _records(path):
        if rec.get("type") == "compaction":
            # It states the context it replaced (tokensBefore) and writes no usage: pi knows the
            # new size only at the next answer, so the figures stay the answers'.
            compactions.append(_int(rec.get("tokensBefore")))
            continue
        msg = rec.get("message")
        # Only `message` entries whose message is the assistant's are answers. Other entries
        # with usage, such as the side questions an extension stores in a `custom` entry
        # (`btw-thread-entry`), were asked outside the conversation and measure another context.
        if rec.get("type") != "message" or not isinstance(msg, dict):
            continue
        if msg.get("role") != "assistant":
            continue
        # An answer cut short (aborted) or failed (error) carries no measurement; pi skips it
        # when it looks for the last context size.
        if msg.get("stopReason") in ("aborted", "error"):
            continue
        usage = msg.get("usage")
        if not isinstance(usage, dict):
            continue
        # All zero: a provider that reports no usage. Nothing was measured.
        if all(_int(v) == 0 for k, v in usage.items() if k != "cost"):
            continue
        # The prompt the model read: fresh input plus the cached prefix, read or written. The
        # output is context only from the next request on.
        turns.append(
            _int(usage.get("input")) + _int(usage.get("cacheRead")) + _int(usage.get("cacheWrite"))
        )
    # The file never states the model's window (pi takes it from its model table), so None.
    return {
        "agent": "pi",
        "final_tokens": turns[-1] if turns else None,
        "turn_tokens": turns,
        "window": None,
        "compactions": compactions,
    }


def _qwen(path: str) -> dict[str, Any]:
    """A Qwen Code chat recording: one record a line, each answer an `assistant` record."""
    turns: list[int] = []
    compactions: list[int] = []
    window = None
    for rec in _records(path):
        if rec.get("type") == "system" and rec.get("subtype") == "chat_compression":
            info = (rec.get("systemPayload") or {}).get("info") or {}
            compactions.append(_int(info.get("originalTokenCount")))
            continue
        usage = rec.get("usageMetadata")
        if rec.get("type") != "assistant" or not isinstance(usage, dict):
            continue
        # The prompt of the request, as the API counted it (cached tokens are a part of it);
        # the `ui_telemetry` records repeat it and are no answers.
        turns.append(_int(usage.get("promptTokenCount")))
        # 0.24.x writes the window it counts against on each answer; older versions do not.
        window = rec.get("contextWindowSize") or window
    return {
        "agent": "qwen",
        "final_tokens": turns[-1] if turns else None,
        "turn_tokens": turns,
        "window": window,
        "compactions": compactions,
    }


# --------------------------------------------------------------------------- entry point


def agent_of(path: str) -> str:
    """Which agent wrote a file under tests/data/public (its top-level folder says so)."""
    rel = os.path.relpath(os.path.abspath(path), DATA_DIR)
    top = rel.split(os.sep, 1)[0]
    if top not in ("claude", "codex", "gemini", "copilot", "opencode", "pi", "qwen"):
        raise ValueError(f"{path} is not under {DATA_DIR}/<agent>/")
    return top


def expected(path: str) -> dict[str, Any]:
    agent = agent_of(path)
    if agent == "claude":
        return _claude(path)
    if agent == "codex":
        return _codex(path)
    if agent == "copilot":
        return _copilot(path)
    if agent == "opencode":
        return _opencode_export(path)
    if agent == "pi":
        return _pi(path)
    if agent == "qwen":
        return _qwen(path)
    return _gemini(path)


def all_files() -> list[str]:
    """Every saved public transcript (README.md excluded), sorted."""
    out = []
    for root, _dirs, files in os.walk(DATA_DIR):
        for name in files:
            if name.endswith((".jsonl", ".json")):
                out.append(os.path.join(root, name))
    return sorted(out)


if __name__ == "__main__":
    for p in all_files():
        e = expected(p)
        print(
            f"{os.path.relpath(p, DATA_DIR):48} final={e['final_tokens']} "
            f"window={e['window']} turns={len(e['turn_tokens'])}"
        )
