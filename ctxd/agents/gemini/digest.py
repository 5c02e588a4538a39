"""Gemini CLI chat recordings -> digest events (`ctxd.core.digest`).

What a recording (0.61.0) says, line by line (see `transcript.py` for the file's shape):
- a user message line (`"type":"user"`) whose `content` holds `text` parts is a request the user
  typed (a slash command such as `/compress` is not); `functionResponse` parts are tool results,
  which the gemini message already carries;
- a gemini message line is written again once its tool calls ran, with `toolCalls`: each has its
  `id`, `name`, `args`, `status` ("success" | "error") and `result` (the `functionResponse`,
  whose `response.output` of a shell command ends in `Exit Code: N` when it failed).
  `read_file`/`read_many_files`, `replace`, `write_file` name their files (`file_path`),
  `run_shell_command` its `command`, `write_todos` the whole list (`description`, `status`),
  `invoke_agent` a subagent. Its non-empty `content` is what the model said;
- `{"$set": {"messages": [...]}}` rewrites the list: at the start of a file (a resumed session's
  new file holds the conversation so far: its facts are taken once), and after a compression,
  whose new `<state_snapshot>` summary (or the CLI's fixed acknowledgement of one) counts as a
  compaction. A summary already seen (a resume repeats it) does not count again.

Tool call ids already folded in are remembered (bounded), since a message is written several
times. The facts ride on the usage reader (`transcript.py`, `ctxd.agents.digest`), which hands
over each message line and the records it decodes:
- a gemini message line comes with where its head ends (`take_model_line`): its tool calls are
  walked from their heads without decoding their results (see `_walk`); their facts are folded
  into the book at the end of the feed, or before the facts of a decoded record that has any
  (`_fold_walked`), all at once: the same loop costs less over a feed's calls than a few at a
  time between the usage reader's work. A line not in Gemini CLI's shape to its end, or holding
  a call that did not succeed, is decoded instead;
- a user line is judged from its head: one whose content starts with a `functionResponse` is a
  tool result, any other is kept as a request;
- replies and requests wait for the end of the feed (`flush`): only the newest reply and the
  newest `Limits.asks` requests (and the session's first) can show, so only those are decoded,
  a request's text alone when its line is in the CLI's shape (`_typed_text`). (Holding the
  requests across feeds, until the digest is read, saved about 1 ms of a 20 MB replay's 44,
  but a daemon would hold every session's request lines: kept per feed.)
The legacy single-object `.json` recordings keep no digest (`NullDigestReader`).
"""

from __future__ import annotations

import re
from itertools import islice
from typing import Any

import orjson

from ctxd.agents.digest import Facts, UsageDigestReader, todos_from
from ctxd.agents.gemini.transcript import GeminiReader
from ctxd.agents.lines import decode
from ctxd.core.digest import Digest, DigestEvent

__all__ = ["GeminiDigestReader", "GeminiFacts", "NullDigestReader"]

