"""Property tests of canonical ids (SPEC §5) over every modelled route of mem0, MemOS and EverOS
Cloud: every id field a route model names, given another user's id in a spelling the engine may
read as theirs — padded with any whitespace, unicode-normalised (NFKC / NFD, fullwidth), a
wildcard or "no filter" value — is refused and nothing reaches the engine. A case-folded
spelling is another id to every engine (they compare ids byte for byte): it may go through only
as itself, never as the other user's.

Built on the worlds and examples of test_flavor_model_properties.py (alice the victim, bob the
caller, each with their own agent, session, group and cube).
"""

from __future__ import annotations

import asyncio
import unicodedata
from collections.abc import Callable
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gateway.upstream.models import FILTERS, PATH, QUERY, SENDERS
from gateway.upstream.routes import EngineRoute
from tests.security.support import RecordingEngine
from tests.security.test_flavor_model_properties import (
    CASES,
    DIALECTS,
    MINE,
    REFUSED,
    Ids,
    Request,
    World,
    _msg,
    _run,
    _send,
    example,
)

# Whitespace engines strip (str.strip: every unicode space), and characters that vanish or fold.
SPACES = (" ", "\t", "\n", "\r", "\x0b", "\x0c", "\x1c", "\x85", "\u00a0", "\u1680", "\u2000",
          "\u2003", "\u2009", "\u200a", "\u2028", "\u2029", "\u202f", "\u205f", "\u3000")
INVISIBLE = ("\u200b", "\u200d", "\ufeff", "\u00ad")
MAGIC = ("*", "__all__", "", " ", "__ALL__", " * ", "%", "*\u3000", "?")


def _fullwidth(text: str) -> str:
    return "".join(chr(ord(c) + 0xFEE0) if "!" <= c <= "~" else c for c in text)


def _decomposed(text: str) -> str:
    """`a` as `a` + a combining mark stripped by NFKD-then-filter normalisers."""
    return text.replace("a", "a\u0301", 1) if "a" in text else text + "\u0301"


def padded(theirs: str) -> st.SearchStrategy[str]:
    pad = st.text(st.sampled_from(SPACES + INVISIBLE), min_size=1, max_size=3)
    return st.one_of(st.builds(lambda p: p + theirs, pad), st.builds(lambda p: theirs + p, pad),
                     st.builds(lambda p, q: p + theirs + q, pad, pad))


def normalised(theirs: str) -> st.SearchStrategy[str]:
    """Spellings that NFKC (or stripping marks) turns back into `theirs`."""
    variants = [_fullwidth(theirs), _decomposed(theirs),
                unicodedata.normalize("NFD", _fullwidth(theirs)),
                theirs.replace("s", "\u017f"),  # long s: NFKC -> s
                theirs.replace("-", "\ufe63"), theirs + "\u0300"]
    return st.sampled_from([one for one in variants if one != theirs])


def spellings(theirs: str) -> st.SearchStrategy[str]:
    return st.one_of(padded(theirs), normalised(theirs), st.sampled_from(MAGIC))


def case_folded(theirs: str) -> list[str]:
    return [one for one in (theirs.upper(), theirs.title(), theirs.swapcase()) if one != theirs]


# --- where a route takes an id -------------------------------------------------------------------

# (flavor, route, field label, kind, put): `put(request, value)` writes one id into the field.
Field = tuple[str, EngineRoute, str, str, Callable[[Request, Any], None]]


def _put(one: Any, listed: bool) -> Callable[[Request, Any], None]:
    def put(request: Request, value: Any) -> None:
        value = [value] if listed else value
        if one.where == QUERY:
            request.query = [(k, v) for k, v in request.query if k != one.key] + [(one.key,
                                                                                   value)]
        elif one.where == PATH:
            request.params[one.key] = value
        else:
            request.body[one.key] = value
    return put


def fields_of(flavor: str, route: EngineRoute) -> list[Field]:
    model = route.model
    assert model is not None
    out: list[Field] = []
    mine = example(flavor, route, Ids("bob", "b", "s", "g", "c"))
    for one in model.ids:
        if one.kind == SENDERS:
            for role, kind in model.senders.items():
                extra = {"tool_call_id": "c"} if role == "tool" else {}
                out.append((flavor, route, f"{one.key}[{role}]", kind,
                            lambda r, v, key=one.key, role=role, extra=extra:
                            r.body[key].append(_msg(v, role, **extra))))
        elif one.kind == FILTERS:
            dialect = DIALECTS[model.filters]  # type: ignore[index]
            for key, kind in dialect.owners.items():
                out.append((flavor, route, f"{one.label}.{key}", kind,
                            lambda r, v, key=key, at=one.key, every=dialect.every:
                            r.body.__setitem__(at, {every: [r.body[at], {key: v}]})))
        else:
            listed = isinstance((mine.body or {}).get(one.key), list)
            if one.where == QUERY and listed:
                listed = False
            out.append((flavor, route, one.label, one.kind, _put(one, listed)))
    return out


FIELDS = [field for flavor, route in CASES for field in fields_of(flavor, route)]


async def _attempt(world: World, engine: RecordingEngine, field: Field, value: str,
                   *, folded: bool = False) -> None:
    flavor, route, label, kind, put = field
    alice, bob = world.ids[(flavor, "alice")], world.ids[(flavor, "bob")]
    theirs = alice.of(kind)
    request = example(flavor, route, bob)
    put(request, value)
    status = await _send(world, engine, flavor, "bob", route, request)
    where = (flavor, route.method, route.pattern, label, value)
    if folded and 200 <= status < 300:
        # Another id to the engine: it may go through as itself, never as alice's.
        for seen in engine.seen():
            assert theirs.encode() not in seen, where
        return
    assert status in (400, *REFUSED), (*where, status)  # 400: a control byte in the target
    assert engine.requests == [], where


# --- the tests -----------------------------------------------------------------------------------

def test_every_route_that_takes_an_id_is_swept() -> None:
    swept = {(flavor, route.method, route.pattern) for flavor, route, *_ in FIELDS}
    takes_ids = {(flavor, route.method, route.pattern) for flavor, route in CASES
                 if route.model is not None and route.model.ids}
    assert swept == takes_ids and {flavor for flavor, *_ in swept} == set(MINE)


def test_each_kind_of_spelling_of_another_users_id_is_refused_in_every_field(
    tmp_path: Path,
) -> None:
    """The sweep: every field, one spelling of each kind (padded, normalised, magic, folded)."""
    async def sweep(world: World, engine: RecordingEngine) -> None:
        for field in FIELDS:
            flavor, _, _, kind, _ = field
            theirs = world.ids[(flavor, "alice")].of(kind)
            for value in (f" {theirs}", f"{theirs}\u00a0", _fullwidth(theirs), "*", "__all__",
                          ""):
                await _attempt(world, engine, field, value)
            for value in case_folded(theirs):
                await _attempt(world, engine, field, value, folded=True)

    _run(tmp_path, sweep)


def test_sampled_spellings_of_another_users_ids_never_reach_the_engine(tmp_path: Path) -> None:
    async def sample(world: World, engine: RecordingEngine) -> None:
        loop = asyncio.get_running_loop()

        @settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
        @given(st.data())
        def one(data: st.DataObject) -> None:
            field = data.draw(st.sampled_from(FIELDS))
            flavor, _, _, kind, _ = field
            value = data.draw(spellings(world.ids[(flavor, "alice")].of(kind)))
            asyncio.run_coroutine_threadsafe(_attempt(world, engine, field, value),
                                             loop).result()

        await loop.run_in_executor(None, one)

    _run(tmp_path, sample)
