"""Property tests over the route models of mem0, MemOS and EverOS Cloud (SPEC §3, §5).

For every modelled route of those flavours there is one request the caller may make (EXAMPLES,
each of its ids the caller's). From it, for every id field its model names:
- that field naming alice (her user id, agent, session, group or cube), in every placement the
  model reads and every spelling (encoded and repeated query names, path spellings, list and
  operator forms, filter trees), is refused and nothing naming alice reaches the engine;
- on a route the model bounds, the bounding fields replaced by forms that pin no one (absent,
  empty lists, `OR`, `NOT`), or the caller's own ids put where the engine does not read them,
  is refused (422 `user_id_required`, 403 or 404) and nothing is forwarded.
The caller of the second kind is carl: a MemOS request that falls back to the cube named like
him reads his own cube (a user's by its name) and nothing else.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gateway.identity.canonical import cube_owner
from gateway.identity.named import AGENT, CUBE, FILTERS, GROUP, SESSION, USER
from gateway.identity.ownership import GROUP_SCOPE
from gateway.upstream.flavors import FLAVORS, cloud_models, mem0_models, memos_models
from gateway.upstream.models import BODY, PATH, QUERY, SENDERS, Id
from gateway.upstream.routes import EngineRoute
from tests.conftest import create_key
from tests.security.support import RecordingEngine, client, gateway_with, settings_for

MINE = ("mem0", "memos", "everos-cloud", "everos-cloud-v1")
CASES = [(name, route) for name in MINE for route in FLAVORS[name].routes.routes
         if route.model is not None]
VICTIM = "alice"
REFUSED = (403, 404, 422)


@dataclass
class Ids:
    """One user's ids, each claimed (or created) for them."""

    user: str
    agent: str = ""
    session: str = ""
    group: str = ""
    cube: str = ""

    def of(self, kind: str) -> str:
        return {USER: self.user, AGENT: self.agent, SESSION: self.session, GROUP: self.group,
                CUBE: self.cube}[kind]


@dataclass
class Request:
    query: list[tuple[str, str]] = field(default_factory=list)
    body: Any = None
    params: dict[str, str] = field(default_factory=dict)


def _msg(sender: str, role: str = "user", **more: Any) -> dict[str, Any]:
    return {"role": role, "sender_id": sender, "timestamp": 1, "content": "hi", **more}


# --- one request per route, all of its ids the caller's ---------------------------------------

def _mem0(i: Ids) -> dict[tuple[str, str], Request]:
    ids = {"user_id": i.user, "agent_id": i.agent, "run_id": i.session}
    query = list(ids.items())
    pinned = {"AND": [{"user_id": i.user}, {"agent_id": i.agent}, {"run_id": i.session}]}
    text = [{"role": "user", "content": "hi"}]
    return {
        ("POST", "/memories"): Request(body={**ids, "messages": text}),
        ("POST", "/search"): Request(body={"query": "x", **ids, "filters": {"user_id": i.user}}),
        ("POST", "/v3/memories/add/"): Request(body={**ids, "messages": text,
                                                      "filters": {"user_id": i.user}}),
        ("POST", "/v3/memories/search/"): Request(body={"query": "x", "filters": pinned}),
        ("GET", "/memories"): Request(query=query),
        ("DELETE", "/memories"): Request(query=query),
        ("POST", "/v3/memories/"): Request(body={"filters": pinned}),
        ("DELETE", "/v1/memories/"): Request(query=query),
        ("GET", "/v2/entities/user/{entity_id}/"): Request(params={"entity_id": i.user}),
        ("GET", "/v2/entities/agent/{entity_id}/"): Request(params={"entity_id": i.agent}),
        ("GET", "/v2/entities/run/{entity_id}/"): Request(params={"entity_id": i.session}),
        ("DELETE", "/v2/entities/user/{entity_id}/"): Request(params={"entity_id": i.user}),
        ("DELETE", "/v2/entities/agent/{entity_id}/"): Request(params={"entity_id": i.agent}),
        ("DELETE", "/v2/entities/run/{entity_id}/"): Request(params={"entity_id": i.session}),
        ("POST", "/v1/exports/"): Request(body={"schema": {}, "filters": pinned}),
        ("POST", "/v1/exports/get/"): Request(body={"filters": pinned}),
        ("POST", "/v1/summary/"): Request(body={"filters": pinned}),
        ("PUT", "/memories/{memory_id}"): Request(body={"text": "x"}),
        ("PUT", "/v1/memories/{memory_id}/"): Request(body={"text": "x"}),
    }