_SNAPSHOT = "<state_snapshot>"
_ACK = "Got it. Thanks for the additional context!"
_MARKERS = (_SNAPSHOT.encode(), _ACK.encode())
_USER = b'"type":"user"'
_GEMINI = b'"type":"gemini"'
_TYPE = b'","type":"'
_USER_CONTENT = b'user","content":['
_FUNCTION_RESPONSE = b'{"functionResponse"'
_EMPTY = b'"content":""'
_TEXT = b'"content":"'
_TEXT_ENDS = (b'","thoughts":', b'","tokens":')
_TIMESTAMP = b'","timestamp":"'
_TYPED_TEXT = b'","type":"user","content":[{"text":'
_TYPED_TEXT_END = b'"}]}'
_TYPED_TEXT_SHOWN = b'"}],"displayContent":'
_TOOL_CALLS_AT = b',"toolCalls":[{"id":"'
_CALL_AT = b'{"id":"'
_NAME_AT = b'","name":"'
_ARGS_AT = b'","args":'
_RESULT_AT = b',"result":[{"functionResponse":{'
_RESPONSE_AT = b'"response":{'
_RESPONSE_OUTPUT = b'"response":{"output":'
_OUTPUT = b'"output":'
_STATUS_AT = b'}],"status":"'
_SUCCESS = b'success"'
_NEXT_CALL_AT = b'},{"id":"'
_LAST_CALL_END = b"}]}"
_FILE_PATH_KEY = b'"file_path":"'
#: A file tool's args with a path first that `_file_path` would take (quotes inside strings
#: are escaped: the first quote ends it).
_PATH_FIRST = re.compile(rb'\{"file_path":"([^"\\]+)"')
_EXIT_CODE = b"Exit Code: "
_SHELL_NAME = "run_shell_command"
_SHELL = _SHELL_NAME.encode()
#: A tool call's head: `{"id":"…","name":"…","args":` (quotes inside strings are escaped: the
#: first quote ends each); its id is group 1, and `_SHELL_GROUP` is the last group that took
#: part in the match only when the name is a command's.
_CALL_HEAD = re.compile(rb'\{"id":"([^"]*)","name":"(?:(run_shell_command)|[^"]*)","args":')
_SHELL_GROUP = 2
_WINDOW = 400
_EXIT = re.compile(r"Exit Code: (-?\d+)")
_SEEN_KEPT = 64
#: From how many walked calls on their ids are remembered at once (fewer: one at a time).
_REMEMBERED_AT_ONCE = 8
#: What hooks added to a prompt (BeforeAgent, SessionStart context), not what the user typed.
_HOOK_CONTEXT = re.compile(r"<hook_context>.*?</hook_context>", re.S)
_READ = frozenset({"read_file"})
_EDIT = frozenset({"replace", "edit"})
_WRITE = frozenset({"write_file"})
#: Tools whose digest events need their `args` decoded (`_tool_call`), by their raw names.
_DECODED_TOOLS = frozenset({b"read_many_files", b"write_todos", b"invoke_agent"})
#: Tools other than file tools whose `args` are read: the above, and commands.
_ARGS_READ_TOOLS = _DECODED_TOOLS | {_SHELL}
#: A walked tool call (`_walk`): the match of its head (`_CALL_HEAD`, on its line) and where its
#: result starts (its args end there).
_Walked = tuple[re.Match[bytes], int]
#: A file tool's raw name -> how it touches its file.
_FILE_TOOLS = {
    **{name.encode(): "read" for name in _READ},
    **{name.encode(): "edit" for name in _EDIT},
    **{name.encode(): "write" for name in _WRITE},
}


class GeminiDigestReader(UsageDigestReader):
    """A Gemini CLI recording's digest (a `GeminiReader` carrying `GeminiFacts`)."""

    __slots__ = ()

    def __init__(self) -> None:
        super().__init__(GeminiReader(GeminiFacts()))


