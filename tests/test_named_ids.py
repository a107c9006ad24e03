"""The ids a request names (gateway/identity/named.py): one named again is kept once, and the
identity policy answers a request exactly as it would if every naming were kept."""

from __future__ import annotations

import asyncio
from typing import Any

from hypothesis import given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st

from gateway.errors import GatewayError
from gateway.identity.named import AGENT, CUBE, SENDER, SESSION, USER, Named
from gateway.identity.ownership import OwnershipRules


def test_an_id_named_again_is_kept_once_where_it_was_first_named() -> None:
    named = Named()
    for index in range(1000):
        named.add(SESSION, f"filters.AND[{index}].session_id", "s1")
    named.add(SESSION, "session_id", "s2")

    assert named.ids == [(SESSION, "filters.AND[0].session_id", "s1"),
                         (SESSION, "session_id", "s2")]


def test_the_query_and_the_body_keep_their_own() -> None:
    named = Named()
    named.add(SESSION, "query.session_id", "s1")
    named.add(SESSION, "session_id", "s1")
    named.add(USER, "user_id", "s1")

    assert named.ids == [(SESSION, "query.session_id", "s1"), (SESSION, "session_id", "s1"),
                         (USER, "user_id", "s1")]


def test_a_later_naming_that_bounds_the_route_is_kept() -> None:
    named = Named()
    named.add(USER, "filters.OR[0].user_id", "alice")
    named.add(USER, "filters.user_id", "alice", scopes=True)
    named.add(USER, "filters.AND[0].user_id", "alice", scopes=True)

    assert named.ids == [(USER, "filters.OR[0].user_id", "alice"),
                         (USER, "filters.user_id", "alice")]
    assert named.scopes == {"filters.user_id"}


def test_values_that_are_not_strings_are_all_kept() -> None:
    named = Named()
    for _ in range(2):
        named.add(USER, "filters.user_id", {"in": ["alice"]})
        named.add(SESSION, "session_id", 5)

    assert len(named.ids) == 4


# --- property: the policy answers the same ---------------------------------------------------

CALLER = "alice"
_OWNERS = {"mine": CALLER, "theirs": "bob"}  # sessions, groups and cubes; others are no one's
_VALUES = st.one_of(st.sampled_from([CALLER, "bob", "mine", "theirs", "new", "bot"]),
                    st.just(["mine", "new"]), st.just({"in": [CALLER]}), st.integers(0, 1))
_NAMINGS = st.lists(st.tuples(
    st.sampled_from([USER, SENDER, AGENT, SESSION, CUBE]),
    st.sampled_from(["user_id", "session_id", "filters.AND[0].x", "filters.OR[1].x",
                     "query.session_id", "path.cube_id", "messages[0].sender_id"]),
    _VALUES, st.booleans()), max_size=8)


def _rules(claimed: list[tuple[str, str]]) -> OwnershipRules:
    async def owns_agent(user: str, agent: str) -> bool:
        return agent == "bot"

    async def session_owner(app: str, project: str, session: str) -> str | None:
        return _OWNERS.get(session)

    async def claim_session(user: str, app: str, project: str, session: str) -> None:
        claimed.append((app, session))

    return OwnershipRules(owns_agent=owns_agent, session_owner=session_owner,
                          claim_session=claim_session)


def _answer(named: Named, claims: bool) -> tuple[Any, ...]:
    claimed: list[tuple[str, str]] = []
    rules = _rules(claimed)

    async def policy() -> tuple[Any, ...]:
        try:
            scoped = await rules.check_named(named, CALLER, claims=claims)
            await rules.claim(named, CALLER)
        except GatewayError as exc:
            return ("refused", type(exc).__name__, exc.message, exc.field)
        return ("scoped" if scoped else "unscoped", sorted(set(claimed)))

    return asyncio.run(policy())


@hypothesis_settings(max_examples=300, deadline=None)  # one event loop per example: slow on busy CI
@given(namings=_NAMINGS, claims=st.booleans())
def test_the_policy_answers_as_it_would_with_every_naming_kept(
        namings: list[tuple[str, str, Any, bool]], claims: bool) -> None:
    kept, every = Named(), Named()
    for kind, where, value, scopes in namings:
        kept.add(kind, where, value, scopes=scopes)
        every.ids.append((kind, where, value))
        if scopes:
            every.scopes.add(where)

    assert _answer(kept, claims) == _answer(every, claims)