def _memos(i: Ids) -> dict[tuple[str, str], Request]:
    filter_ = {"and": [{"user_id": i.user}, {"manager_user_id": i.user},
                       {"user_name": i.cube}, {"session_id": i.session}]}
    chat = {"user_id": i.user, "query": "x", "manager_user_id": i.user, "session_id": i.session,
            "readable_cube_ids": [i.cube], "writable_cube_ids": [i.cube], "filter": filter_}
    return {
        ("POST", "/product/add"): Request(body={
            "user_id": i.user, "manager_user_id": i.user, "session_id": i.session,
            "writable_cube_ids": [i.cube], "messages": "hi"}),
        ("POST", "/product/search"): Request(body={
            "query": "x", "user_id": i.user, "session_id": i.session,
            "readable_cube_ids": [i.cube], "filter": filter_}),
        ("POST", "/product/get_all"): Request(body={
            "user_id": i.user, "memory_type": "text_mem", "mem_cube_ids": [i.cube]}),
        ("POST", "/product/get_memory"): Request(body={
            "mem_cube_id": i.cube, "user_id": i.user, "filter": filter_}),
        ("POST", "/product/delete_memory"): Request(body={
            "user_id": i.user, "writable_cube_ids": [i.cube], "session_id": i.session,
            "filter": filter_}),
        ("POST", "/product/chat/complete"): Request(body=chat),
        ("POST", "/product/chat/stream"): Request(body=chat),
        ("POST", "/product/suggestions"): Request(body={"user_id": i.user,
                                                        "mem_cube_id": i.cube}),
    }


def _cloud(i: Ids) -> dict[tuple[str, str], Request]:
    v1_pinned = {"AND": [{"user_id": i.user}, {"group_id": i.group}, {"session_id": i.session}]}
    v2_filters = {"AND": [{"session_id": i.session}, {"user_id": i.user}]}
    owner = {"user_id": i.user, "agent_id": i.agent}
    v0_body = {"user_id": i.user, "group_id": i.group}
    v0_query = list(v0_body.items())
    return {
        ("POST", "/api/v2/memory/add"): Request(body={"session_id": i.session, "messages": [
            _msg(i.user), _msg(i.agent, "assistant")]}),
        ("POST", "/api/v2/memory/search"): Request(body={"query": "x", **owner,
                                                         "filters": v2_filters}),
        ("POST", "/api/v2/memory/get"): Request(body={**owner, "memory_type": "episode",
                                                      "filters": v2_filters}),
        ("POST", "/api/v2/memory/flush"): Request(body={"session_id": i.session}),
        ("POST", "/api/v2/memory/delete"): Request(body={**owner, "session_id": i.session}),
        ("POST", "/api/v2/memory/edit"): Request(body={"user_id": i.user, "operations": [
            {"action": "add", "type": "explicit_info", "data": {"city": "Lisbon"}}]}),
        ("POST", "/api/v1/memories"): Request(body={"user_id": i.user, "session_id": i.session,
                                                    "messages": [_msg(i.user)]}),
        ("POST", "/api/v1/memories/agent"): Request(body={
            "user_id": i.user, "session_id": i.session, "messages": [_msg(i.user)]}),
        ("POST", "/api/v1/memories/search"): Request(body={"query": "x", "filters": v1_pinned}),
        ("POST", "/api/v1/memories/get"): Request(body={"filters": v1_pinned,
                                                        "memory_type": "episodic_memory"}),
        ("POST", "/api/v1/memories/flush"): Request(body={"user_id": i.user,
                                                          "session_id": i.session}),
        ("POST", "/api/v1/memories/agent/flush"): Request(body={"user_id": i.user,
                                                                "session_id": i.session}),
        ("POST", "/api/v1/memories/delete"): Request(body={
            "user_id": i.user, "group_id": i.group, "session_id": i.session}),
        ("POST", "/api/v1/memories/group"): Request(body={"group_id": i.group, "messages": [
            _msg(i.user), _msg(i.agent, "assistant")]}),
        ("POST", "/api/v1/memories/group/flush"): Request(body={"group_id": i.group}),
        ("POST", "/api/v1/groups"): Request(body={"group_id": i.group}),
        ("GET", "/api/v1/groups/{group_id}"): Request(params={"group_id": i.group}),
        ("PATCH", "/api/v1/groups/{group_id}"): Request(body={"name": "x"},
                                                        params={"group_id": i.group}),
        ("POST", "/api/v1/senders"): Request(body={"sender_id": i.user}),
        ("GET", "/api/v1/senders/{sender_id}"): Request(params={"sender_id": i.user}),
        ("PATCH", "/api/v1/senders/{sender_id}"): Request(body={"name": "x"},
                                                          params={"sender_id": i.user}),
        ("POST", "/api/v0/memories"): Request(body={
            "message_id": "m1", "create_time": "2026-01-01T00:00:00+00:00", "sender": i.user,
            "content": "hi", "group_id": i.group}),
        ("GET", "/api/v0/memories"): Request(query=v0_query, body=v0_body),
        ("GET", "/api/v0/memories/search"): Request(query=[*v0_query, ("query", "x")],
                                                    body=v0_body),
        ("DELETE", "/api/v0/memories"): Request(body={**v0_body, "memory_id": "m1"}),
        ("GET", "/api/v0/status/request"): Request(query=[("request_id", "r-1")]),
    }