class GeminiFacts(Facts):
    """The digest side of a `GeminiReader`; see the module docstring."""

    __slots__ = ("_asks", "_replies", "_seen", "_walked", "messages")

    def __init__(self) -> None:
        super().__init__()
        # Tool call ids and summary ids already folded in, as raw bytes: a walked call's id is
        # taken from its line as it is (its text is needed only for a command).
        self._seen: dict[bytes, None] = {}
        #: Message lines seen in this file (the reader counts them).
        self.messages = 0
        # The requests and replies of the current feed (only the newest count): a user line or
        # a (line, where its text starts) not decoded yet, or the text.
        self._asks: list[bytes | str] = []
        self._replies: list[tuple[bytes, int] | str] = []
        # Tool calls walked but not folded in yet (`_fold_walked`), in the file's order.
        self._walked: list[_Walked] = []

    def reset(self) -> None:
        super().reset()
        self._seen.clear()
        self.messages = 0
        self._asks.clear()
        self._replies.clear()
        self._walked.clear()

    def _remember(self, keys: list[bytes]) -> None:
        """`_first_time` for each of `keys`, none of them known, at once."""
        seen = self._seen
        seen.update(dict.fromkeys(keys))
        excess = len(seen) - _SEEN_KEPT
        if excess > 0:
            for oldest in list(islice(seen, excess)):
                del seen[oldest]

    def _first_time(self, key: bytes) -> bool:
        seen = self._seen
        if key in seen:
            return False
        seen[key] = None
        if len(seen) > _SEEN_KEPT:
            del seen[next(iter(seen))]
        return True

    # ------------------------------------------------------------------ lines

    def take_user_line(self, line: bytes) -> None:
        """A message line without tokens (`{"id":"…","timestamp":"…","type":…`): a user's
        request is kept for `flush`; tool results (the gemini message has them) and info lines
        say nothing."""
        kind = line.find(_TYPE, 0, 160)
        if kind < 0:
            if _USER in line[:_WINDOW] or _GEMINI in line[:_WINDOW]:
                record = decode(line)
                if record is not None:
                    self.take_message(record)
            return
        kind += len(_TYPE)
        if line.startswith(_USER_CONTENT, kind):
            if not line.startswith(_FUNCTION_RESPONSE, kind + len(_USER_CONTENT)):
                self._asks.append(line)
        elif line.startswith(b'user"', kind) or line.startswith(b'gemini"', kind):
            record = decode(line)
            if record is not None:
                self.take_message(record)

    def take_model_line(self, line: bytes, content_at: int, rest_at: int) -> bool:
        """A gemini message line whose head the usage reader read: `content_at` is where
        `"content":` is, `rest_at` where the line goes on after the model's name. Its facts are
        taken without decoding it when it is in Gemini CLI's shape to its end (then True; the
        reader relies on that: nothing else follows the tool calls); else nothing is taken and
        the line is to be decoded (False)."""
        reply = not line.startswith(_EMPTY, content_at)
        if reply and not line.startswith(_TEXT, content_at):
            return False
        if rest_at != len(line) - 1:  # not `}` (no tool calls: written before they ran, or none)
            if not line.startswith(_TOOL_CALLS_AT, rest_at):
                return False
            calls = _walk(line, rest_at + len(_TOOL_CALLS_AT) - len(_CALL_AT))
            if calls is None:
                return False
            self._walked += calls
        if reply:
            self._replies.append((line, content_at + len(_TEXT) - 1))
        return True

    def _fold_walked(self) -> None:
        """The tool calls walked since the last fold, folded in, in the file's order.

        They wait for `flush`, or for the facts of a decoded record that has any (tool calls, a
        compaction), which must not overtake them: run over a feed's calls at once, this loop
        finds its code and data in the caches, which it does not when it runs a few calls at a
        time between the usage reader's scans of whole lines. It runs once per tool call of the
        session: the ids are remembered for the batch at once when none is known yet (the usual
        case), and what is only counted or touches a file named in its raw args goes straight
        into the book."""
        calls, self._walked = self._walked, []
        if len(calls) < _REMEMBERED_AT_ONCE:
            calls = [call for call in calls if self._first_time(call[0][1])]
        else:
            ids = [called[1] for called, _ in calls]
            if len(set(ids)) == len(ids) and self._seen.keys().isdisjoint(ids):
                self._remember(ids)
            else:
                calls = [
                    call
                    for call, call_id in zip(calls, ids, strict=True)
                    if self._first_time(call_id)
                ]
        touch, tool, kind_of, path_first = (
            self.book.touch,
            self.book.tool,
            _FILE_TOOLS.get,
            _PATH_FIRST.match,
        )
        for called, result_at in calls:
            line = called.string
            args_at = called.end()
            name = line[called.end(1) + len(_NAME_AT) : args_at - len(_ARGS_AT)]
            kind = kind_of(name)
            if kind is not None:
                # The CLI's usual args, the path first: one match in C, else `_file_path`.
                first = path_first(line, args_at, result_at)
                path = (
                    _file_path(line, args_at, result_at)
                    if first is None
                    else first[1].decode("utf-8", "replace")
                )
                if path is not None:
                    touch(path, kind)
                    continue
            elif name not in _ARGS_READ_TOOLS:
                tool()  # counted, nothing more
                continue
            call_id = called[1].decode("utf-8", "replace")
            self._call(call_id, name, line[args_at:result_at], kind)

    def _call(self, call_id: str, name: bytes, raw_args: bytes, kind: str | None) -> None:
        """A walked tool call whose `args` are to be decoded: a file tool whose path
        `_file_path` did not find (`kind` says how it touches its file), a command, or one of
        `_DECODED_TOOLS`."""
        try:
            args = orjson.loads(raw_args)
        except orjson.JSONDecodeError:
            args = None
        if not isinstance(args, dict):
            args = {}
        if kind is not None:
            path = args.get("file_path") or args.get("absolute_path") or args.get("path")
            self.book.touch(path if isinstance(path, str) else "", kind)
        elif name == _SHELL:
            self.book.ran(str(args.get("command") or ""), call_id, False, 0)
        else:
            call = {"id": call_id, "name": name.decode("utf-8", "replace"), "args": args}
            self.fold(_tool_call(call))

    # ------------------------------------------------------------------ records

    def take_message(self, record: dict[str, Any]) -> None:
        """A message line's record, decoded."""
        self._take_events(self._message(record))

    def _take_events(self, events: list[DigestEvent]) -> None:
        # Requests and replies wait for `flush`, with those of raw lines, in the file's order.
        for event in events:
            if event.kind == "ask":
                self._asks.append(event.text)
            elif event.kind == "reply":
                self._replies.append(event.text)
            else:
                self.book.add(event)

    def flush(self) -> None:
        """The end of a feed: fold in the calls walked, the reply and the requests taken since
        the last flush (only the newest reply, and the newest `Limits.asks` requests and the
        session's first, can show in the digest: only those are decoded)."""
        if self._walked:
            self._fold_walked()
        if self._replies:
            replies, self._replies = self._replies, []
            for item in reversed(replies):
                text = item if isinstance(item, str) else _reply_text(*item)
                if text.strip():
                    self.book.reply(text)
                    break
        if self._asks:
            self._fold_asks()

    @property
    def digest(self) -> Digest:
        """The digest so far."""
        self.flush()  # nothing left to fold after a feed, unless it was cut short
        return self.book.digest

    def _fold_asks(self) -> None:
        asks, self._asks = self._asks, []
        self.fold_requests(asks, self._requests_of)

    def _requests_of(self, item: bytes | str) -> list[str]:
        text = item if isinstance(item, str) else self._ask_of(item)
        return [] if text is None else [text]

    def _ask_of(self, line: bytes) -> str | None:
        text = _typed_text(line)
        if text is not None:
            return _ask_in([text])
        record = decode(line)
        if record is None:
            return None
        return next((e.text for e in self._message(record) if e.kind == "ask"), None)

    def take_rewrite(self, record: dict[str, Any], line: bytes) -> None:
        """A `$set` line's record, decoded."""
        at_start = self.messages == 0
        if not at_start and not any(m in line for m in _MARKERS):
            return
        changes = record.get("$set")
        messages = changes.get("messages") if isinstance(changes, dict) else None
        if not isinstance(messages, list):
            return
        if self._walked:
            self._fold_walked()  # the calls walked before come first
        out: list[DigestEvent] = []
        compressed = False
        for message in messages:
            if not isinstance(message, dict):
                continue
            if _is_summary(message):
                # a summary and its acknowledgement come in pairs: one compaction per rewrite
                summary = f"summary:{message.get('id')}".encode("utf-8", "surrogatepass")
                compressed |= self._first_time(summary) and not at_start
            elif at_start:
                out += self._message(message)
        self._take_events([*out, DigestEvent("compaction")] if compressed else out)

    def _message(self, message: dict[str, Any]) -> list[DigestEvent]:
        kind = message.get("type")
        if kind == "user":
            text = _ask_in(_texts(message))
            return [] if text is None else [DigestEvent("ask", text)]
        if kind != "gemini":
            return []
        out: list[DigestEvent] = []
        calls = message.get("toolCalls")
        if calls and self._walked:
            self._fold_walked()  # the calls walked before come first
        for call in calls if isinstance(calls, list) else ():
            is_call = isinstance(call, dict) and isinstance(call.get("id"), str)
            if is_call and self._first_time(call["id"].encode("utf-8", "surrogatepass")):
                out += _tool_call(call)
        content = message.get("content")
        if isinstance(content, str) and content.strip():
            out.append(DigestEvent("reply", content))
        return out


