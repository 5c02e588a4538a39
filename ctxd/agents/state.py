"""A transcript reader's and its digest's state as plain JSON values, and back.

A restart that kept only each transcript's read offset has to read every followed file again
from byte 0 to rebuild its reader (the partial last line, the figure last reported, the recent
tool calls) and its digest: the cost grows with the history, not with what changed. `dump`
turns a reader or a `Facts` into JSON values, `load_into` puts them back into a fresh one, so
a restart reads only what was appended while the daemon was down.

One walker serves every agent: a reader is plain attributes over plain values (the states are
small and bounded, see `ctxd.agents.reader`). What it meets is written as JSON with a tag where
JSON has no word for it (a tuple, bytes, a dict with keys that are not strings, an instance of
one of ctxd's own agent or core classes). Anything else (a function, a file, a class from
elsewhere) is a `StateError`: that reader's state is not kept, and a restart reads its file
as before. Loading never runs a constructor of what it builds and takes only classes of
`ctxd.agents` and `ctxd.core`; a state written by other code is refused whole: `fingerprint`
names the code a state was written by (its source), and the caller keeps it beside the state.
"""

from __future__ import annotations

import dataclasses
import enum
import hashlib
import importlib
from collections import deque
from collections.abc import Callable
from functools import cache
from pathlib import Path
from typing import Any

from ctxd.untrusted import read_untrusted

__all__ = ["MAX_STATE", "StateError", "dump", "fingerprint", "load_into"]

#: Bytes of strings a state may hold: a reader that holds more (Gemini CLI's legacy `.json`
#: reader keeps its whole file) is cheaper to read again than to keep in every snapshot.
MAX_STATE = 256 * 1024
_MODULES = ("ctxd.agents.", "ctxd.core.")
#: Bytes of one source file at most: ctxd's own, read as any file is (`ctxd.untrusted`).
MAX_SOURCE = 4 * 1024 * 1024


class StateError(ValueError):
    """A state that cannot be written as plain values, or read back as one."""


@cache
def fingerprint() -> str:
    """A digest of the source of the code that makes and reads reader states (the agents'
    packages and the core): a state is used only by the code that wrote it. "" when the source
    cannot be read (then no state is worth keeping)."""
    here = Path(__file__).parent
    digest = hashlib.sha256()
    try:
        for root in (here, here.parent / "core"):
            for path in sorted(root.rglob("*.py")):
                digest.update(path.relative_to(root.parent).as_posix().encode() + b"\0")
                digest.update(read_untrusted(path, MAX_SOURCE))
    except OSError:
        return ""
    return digest.hexdigest()[:32]


def dump(obj: object, keep: tuple[object, ...] = ()) -> dict[str, Any]:
    """The attributes of `obj` as plain values; those that are one of `keep` (the reader's
    listener) are left out, to stay what the fresh object's are. StateError when a value is
    not one the walker knows, or the strings and bytes pass MAX_STATE."""
    budget = [MAX_STATE]
    keep = tuple(k for k in keep if k is not None)
    return {
        name: _dump(value, budget)
        for name, value in _attributes(obj).items()
        if not any(value is k for k in keep)
    }


def load_into(obj: object, state: object, keep: tuple[str, ...] = ()) -> None:
    """Put a `dump` of an object of `obj`'s class back into `obj` (a fresh one). Its attributes
    must be the ones dumped, but for those named in `keep` (left as they are); StateError
    otherwise, before anything is changed."""
    if not isinstance(state, dict):
        raise StateError("a state is an object")
    names = set(_attributes(obj))
    if not set(state) <= names or not names - set(state) <= set(keep):
        raise StateError(f"attributes differ for {type(obj).__name__}")
    values = {name: _load(value) for name, value in state.items()}
    for name, value in values.items():
        object.__setattr__(obj, name, value)


# ----------------------------------------------------------------------------- dumping


def _dump(value: object, budget: list[int]) -> Any:
    kind = type(value)
    # Exact types: a subclass (one of ours) is written with its class, below.
    if value is None or kind is bool or kind is int or kind is float:
        return value
    if kind is str and isinstance(value, str):
        _spend(budget, len(value))
        return value
    if kind is list and isinstance(value, list):
        return [_dump(v, budget) for v in value]
    if kind is tuple and isinstance(value, tuple):
        return {"$t": [_dump(v, budget) for v in value]}
    if kind is dict and isinstance(value, dict):
        return {"$d": _dump_items(value, budget)}
    return _dump_other(value, kind, budget)