EXAMPLES: dict[str, Callable[[Ids], dict[tuple[str, str], Request]]] = {
    "mem0": _mem0, "memos": _memos, "everos-cloud": _cloud, "everos-cloud-v1": _cloud}


def example(flavor: str, route: EngineRoute, ids: Ids) -> Request:
    found = EXAMPLES[flavor](ids).get((route.method, route.pattern))
    request = Request() if found is None else Request(list(found.query),
                                                      json.loads(json.dumps(found.body)),
                                                      dict(found.params))
    for name in route.names:
        request.params.setdefault(name, "m-1")  # memory and task ids: the owner read decides
    return request


# --- each filter dialect: its combinators and the fields that name someone --------------------

@dataclass(frozen=True)
class Dialect:
    every: str
    some: str
    owners: dict[str, str]
    negate: str | None = None


DIALECTS = {
    mem0_models.filter_ids: Dialect("AND", "OR", {"user_id": USER, "agent_id": AGENT,
                                                  "run_id": SESSION}, negate="NOT"),
    cloud_models.v1_filter_ids: Dialect("AND", "OR", {"user_id": USER, "group_id": GROUP,
                                                      "session_id": SESSION}),
    cloud_models.v2_filter_ids: Dialect("AND", "OR", {"user_id": USER, "agent_id": AGENT,
                                                      "session_id": SESSION}),
    memos_models.filter_ids: Dialect("and", "or", {"user_id": USER, "manager_user_id": USER,
                                                   "user_name": CUBE, "session_id": SESSION}),
}


# --- the two users and the apps ------------------------------------------------------------------

@dataclass
class World:
    apps: dict[str, Any]
    keys: dict[tuple[str, str], str]
    ids: dict[tuple[str, str], Ids]