def _walk(line: bytes, pos: int) -> list[_Walked] | None:
    """The tool calls of a gemini message line from `pos` (`{"id":"…` of the first) to the
    line's end, read without decoding their results (most of the line: a file read whole):
    where each one's id starts and ends, where its name ends and where its result starts (its
    args lie between); None when the line is not in that shape or holds what needs it decoded
    (a call that did not succeed).

    Gemini CLI writes each call as `{"id":"…","name":"…","args":{…},"result":[{
    "functionResponse":{"id":…,"name":…,"response":{"output"|"error":…}}}],"status":"…",…}`:
    the walk reads each call's head, skips its result to its status (one search over the
    line's bytes, in C) and goes on to the next call, until the array and the line end.
    """
    calls: list[_Walked] = []
    find, startswith, head = line.find, line.startswith, _CALL_HEAD.match
    while True:
        called = head(line, pos)  # one match in C for the id, the name and where args start
        if called is None:
            return None
        args_at = called.end()
        name_end = args_at - len(_ARGS_AT)
        result_at = find(_RESULT_AT, args_at)
        if result_at < 0:
            return None
        # The functionResponse repeats the call's id and name: its response comes at a
        # known offset (else it is looked for in the result's head).
        response = result_at + len(_RESULT_AT) + name_end - pos + 1
        if not startswith(_RESPONSE_OUTPUT, response):
            response = find(_RESPONSE_AT, result_at, result_at + 200 + name_end - pos)
            if response < 0 or not startswith(_OUTPUT, response + len(_RESPONSE_AT)):
                return None  # an error response, or another shape
        status_at = find(_STATUS_AT, response)
        if status_at < 0:
            return None
        status_end = status_at + len(_STATUS_AT)
        if not startswith(_SUCCESS, status_end):
            return None  # failed, cancelled, or not run yet: decoded whole
        if called.lastindex == _SHELL_GROUP and find(_EXIT_CODE, response, status_at) >= 0:
            return None  # a command's exit code (only its output says one): decoded whole
        calls.append((called, result_at))
        pos = find(_NEXT_CALL_AT, status_end) + 2
        if pos < 2:
            return calls if line.endswith(_LAST_CALL_END) else None


