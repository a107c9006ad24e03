"""Property tests over the route models (SPEC §5): every id field each model names, in every
placement, naming another user is refused and never forwarded; a value where the engine does not
read it never scopes the request; a scoped route goes through only when its scoping field pins
the caller.

Each modelled route has a valid, caller-scoped example here (`EXAMPLES`, keyed by the model); a
modelled route without one fails the coverage test, so a new model cannot go unexercised.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st

from gateway.app import Gateway
from gateway.config import Settings
from gateway.identity.named import AGENT, SESSION, USER
from gateway.upstream.flavors import FLAVORS
from gateway.upstream.flavors import everos_models as everos
from gateway.upstream.models import BODY, QUERY, RouteModel
from gateway.upstream.routes import EngineRoute
from tests.security.support import (  # noqa: F401 (fixtures, found by name)
    RecordingEngine,
    app_fixture,
    client,
    engine_fixture,
    keyed,
    settings_fixture,
)
from tests.security.test_canonical_id_properties import spellings

NOW = 1_760_000_000_000
CALLER = "bob"
VICTIM = "alice"


def _message(sender: str, role: str = "user") -> dict[str, Any]:
    return {"role": role, "sender_id": sender, "timestamp": NOW, "content": "hi"}


# A valid request of each model, scoped to the caller (body, query). `{session}` is the caller's
# own session, `{agent}` the caller's own agent.
EXAMPLES: dict[int, tuple[dict[str, Any] | None, dict[str, str]]] = {
    id(everos.ADD): ({"session_id": "{session}", "messages": [_message(CALLER)]}, {}),
    id(everos.FLUSH): ({"session_id": "{session}"}, {}),
    id(everos.SEARCH): ({"query": "x", "user_id": CALLER}, {}),
    id(everos.GET): ({"user_id": CALLER, "memory_type": "episode"}, {}),
    id(everos.TASKS): (None, {"session_id": "{session}"}),
    id(everos.TASK): (None, {}),
    id(FLAVORS["everos"].routes.find("GET", ("health",))[0].model): (None, {}),  # type: ignore[index,union-attr]
}
EVEROS_ROUTES = [route for route in FLAVORS["everos"].routes.routes if route.model is not None]


def test_every_everos_route_is_modelled_and_has_an_example() -> None:
    assert all(route.model is not None for route in FLAVORS["everos"].routes.routes)
    missing = [route.pattern for route in EVEROS_ROUTES if id(route.model) not in EXAMPLES]
    assert missing == []


def _filled(value: Any, session: str, agent: str) -> Any:
    text = json.dumps(value).replace("{session}", session).replace("{agent}", agent)
    return json.loads(text)


async def _send(api: httpx.AsyncClient, route: EngineRoute, body: Any,
                query: dict[str, str]) -> httpx.Response:
    path = route.render({name: "task-1" for name in route.names})
    content = None if body is None else json.dumps(body).encode()
    return await api.request(route.method, path, params=query, content=content,
                             headers={"Content-Type": "application/json"})


def _model(route: EngineRoute) -> RouteModel:
    assert route.model is not None
    return route.model


@pytest.fixture
async def world(app: Gateway, settings: Settings) -> AsyncIterator[dict[str, Any]]:
    """bob and alice, each with a session of their own and an agent of their own."""
    async with keyed(app, settings, CALLER) as bob, keyed(app, settings, VICTIM) as alice:
        out: dict[str, Any] = {"bob": bob, "alice": alice}
        for who, api in (("bob", bob), ("alice", alice)):
            agent = (await api.post("/agents", json={"name": "a"})).json()["id"]
            response = await api.post("/api/v2/memory/add", json={
                "session_id": f"{who}-s", "messages": [_message(who)]})
            assert response.status_code == 200, response.text
            out[f"{who}_agent"] = agent
        yield out


async def test_every_example_goes_through_for_its_caller(
    world: dict[str, Any], engine: RecordingEngine
) -> None:
    for route in EVEROS_ROUTES:
        body, query = EXAMPLES[id(_model(route))]
        engine.requests.clear()
        response = await _send(world["bob"], route,
                               _filled(body, "bob-s", world["bob_agent"]), query and
                               _filled(query, "bob-s", world["bob_agent"]))
        assert response.status_code == 200, (route.pattern, response.text)
        assert len(engine.requests) == 1


def _victims(kind: str, world: dict[str, Any], claims: bool) -> list[str]:
    """Ids bob may not name: alice's, and (but where an add would claim it) no one's."""
    sessions = ["alice-s"] if claims else ["alice-s", "no-ones-session"]
    return {USER: [VICTIM], AGENT: [world["alice_agent"], "no-ones-agent"],
            SESSION: sessions}.get(kind, [])


@given(data=st.data())
@hypothesis_settings(max_examples=40, deadline=None,
                     suppress_health_check=[HealthCheck.function_scoped_fixture])
async def test_an_id_naming_another_user_is_refused_and_never_forwarded(
    world: dict[str, Any], engine: RecordingEngine, data: st.DataObject
) -> None:
    route = data.draw(st.sampled_from(EVEROS_ROUTES))
    model = _model(route)
    fields = [one for one in model.ids if one.kind in (USER, AGENT, SESSION)]
    if not fields:
        return
    one = data.draw(st.sampled_from(fields))
    victim = data.draw(st.sampled_from(_victims(one.kind, world, route.claims)))
    body, query = EXAMPLES[id(model)]
    body = _filled(body, "bob-s", world["bob_agent"])
    query = dict(_filled(query, "bob-s", world["bob_agent"]))
    if one.where == BODY:
        assert body is not None
        if one.kind in (USER, AGENT):  # the engine takes exactly one owner
            body.pop("user_id", None)
            body.pop("agent_id", None)
            if "memory_type" in body:
                body["memory_type"] = "episode" if one.kind == USER else "agent_case"
        body[one.key] = victim
    elif one.where == QUERY:
        query[one.key] = victim
    engine.requests.clear()
    response = await _send(world["bob"], route, body, query)
    assert response.status_code in (403, 404), (route.pattern, one, victim, response.text)
    assert engine.requests == []


@given(data=st.data())
@hypothesis_settings(max_examples=40, deadline=None,
                     suppress_health_check=[HealthCheck.function_scoped_fixture])
async def test_a_value_where_the_engine_does_not_read_it_never_scopes(
    world: dict[str, Any], engine: RecordingEngine, data: st.DataObject
) -> None:
    """Scoping fields moved to a place the engine ignores: the route is refused unscoped, and
    whatever goes upstream names no one but the caller."""
    route = data.draw(st.sampled_from([r for r in EVEROS_ROUTES if r.scoped]))
    model = _model(route)
    body, query = EXAMPLES[id(model)]
    body = _filled(body, "bob-s", world["bob_agent"])
    query = dict(_filled(query, "bob-s", world["bob_agent"]))
    scoping = [one for one in model.ids if one.scopes
               and one.key in (body if one.where == BODY else query)]
    one = data.draw(st.sampled_from(scoping))
    value = body.pop(one.key) if one.where == BODY else query.pop(one.key)
    places = ["nested", "spelled"] + (["query"] if one.where != QUERY else [])
    elsewhere = data.draw(st.sampled_from(places))
    if elsewhere == "query":
        query[one.key] = value
    elif body is not None and elsewhere == "nested":
        body["filters" if "filters" in (model.body.model_fields if model.body else {})
             else "metadata"] = {one.key: value}
    elif body is not None:
        body[one.key.upper()] = value
    else:
        query[one.key.upper()] = value
    engine.requests.clear()
    response = await _send(world["bob"], route, body, query)
    assert response.status_code in (403, 404, 422), (route.pattern, elsewhere, response.text)
    assert engine.requests == []


@pytest.mark.parametrize("role", ["user", "assistant", "tool"])
async def test_every_sender_the_engine_makes_an_owner_is_checked(
    world: dict[str, Any], engine: RecordingEngine, role: str
) -> None:
    for route in [r for r in EVEROS_ROUTES if _model(r).senders]:
        for sender in (VICTIM, world["alice_agent"], "no-ones-agent"):
            if role == "user" and sender != VICTIM:
                continue
            message = {**_message(sender, role), "tool_call_id": "c1"}
            engine.requests.clear()
            response = await _send(world["bob"], route, {
                "session_id": "bob-s", "messages": [_message(CALLER), message]}, {})
            assert response.status_code == 403, (route.pattern, role, sender, response.text)
            assert engine.requests == []


async def test_anonymous_requests_never_reach_the_engine(
    app: Gateway, engine: RecordingEngine
) -> None:
    async with client(app) as anonymous:
        for route in EVEROS_ROUTES:
            body, query = EXAMPLES[id(_model(route))]
            response = await _send(anonymous, route, body, query)
            assert response.status_code == 401, route.pattern
    assert engine.requests == []


@given(data=st.data())
@hypothesis_settings(max_examples=40, deadline=None,
                     suppress_health_check=[HealthCheck.function_scoped_fixture])
async def test_a_spelling_of_another_users_id_is_refused_and_never_forwarded(
    world: dict[str, Any], engine: RecordingEngine, data: st.DataObject
) -> None:
    """Padded, unicode-normalised, wildcard and magic spellings of alice's ids (SPEC §5,
    canonical ids), in every id field of every EverOS route: 422, nothing forwarded."""
    route = data.draw(st.sampled_from(EVEROS_ROUTES))
    model = _model(route)
    fields = [one for one in model.ids if one.kind in (USER, AGENT, SESSION)]
    if not fields:
        return
    one = data.draw(st.sampled_from(fields))
    theirs = {USER: VICTIM, AGENT: world["alice_agent"], SESSION: "alice-s"}[one.kind]
    value = data.draw(spellings(theirs))
    body, query = EXAMPLES[id(model)]
    body = _filled(body, "bob-s", world["bob_agent"])
    query = dict(_filled(query, "bob-s", world["bob_agent"]))
    if one.where == BODY:
        assert body is not None
        body[one.key] = value
    elif one.where == QUERY:
        query[one.key] = value
    engine.requests.clear()
    response = await _send(world["bob"], route, body, query)
    assert response.status_code == 422, (route.pattern, one, value, response.text)
    assert engine.requests == []


@pytest.mark.parametrize("session", [" alice-s", "alice-s\t", "alice-s\u00a0", "ａｌｉｃｅ-s",
                                     "*", "__all__", ""])
async def test_the_gateways_own_routes_take_canonical_sessions_only(
    world: dict[str, Any], engine: RecordingEngine, session: str
) -> None:
    engine.requests.clear()
    added = await world["bob"].post("/memories/add", json={
        "session_id": session, "messages": [_message(CALLER)]})
    searched = await world["bob"].post("/memories/search", json={
        "query": "x", "filters": {"session_id": session}})
    assert (added.status_code, searched.status_code) == (422, 422), (added.text, searched.text)
    assert engine.requests == []