async def _world(tmp_path: Path, engine: RecordingEngine, stack: list[Any]) -> World:
    apps, keys, all_ids = {}, {}, {}
    for name in MINE:
        config = settings_for(tmp_path / name, flavor=name)
        context = gateway_with(config, engine)
        app = await context.__aenter__()
        stack.append(context)
        apps[name] = app
        rules = app.services.rules
        for user in ("alice", "bob", "carl"):
            key = create_key(config, user)
            async with client(app, {"Authorization": f"Bearer {key}"}) as as_user:
                made = await as_user.post("/agents", json={"name": "helper"})
                assert made.status_code == 201, made.text
            ids = Ids(user, made.json()["id"], f"{user}s-session", f"{user}s-group",
                      f"{user}:cube")
            await rules.claim_session(user, "default", "default", ids.session)
            await rules.claim_session(user, *GROUP_SCOPE, ids.group)
            keys[(name, user)], all_ids[(name, user)] = key, ids
    return World(apps, keys, all_ids)


def _spell_key(key: str, how: int) -> str:
    return [key, key.replace("_", "%5F"), "".join(f"%{ord(c):02X}" for c in key)][how % 3]


def _spell_path(path: str, how: int) -> str:
    if how == 1:  # not at the start: "//host/..." is a network-path reference
        return "/" + path.lstrip("/").replace("/", "//")
    if how == 2:
        return path.rstrip("/") + "/"
    return path


async def _send(world: World, engine: RecordingEngine, flavor: str, user: str,
                route: EngineRoute, request: Request, how: int = 0) -> int:
    path = _spell_path(route.render(request.params), how)
    query = "&".join(f"{_spell_key(k, how)}={quote(v, safe='')}" for k, v in request.query)
    headers = {"Authorization": f"Bearer {world.keys[(flavor, user)]}"}
    content = None
    if request.body is not None:
        content = json.dumps(request.body).encode()
        headers["Content-Type"] = "application/json"
    engine.requests.clear()
    async with client(world.apps[flavor], headers) as caller:
        response = await caller.request(route.method, path + (f"?{query}" if query else ""),
                                        content=content)
    assert response.status_code != 500, response.text
    return response.status_code


# --- mutations: one id naming alice ------------------------------------------------------------

Mutation = tuple[str, Callable[[Request], None]]


def _set(request: Request, one: Id, value: Any) -> None:
    if one.where == QUERY:
        request.query = [(k, v) for k, v in request.query if k != one.key] + [(one.key, value)]
    elif one.where == PATH:
        request.params[one.key] = value
    else:
        request.body[one.key] = value


def victims(flavor: str, route: EngineRoute, alice: Ids, bob: Ids) -> list[Mutation]:
    model = route.model
    assert model is not None
    out: list[Mutation] = []
    for one in model.ids:
        if one.kind == SENDERS:
            for role, kind in model.senders.items():
                sender = alice.of(kind)
                wrong = [(f"{role} sender alice's", sender)]
                if kind == AGENT:
                    wrong.append((f"{role} sender a user", bob.user))
                for label, value in wrong:
                    extra = {"tool_call_id": "c"} if role == "tool" else {}
                    out.append((f"{one.key}: {label}", lambda r, key=one.key, role=role,
                                value=value, extra=extra: r.body[key].append(
                                    _msg(value, role, **extra))))
            continue
        if one.kind == FILTERS:
            dialect = DIALECTS[model.filters]  # type: ignore[index]
            for key, kind in dialect.owners.items():
                theirs, mine = alice.of(kind), bob.of(kind)
                trees = [{key: theirs}, {dialect.some: [{key: theirs}]},
                         {key: {"in": [mine, theirs]}}, {dialect.every: [{key: theirs}]}]
                if kind in (USER, AGENT):
                    trees += [{key: {"gt": ""}}, {key: {"ne": mine}}]
                    if dialect.negate:
                        trees.append({dialect.negate: {key: mine}})
                for tree in trees:
                    out.append((f"{one.label}: {tree}", lambda r, key=one.key, tree=tree,
                                every=dialect.every: r.body.__setitem__(
                                    key, {every: [r.body[key], tree]})))
            continue
        theirs = alice.of(one.kind)
        listed = isinstance((example(flavor, route, bob).body or {}).get(one.key), list)
        values: list[Any] = [[theirs], [bob.of(one.kind), theirs]] if listed else [theirs]
        if one.where == QUERY:
            out.append((f"{one.label} repeated", lambda r, one=one, theirs=theirs: r.query.extend(
                [(one.key, bob.of(one.kind)), (one.key, theirs)])))
        for value in values:
            out.append((f"{one.label} = {value}", lambda r, one=one, value=value:
                        _set(r, one, value)))
    return out