def _file_path(line: bytes, start: int, end: int) -> str | None:
    """A file tool's non-empty `file_path`, found in its raw `args` (`line[start:end]`; a key:
    quotes inside strings are escaped); None: decode them instead."""
    at = line.find(_FILE_PATH_KEY, start, end)
    if at <= start or line[at - 1] not in b"{,":
        return None
    path_at = at + len(_FILE_PATH_KEY)
    path_end = line.find(b'"', path_at, end)
    if path_end <= path_at or line.find(b"\\", path_at, path_end) >= 0:
        return None
    return line[path_at:path_end].decode("utf-8", "replace")


def _typed_text(line: bytes) -> str | None:
    """The text of a user message line in Gemini CLI's own shape, `{"id":"…","timestamp":"…",
    "type":"user","content":[{"text":"…"}]}` (one text part; the CLI may add what it showed,
    `"displayContent":[…]`, after it), decoded alone; None when the line is not in that shape
    (decode it instead)."""
    id_end = line.find(b'"', len(_CALL_AT))
    if not line.startswith(_CALL_AT) or not line.startswith(_TIMESTAMP, id_end):
        return None
    at_end = line.find(b'"', id_end + len(_TIMESTAMP))
    if not line.startswith(_TYPED_TEXT, at_end) or line.find(b"\\", 0, at_end) >= 0:
        return None
    start = at_end + len(_TYPED_TEXT)
    # Quotes inside the text are escaped: the first `"}],"displayContent":` ends it.
    end = line.find(_TYPED_TEXT_SHOWN, start)
    if end < 0:
        if not line.endswith(_TYPED_TEXT_END):
            return None
        end = len(line) - len(_TYPED_TEXT_END)
    try:
        text = orjson.loads(line[start : end + 1])
    except orjson.JSONDecodeError:
        return None  # more than one part
    return text if isinstance(text, str) else None


def _ask_in(texts: list[str]) -> str | None:
    """The request a user message's texts make, if they make one."""
    if not texts or _summary_text(texts[0]):
        return None
    text = _HOOK_CONTEXT.sub("", "\n".join(texts)).strip()
    if text and not text.lstrip().startswith(("/", "<session_context>")):
        return text
    return None


