"""Walking an engine's filter tree: every field condition, and whether it pins the request.

mem0, EverOS Cloud and MemOS each read a filter tree of field conditions joined by
conjunctions, disjunctions and (mem0) negations, spelled their own way; each flavour's model
module says which spellings its engine reads and which fields name whom (SPEC §5). A condition
*pins* the request only when the root reaches it through conjunctions alone: under an `OR`
another branch can match anything, under a `NOT` the condition matches everyone else. Pure.
"""

from __future__ import annotations

from collections.abc import Collection, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from gateway.errors import Forbidden, ValidationFailed
from gateway.identity.named import AGENT, USER, check_canonical, named_values

# Operators that match exactly the values they name (the engines' `eq` / `in`).
POSITIVE_OPERATORS = frozenset({"eq", "in"})


@dataclass(frozen=True)
class Condition:
    key: str
    value: Any
    where: str  # the error's field: "filters.AND[0].user_id"
    pins: bool  # reached from the root through conjunctions only
    negated: bool  # under a negation somewhere above


def conditions(tree: Any, where: str, *, every: Collection[str] = (),
               some: Collection[str] = (), negate: Collection[str] = ()
               ) -> Iterator[Condition]:
    """Every `key: value` of the tree, the combinators `every` (AND), `some` (OR) and `negate`
    (NOT) walked into. Values that are objects or lists of objects are walked too (never
    pinning), so an id nested where no engine should read one is still seen."""
    stack: list[tuple[Any, str, bool, bool]] = [(tree, where, True, False)]
    while stack:
        node, at, pins, negated = stack.pop()
        if not isinstance(node, Mapping):
            raise ValidationFailed(f"{at}: filter nodes must be objects", field=at)
        below: list[tuple[Any, str, bool, bool]] = []  # walked next, in the tree's order
        for key, value in node.items():
            here = f"{at}.{key}"
            if key in every or key in some or key in negate:
                if value is None:
                    continue
                children = [value] if key in negate and isinstance(value, Mapping) else value
                if not isinstance(children, list):
                    raise ValidationFailed(f"{here}: expects an array of conditions",
                                           field=here)
                below.extend((child, f"{here}[{index}]", pins and key in every,
                              negated or key in negate)
                             for index, child in enumerate(children))
                continue
            yield Condition(str(key), value, here, pins, negated)
            if isinstance(value, Mapping):
                below.append((value, here, False, negated))
            elif isinstance(value, list):
                below.extend((item, f"{here}[{index}]", False, negated)
                             for index, item in enumerate(value) if isinstance(item, Mapping))
        stack.extend(reversed(below))


def positive(value: Any, *, wildcard: str | None = None) -> list[Any] | None:
    """The values a condition names exactly (a plain value, a list, `eq` / `in`), or None when
    it reaches beyond them (`ne`, `gt`, `contains`, the engine's wildcard, ...)."""
    values = named_values(value, POSITIVE_OPERATORS)
    if values is None or (wildcard is not None and wildcard in values):
        return None
    return values


def owner_ids(tree: Any, where: str, owners: Mapping[str, str], *,
              every: Collection[str] = (), some: Collection[str] = (),
              negate: Collection[str] = (), wildcard: str | None = None
              ) -> list[tuple[str, str, Any, bool]]:
    """The ids a tree names, as a route model's filter dialect returns them (kind, where,
    value, pins): `owners` maps the engine's field names to kinds.

    A user or agent condition is passed on as written (gateway/identity/ownership.py refuses
    one that reaches beyond the caller and their agents); under a negation it matches everyone
    else, so it is refused here. Sessions, groups and cubes are passed on by the values they
    name exactly; a wider condition on them (`ne`, a range, the wildcard) names none and pins
    nothing. Every value an owner condition holds is an id in canonical form, else a 422
    (gateway/identity/canonical.py).
    """
    found: list[tuple[str, str, Any, bool]] = []
    for condition in conditions(tree, where, every=every, some=some, negate=negate):
        kind = owners.get(condition.key)
        if kind is None:
            continue
        # Every id it names canonical, whatever the operator: a wildcard or an empty value is
        # no id (422), even where a conjunction elsewhere bounds the read.
        check_canonical(kind, condition.where, condition.value)
        if kind in (USER, AGENT):
            if condition.negated:
                raise Forbidden(f"{condition.where}: a negated {condition.key} matches other "
                                "users", field=condition.where)
            found.append((kind, condition.where, condition.value, condition.pins))
        elif not condition.negated:
            named = positive(condition.value, wildcard=wildcard)
            if named is not None:
                found.append((kind, condition.where, named, condition.pins))
    return found