MUTATIONS = [(flavor, route, index) for flavor, route in CASES
             for index in range(len(victims(flavor, route, Ids("alice", "a", "s", "g", "c"),
                                            Ids("bob", "b", "s2", "g2", "c2"))))]


async def _victim(world: World, engine: RecordingEngine, flavor: str, route: EngineRoute,
                  index: int, how: int) -> None:
    alice, bob = world.ids[(flavor, "alice")], world.ids[(flavor, "bob")]
    label, mutate = victims(flavor, route, alice, bob)[index]
    request = example(flavor, route, bob)
    mutate(request)
    status = await _send(world, engine, flavor, "bob", route, request, how)
    assert status in REFUSED, (flavor, route.method, route.pattern, label, status)
    for seen in engine.seen():
        assert VICTIM.encode() not in seen.lower(), (flavor, route.pattern, label, seen)
        assert alice.agent.encode() not in seen, (flavor, route.pattern, label, seen)


# --- forms that pin no one, and the caller's ids where the engine does not read them ------------

UNREAD_KEYS = {"user_id": USER, "agent_id": AGENT, "run_id": SESSION, "session_id": SESSION,
               "group_id": GROUP, "mem_cube_id": CUBE, "cube_id": CUBE}


def unpinned(flavor: str, route: EngineRoute, carl: Ids) -> list[Mutation]:
    """Requests whose bounding fields pin no one (the rest of the request carl's own)."""
    model = route.model
    assert model is not None
    bounding = [one for one in model.ids if one.scopes]
    if not bounding or any(one.where == PATH for one in bounding):
        return []
    # What the engine's request models declare, under any name (memos: `mem_cube_id` is read
    # as the cube list; its models fold it in).
    read = {(one.where, one.key) for one in model.ids}
    for where, part in ((BODY, model.body), (QUERY, model.query)):
        if part is not None:
            read |= {(where, info.alias or name) for name, info in part.model_fields.items()}

    def without(request: Request, form: str) -> None:
        for one in bounding:
            if one.kind == FILTERS:
                dialect = DIALECTS[model.filters]  # type: ignore[index]
                tree = request.body.get(one.key)
                request.body[one.key] = {
                    "or": {dialect.some: [tree]},
                    "empty": {key: [] for key in dialect.owners},
                    "none-in": {key: {"in": []} for key in dialect.owners},
                    "absent": {dialect.some: [{"timestamp": {"gt": 0}}]},
                }[form]
            elif one.where == QUERY:
                request.query = [(k, v) for k, v in request.query if k != one.key]
            elif form == "empty" and isinstance(request.body.get(one.key), list):
                request.body[one.key] = []
            else:
                request.body.pop(one.key, None)

    out: list[Mutation] = [(f"bounding fields {form}", lambda r, form=form: without(r, form))
                           for form in ("absent", "empty", "or", "none-in")]
    for key, kind in UNREAD_KEYS.items():
        for where in (QUERY, BODY):
            if (where, key) in read or (where == BODY and model.body is None):
                continue

            def misplace(request: Request, key: str = key, kind: str = kind,
                         where: str = where) -> None:
                without(request, "absent")
                if where == QUERY:
                    request.query.append((key, carl.of(kind)))
                else:
                    request.body = {**(request.body or {}), key: carl.of(kind)}

            out.append((f"carl's {key} in the {where}", misplace))
    return out


UNPINNED = [(flavor, route, index) for flavor, route in CASES
            for index in range(len(unpinned(flavor, route, Ids("carl", "a", "s", "g", "c"))))]


