"""Frozen dataclasses back from the plain JSON values orjson wrote of them, by their field types.

orjson writes a dataclass as an object, an enum as its value and a tuple as a list. Reading such
a document back by the names of a few fields ("this one holds a tuple", "that one an enum") loses
whatever field nobody named: a state that gained a dataclass-valued field came back holding a
plain dict there, and every use of it failed after a restart. So each value is read by the type
its field declares, all the way down: what orjson writes of a state, `from_plain` gives back
equal.

The types a state may declare: None, bool, int, float, str, an `Enum`, a dataclass, a tuple
(`tuple[X, ...]` or `tuple[X, Y]`) and unions of those (`X | None`). A field of any other type
is a TypeError when its class is first read, which the snapshot's round-trip test turns into a
failure long before a user restarts. A value of the wrong type is a TypeError or ValueError
(the caller skips that state); a key the class does not have (written by a newer ctxd) is
ignored and a field the document lacks (an older one) takes its default.
"""

from __future__ import annotations

import dataclasses
import enum
import types
import typing
from collections.abc import Callable
from functools import cache
from typing import Any, TypeVar

__all__ = ["from_plain"]

T = TypeVar("T")
Decode = Callable[[Any], Any]


def from_plain(cls: type[T], raw: Any) -> T:
    """The `cls` (a dataclass) that orjson wrote as `raw`; TypeError or ValueError when `raw`
    does not hold one."""
    decode = _decoder(typing.cast(Any, cls))
    value: T = decode(raw)
    return value


@cache
def _decoder(tp: Any) -> Decode:
    """How to read a value of type `tp` (TypeError for a type no state may hold)."""
    if tp is type(None) or tp is None:
        return _none
    if tp in _SCALARS:
        return _SCALARS[tp]
    if isinstance(tp, type) and issubclass(tp, enum.Enum):
        return _enum(tp)
    if isinstance(tp, type) and dataclasses.is_dataclass(tp):
        return _dataclass(tp)
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin in (types.UnionType, typing.Union):
        present = tuple(a for a in args if a is not type(None))
        if len(present) == 1 and len(args) == 2:  # `X | None`, most fields: one call, not three
            return _optional(present[0])
        return _union(tuple(_decoder(a) for a in args), type(None) in args)
    if origin is tuple and len(args) == 2 and args[1] is Ellipsis:
        return _tuple_of(_decoder(args[0]))
    if origin is tuple and args:
        return _tuple_fixed(tuple(_decoder(a) for a in args))
    raise TypeError(f"no way to read a {tp!r} back from a snapshot")


def _none(raw: Any) -> None:
    if raw is not None:
        raise TypeError(f"expected null, got {type(raw).__name__}")


def _exactly(kind: type) -> Decode:
    def read(raw: Any) -> Any:
        # `type(...) is`: JSON's true is not the number 1, nor 1 the string "1".
        if type(raw) is not kind:
            raise TypeError(f"expected {kind.__name__}, got {type(raw).__name__}")
        return raw

    return read


def _float(raw: Any) -> float:
    # JSON has one kind of number: a float that is whole may have been written without ".0".
    if type(raw) is not float and type(raw) is not int:
        raise TypeError(f"expected a number, got {type(raw).__name__}")
    return float(raw)


_SCALARS: dict[Any, Decode] = {bool: _exactly(bool), int: _exactly(int), str: _exactly(str)}
_SCALARS[float] = _float


def _optional(tp: Any) -> Decode:
    if tp in (bool, int, str):

        def read_exactly(raw: Any) -> Any:
            if raw is None or type(raw) is tp:
                return raw
            raise TypeError(f"expected {tp.__name__} or null, got {type(raw).__name__}")

        return read_exactly
    decode = _decoder(tp)

    def read(raw: Any) -> Any:
        return None if raw is None else decode(raw)

    return read


def _enum(cls: type[enum.Enum]) -> Decode:
    def read(raw: Any) -> Any:
        if isinstance(raw, bool) or not isinstance(raw, int | str | float):
            raise TypeError(f"expected a {cls.__name__} value, got {type(raw).__name__}")
        return cls(raw)

    return read


def _dataclass(cls: type) -> Decode:
    hints = typing.get_type_hints(cls)
    fields = [(f.name, _decoder(hints[f.name])) for f in dataclasses.fields(cls) if f.init]

    def read(raw: Any) -> Any:
        if not isinstance(raw, dict):
            raise TypeError(f"expected an object for {cls.__name__}, got {type(raw).__name__}")
        values = {}
        for name, decode in fields:
            if name in raw:
                values[name] = decode(raw[name])
        return cls(**values)

    return read


def _union(options: tuple[Decode, ...], optional: bool) -> Decode:
    def read(raw: Any) -> Any:
        if raw is None and optional:
            return None
        for decode in options:
            try:
                return decode(raw)
            except (TypeError, ValueError):
                continue
        raise TypeError(f"no type of the union holds a {type(raw).__name__}")

    return read


def _tuple_of(item: Decode) -> Decode:
    def read(raw: Any) -> tuple[Any, ...]:
        if not isinstance(raw, list):
            raise TypeError(f"expected a list, got {type(raw).__name__}")
        return tuple(item(v) for v in raw)

    return read


def _tuple_fixed(items: tuple[Decode, ...]) -> Decode:
    def read(raw: Any) -> tuple[Any, ...]:
        if not isinstance(raw, list) or len(raw) != len(items):
            raise TypeError(f"expected a list of {len(items)}")
        return tuple(decode(v) for decode, v in zip(items, raw, strict=True))

    return read