def _dump_other(value: object, kind: type, budget: list[int]) -> Any:
    if (kind is bytes or kind is bytearray) and isinstance(value, bytes | bytearray):
        _spend(budget, len(value))
        return {"$b" if kind is bytes else "$ba": value.hex()}
    if (kind is set or kind is frozenset) and isinstance(value, set | frozenset):
        return {"$s" if kind is set else "$fs": [_dump(v, budget) for v in value]}
    if kind is deque and isinstance(value, deque):
        return {"$q": [_dump(v, budget) for v in value], "max": value.maxlen}
    if not kind.__module__.startswith(_MODULES):
        raise StateError(f"cannot keep a {kind.__module__}.{kind.__qualname__}")
    name = f"{kind.__module__}:{kind.__qualname__}"
    if isinstance(value, enum.Enum):
        return {"$e": name, "v": _dump(value.value, budget)}
    if isinstance(value, tuple):  # a NamedTuple
        return {"$o": name, "t": [_dump(v, budget) for v in value]}
    out: dict[str, Any] = {"$o": name, "a": _dump_attributes(value, budget)}
    if isinstance(value, dict):  # a dict of ours (bounded call lists)
        out["d"] = _dump_items(value, budget)
    return out


def _dump_items(value: dict[Any, Any], budget: list[int]) -> list[list[Any]]:
    return [[_dump(k, budget), _dump(v, budget)] for k, v in value.items()]


def _dump_attributes(value: object, budget: list[int]) -> dict[str, Any]:
    return {name: _dump(v, budget) for name, v in _attributes(value).items()}


def _spend(budget: list[int], size: int) -> None:
    budget[0] -= size
    if budget[0] < 0:
        raise StateError(f"a state of more than {MAX_STATE:,} bytes")


def _attributes(obj: object) -> dict[str, Any]:
    """Every attribute an instance holds: its slots, along its classes, and its `__dict__`."""
    found: dict[str, Any] = {}
    for cls in type(obj).__mro__:
        slots = cls.__dict__.get("__slots__", ())
        for name in (slots,) if isinstance(slots, str) else slots:
            if name not in ("__dict__", "__weakref__") and hasattr(obj, name):
                found[name] = getattr(obj, name)
    found.update(getattr(obj, "__dict__", {}))
    return found


# ----------------------------------------------------------------------------- loading


def _load(value: Any) -> Any:
    if value is None or isinstance(value, bool | int | float | str):
        return value
    if isinstance(value, list):
        return [_load(v) for v in value]
    if not isinstance(value, dict) or len(value) == 0:
        raise StateError("not a state value")
    try:
        return _load_tagged(value)
    except StateError:
        raise
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise StateError(f"malformed state: {exc!r}") from exc


#: The tags of the values that hold no class, and how each is read back.
_PLAIN: dict[str, Callable[[Any], Any]] = {
    "$t": lambda items: tuple(_load(v) for v in items),
    "$d": lambda items: {_load(k): _load(v) for k, v in items},
    "$b": bytes.fromhex,
    "$ba": bytearray.fromhex,
    "$s": lambda items: {_load(v) for v in items},
    "$fs": lambda items: frozenset(_load(v) for v in items),
}


def _load_tagged(value: dict[str, Any]) -> Any:
    for tag, load in _PLAIN.items():
        if tag in value:
            return load(value[tag])
    if "$q" in value:
        maxlen = value.get("max")
        return deque((_load(v) for v in value["$q"]), maxlen if type(maxlen) is int else None)
    if "$e" in value:
        return _class(value["$e"])(_load(value["v"]))
    return _load_object(value)


def _load_object(value: dict[str, Any]) -> Any:
    cls = _class(value["$o"])
    if issubclass(cls, tuple):  # a NamedTuple: its fields in order
        return tuple.__new__(cls, [_load(v) for v in value["t"]])
    obj = cls.__new__(cls)
    if isinstance(obj, dict):
        for k, v in value.get("d", []):
            dict.__setitem__(obj, _load(k), _load(v))
    attributes = value["a"]
    if not isinstance(attributes, dict):
        raise StateError("attributes are an object")
    known = {f.name for f in dataclasses.fields(cls)} if dataclasses.is_dataclass(cls) else None
    for name, v in attributes.items():
        if known is not None and name not in known:
            raise StateError(f"{cls.__name__} has no field {name}")
        object.__setattr__(obj, name, _load(v))
    return obj


def _class(name: object) -> type:
    if not isinstance(name, str) or ":" not in name:
        raise StateError("a class name is module:qualname")
    module, qualname = name.split(":", 1)
    if not module.startswith(_MODULES):
        raise StateError(f"not one of ctxd's classes: {name}")
    try:
        found: Any = importlib.import_module(module)
        for part in qualname.split("."):
            found = getattr(found, part)
    except (ImportError, AttributeError) as exc:
        raise StateError(f"no class {name}") from exc
    if not isinstance(found, type):
        raise StateError(f"not a class: {name}")
    return found