async def _unpinned(world: World, engine: RecordingEngine, flavor: str, route: EngineRoute,
                    index: int, how: int) -> None:
    carl = world.ids[(flavor, "carl")]
    label, mutate = unpinned(flavor, route, carl)[index]
    request = example(flavor, route, carl)
    mutate(request)
    status = await _send(world, engine, flavor, "carl", route, request, how)
    if flavor == "memos" and 200 <= status < 300:
        # MemOS falls back to the cube named like the user, carl's own by its name (SPEC §5).
        for sent in engine.requests:
            cubes = _memos_cubes(json.loads(sent.content))
            assert {cube_owner(cube) for cube in cubes} == {"carl"}, (route.pattern, label)
        return
    assert status in REFUSED, (flavor, route.method, route.pattern, label, status)
    assert engine.requests == [], (flavor, route.pattern, label)


def _memos_cubes(body: dict[str, Any]) -> set[str]:
    """The cubes a MemOS request names; none named: the user's own (memos_models._cubes)."""
    named: set[str] = set()
    for key in ("readable_cube_ids", "writable_cube_ids", "mem_cube_ids", "mem_cube_id"):
        value = body.get(key)
        named.update(value if isinstance(value, list) else [value] if value else [])
    return named or {body["user_id"]}


# --- the tests -----------------------------------------------------------------------------------

def _owned_by_the_caller(request: httpx.Request) -> httpx.Response:
    """Every answer, the owner read of a route by id included, belongs to the caller."""
    return httpx.Response(200, json={"user_id": request.headers.get("x-memory-user-id"),
                                     "results": [], "data": {}, "result": {}})


def _run(tmp_path: Path, body: Callable[[World, RecordingEngine], Any]) -> None:
    async def main() -> None:
        engine = RecordingEngine(_owned_by_the_caller)
        stack: list[Any] = []
        try:
            world = await _world(tmp_path, engine, stack)
            await body(world, engine)
        finally:
            for context in reversed(stack):
                await context.__aexit__(None, None, None)

    loop = asyncio.new_event_loop()
    try:
        loop.run_until_complete(main())
    finally:
        loop.close()


def test_every_example_is_forwarded_for_its_owner(tmp_path: Path) -> None:
    """The requests the properties start from are the caller's own: each one goes through."""
    async def sweep(world: World, engine: RecordingEngine) -> None:
        for flavor, route in CASES:
            for user in ("bob", "carl"):
                request = example(flavor, route, world.ids[(flavor, user)])
                status = await _send(world, engine, flavor, user, route, request)
                assert 200 <= status < 300 and engine.requests, (flavor, route.pattern, user,
                                                                 status)

    _run(tmp_path, sweep)


def test_every_id_field_naming_another_user_is_refused_and_never_forwarded(
    tmp_path: Path,
) -> None:
    """The sweep: every route, every id its model names, every victim form, two spellings."""
    async def sweep(world: World, engine: RecordingEngine) -> None:
        for flavor, route, index in MUTATIONS:
            for how in (0, 2):
                await _victim(world, engine, flavor, route, index, how)

    _run(tmp_path, sweep)


def test_a_bounded_route_is_refused_unless_a_field_the_engine_reads_pins_the_caller(
    tmp_path: Path,
) -> None:
    async def sweep(world: World, engine: RecordingEngine) -> None:
        for flavor, route, index in UNPINNED:
            for how in (0, 1):
                await _unpinned(world, engine, flavor, route, index, how)

    _run(tmp_path, sweep)


def test_sampled_spellings_of_every_refusal(tmp_path: Path) -> None:
    """Hypothesis over the same space: any mutation, any spelling of path and query names."""
    async def sample(world: World, engine: RecordingEngine) -> None:
        loop = asyncio.get_running_loop()

        @settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
        @given(st.one_of(st.tuples(st.just(True), st.sampled_from(MUTATIONS)),
                         st.tuples(st.just(False), st.sampled_from(UNPINNED))),
               st.integers(0, 2))
        def one(case: tuple[bool, tuple[str, EngineRoute, int]], how: int) -> None:
            victim, (flavor, route, index) = case
            attempt = _victim if victim else _unpinned
            asyncio.run_coroutine_threadsafe(
                attempt(world, engine, flavor, route, index, how), loop).result()

        await loop.run_in_executor(None, one)

    _run(tmp_path, sample)