def _reply_text(line: bytes, start: int) -> str:
    """The text of a gemini message line's `content` string, which starts at `start` (its
    opening quote) and ends before `"thoughts"` or `"tokens"` (quotes inside it are escaped)."""
    for marker in _TEXT_ENDS:
        end = line.find(marker, start)
        if end >= 0:
            try:
                text = orjson.loads(line[start : end + 1])
            except orjson.JSONDecodeError:
                break
            return text if isinstance(text, str) else ""
    record = decode(line)
    content = record.get("content") if record is not None else None
    return content if isinstance(content, str) else ""


def _tool_call(call: dict[str, Any]) -> list[DigestEvent]:
    name = str(call.get("name") or "")
    data = call.get("args")
    args: dict[str, Any] = data if isinstance(data, dict) else {}
    call_id: str = call["id"]
    path = args.get("file_path") or args.get("absolute_path") or args.get("path")
    path = path if isinstance(path, str) else ""
    output, error = _response(call)
    failed = call.get("status") == "error" or bool(error)
    # Only a command's output ends in `Exit Code: N` (a file read may hold those words).
    found = _EXIT.search(output or error) if name == _SHELL_NAME else None
    exit_code = int(found.group(1)) if found else None
    if exit_code:
        failed = True
    events: list[DigestEvent]
    if name in _READ:
        events = [DigestEvent("read", path)]
    elif name == "read_many_files":
        paths = args.get("include") or args.get("paths") or []
        events = [DigestEvent("read", p) for p in paths if isinstance(p, str)] or [
            DigestEvent("tool", name)
        ]
    elif name in _EDIT:
        events = [DigestEvent("edit", path)]
    elif name in _WRITE:
        events = [DigestEvent("write", path)]
    elif name == _SHELL_NAME:
        command = str(args.get("command") or "")
        reason = _reason(error or output)
        result = DigestEvent(
            "result",
            reason,
            call_id,
            failed=failed,
            exit_code=exit_code if exit_code is not None else (None if failed else 0),
        )
        return [DigestEvent("command", command, call_id), result]
    elif name == "write_todos":
        events = [DigestEvent("todos", todos=todos_from(args.get("todos"), ("description",)))]
    elif name == "invoke_agent":
        about = args.get("description") or args.get("agent_name") or args.get("prompt")
        events = [DigestEvent("subagent", str(about or ""))]
    else:
        events = [DigestEvent("tool", name)]
    if failed:
        where = f" {path}" if path else ""
        events.append(
            DigestEvent("result", f"{name}{where}: {_reason(error or output)}", None, True)
        )
    return events


def _response(call: dict[str, Any]) -> tuple[str, str]:
    """(output, error) of a tool call's functionResponse."""
    result = call.get("result")
    for part in result if isinstance(result, list) else ():
        response = part.get("functionResponse") if isinstance(part, dict) else None
        response = response.get("response") if isinstance(response, dict) else None
        if isinstance(response, dict):
            output, error = response.get("output"), response.get("error")
            return (
                output if isinstance(output, str) else "",
                error if isinstance(error, str) else "",
            )
    return "", ""


def _reason(text: str) -> str:
    """The line of a tool's output that says what went wrong (the first that is not framing)."""
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith(("<", "Process Group PGID", "Exit Code")):
            return line.removeprefix("Output: ").removeprefix("Error: ")
    return ""


def _texts(message: dict[str, Any]) -> list[str]:
    content = message.get("content")
    if isinstance(content, str):
        return [content]
    if not isinstance(content, list):
        return []
    return [p["text"] for p in content if isinstance(p, dict) and isinstance(p.get("text"), str)]


def _is_summary(message: dict[str, Any]) -> bool:
    texts = _texts(message)
    return bool(texts) and _summary_text(texts[0])


def _summary_text(text: str) -> bool:
    return text.lstrip().startswith(_SNAPSHOT) or text.strip() == _ACK


class NullDigestReader:
    """For recordings that keep no digest: always the empty one."""

    digest = Digest()
    compactions = 0
    usage_reader = None

    def feed(self, data: bytes) -> None:
        pass

    def reset(self) -> None:
        pass
