"""The filter DSL as EverOS 1.5.1 compiles it (`memory/search/filters.py`), over the dev
engine's rows. Pure.

The compiler refuses what the engine refuses (`FilterError`, a 422): reserved and unknown fields,
unknown operators, an empty operator map, non-string values for string fields, an empty `in`,
`ne`/comparisons on `sender_id`, timestamps that are neither epoch numbers nor ISO-8601. It is
given the node as the engine's request model dumps it (`FilterNode.model_dump(exclude_none=True)`,
so a field set to null is no condition at all). A row's missing value (a merged episode's
session) satisfies no comparison, as in the engine's SQL. `columns` says which stored columns a
compiled filter reads, so a caller can refuse one its table lacks as the engine fails on it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any, Protocol

from gateway.upstream.flavors.everos_models import ALLOWED_FILTER_FIELDS, RESERVED_FILTER_FIELDS

OPERATORS = frozenset({"eq", "ne", "gt", "gte", "lt", "lte", "in"})
STRING_FIELDS = frozenset({"session_id", "parent_type", "parent_id"})
COLUMN = {"session_id": "session_id", "parent_type": "parent_type", "parent_id": "parent_id",
          "timestamp": "timestamp", "sender_id": "sender_ids"}
assert set(COLUMN) == ALLOWED_FILTER_FIELDS
MS_THRESHOLD = 10**12
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)

_COMPARE: dict[str, Callable[[Any, Any], bool]] = {
    "eq": lambda a, b: a == b, "ne": lambda a, b: a != b, "gt": lambda a, b: a > b,
    "gte": lambda a, b: a >= b, "lt": lambda a, b: a < b, "lte": lambda a, b: a <= b,
}


class FilterError(ValueError):
    """A filter the engine refuses to compile (422 INVALID_INPUT, the message is the engine's)."""


class Row(Protocol):
    @property
    def session_id(self) -> str | None: ...
    @property
    def parent_type(self) -> str: ...
    @property
    def parent_id(self) -> str: ...
    @property
    def timestamp_ms(self) -> int: ...
    @property
    def sender_ids(self) -> list[str]: ...


Predicate = Callable[[Row], bool]


@dataclass
class Compiled:
    matches: Predicate
    columns: set[str] = field(default_factory=set)


def compile_filters(node: dict[str, Any] | None) -> Compiled:
    compiled = Compiled(lambda row: True)
    if node:
        predicate = _node(node, compiled.columns)
        if predicate is not None:
            compiled.matches = predicate
    return compiled


def _node(raw: dict[str, Any], columns: set[str]) -> Predicate | None:
    raw = dict(raw)
    parts: list[Predicate] = []
    for combinator in ("AND", "OR"):
        children = raw.pop(combinator, None)
        if children is not None:
            combined = _combinator(children, combinator, columns)
            if combined is not None:
                parts.append(combined)
    for name, value in raw.items():
        if name in RESERVED_FILTER_FIELDS:
            raise FilterError(f"filter field {name!r} is reserved; pass it at the top of the "
                              "request")
        if name not in ALLOWED_FILTER_FIELDS:
            raise FilterError(f"unsupported filter field: {name!r}")
        columns.add(COLUMN[name])
        parts.append(_field(name, value))
    return _all(parts) if parts else None


def _combinator(children: Any, op: str, columns: set[str]) -> Predicate | None:
    if not isinstance(children, list):
        raise FilterError(f"{op} expects an array of nodes")
    fragments: list[Predicate] = []
    for child in children:
        if not isinstance(child, dict):
            raise FilterError(f"{op} children must be objects")
        compiled = _node(child, columns)
        if compiled is not None:
            fragments.append(compiled)
    if not fragments:
        return None
    return _all(fragments) if op == "AND" else _any(fragments)


def _all(parts: list[Predicate]) -> Predicate:
    return lambda row: all(part(row) for part in parts)


def _any(parts: list[Predicate]) -> Predicate:
    return lambda row: any(part(row) for part in parts)


def _field(name: str, value: Any) -> Predicate:
    if isinstance(value, dict):
        if not value:
            raise FilterError(f"empty operator map for field {name!r}")
        return _all([_clause(name, op, operand) for op, operand in value.items()])
    return _clause(name, "eq", value)


def _clause(name: str, op: str, value: Any) -> Predicate:
    if op not in OPERATORS:
        raise FilterError(f"unsupported operator {op!r} on field {name!r}")
    if name == "sender_id":
        if op == "eq":
            one = _string(value, name)
            return lambda row: one in row.sender_ids
        if op == "in":
            wanted = [_string(item, name) for item in _non_empty_list(value, name)]
            return lambda row: any(item in row.sender_ids for item in wanted)
        raise FilterError(f"operator {op!r} is not supported on array field {name!r}")
    read: Callable[[Row], Any] = ((lambda row: row.timestamp_ms * 1000) if name == "timestamp"
                                  else (lambda row: getattr(row, name)))
    literal = _timestamp if name == "timestamp" else _string
    if op == "in":
        values = [literal(item, name) for item in _non_empty_list(value, name)]
        return lambda row: (current := read(row)) is not None and current in values
    bound, compare = literal(value, name), _COMPARE[op]
    return lambda row: (current := read(row)) is not None and compare(current, bound)


def _string(value: Any, name: str) -> str:
    if not isinstance(value, str):
        raise FilterError(f"value for {name!r} must be a string")
    return value


def _non_empty_list(value: Any, name: str) -> list[Any]:
    if not isinstance(value, list) or not value:
        raise FilterError(f"value for {name!r} with 'in' must be a non-empty list")
    return value


def _timestamp(value: Any, name: str) -> int:
    """Epoch microseconds of epoch ms (seconds below 10**12) or an ISO-8601 string (UTC when
    naive)."""
    message = f"timestamp value for {name!r} must be ms or ISO string"
    if isinstance(value, bool):
        raise FilterError(message)
    try:
        if isinstance(value, int | float):
            number = int(value)
            ms = number if number >= MS_THRESHOLD else number * 1000
            datetime.fromtimestamp(ms / 1000, UTC)
            return ms * 1000
        if isinstance(value, str):
            if "'" in value:
                raise FilterError(f"timestamp string for {name!r} contains a quote")
            text = value.strip()
            parsed = datetime.fromisoformat(text[:-1] + "+00:00" if text.endswith("Z") else text)
            moment = parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)
            return (moment - EPOCH) // timedelta(microseconds=1)
    except (TypeError, ValueError) as exc:
        if isinstance(exc, FilterError):
            raise
        raise FilterError(message) from None
    raise FilterError(message)
