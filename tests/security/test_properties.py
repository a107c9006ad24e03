"""Property tests: whatever encoding, header spelling, target or query spelling bob tries, on
every route of every flavour's table, nothing naming alice reaches the engine (SPEC §3, §5)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gateway.upstream.flavors import FLAVORS
from gateway.upstream.routes import BODY, PATH, QUERY, SENDER, EngineRoute, Field
from tests.conftest import create_key
from tests.security.support import (
    CREDENTIAL_KINDS,
    RecordingEngine,
    client,
    credential_headers,
    gateway_with,
    settings_for,
)

VICTIM = "alice"
CASES = [(name, route) for name, flavor in FLAVORS.items() for route in flavor.routes.routes]
IDENTITY_KINDS = ("user", "sender", "agent")  # session/group/cube need a claim: see below


def _placed(route: EngineRoute) -> list[Field]:
    return [f for f in route.checked_fields() if f.kind in IDENTITY_KINDS]


def _body_with(field: Field, value: str) -> dict[str, Any]:
    keys = field.key.split(".")
    if field.kind == SENDER:
        return {"messages": [{"role": "user", "sender_id": value, "content": "hi"}]}
    node: dict[str, Any] = {}
    top = node
    for key in keys[:-1]:
        node[key] = {}
        node = node[key]
    node[keys[-1]] = value
    return top


def _spell_key(key: str, how: int) -> str:
    """The same query name, percent-encoded in one of several ways."""
    if how == 0:
        return key
    if how == 1:
        return key.replace("_", "%5F")
    if how == 2:
        return "".join(f"%{ord(c):02X}" for c in key)
    return quote(key[0], safe="").replace(key[0], f"%{ord(key[0]):02x}") + key[1:]


def _spell_path(path: str, how: int) -> str:
    if how == 0:
        return path
    if how == 1:
        return path.replace("/", "//")
    if how == 2:
        return path.rstrip("/") + "/"
    return "/".join(f"%{ord(seg[0]):02X}{seg[1:]}" if seg else seg for seg in path.split("/"))


ENCODINGS = [
    ("application/json", lambda text: text.encode()),
    ("application/json", lambda text: b"\xef\xbb\xbf" + text.encode()),
    ("application/json", lambda text: text.encode("utf-16")),
    ("application/json; charset=utf-16", lambda text: text.encode("utf-16-le")),
    ("text/plain", lambda text: text.encode()),
    ("application/octet-stream", lambda text: text.encode()),
    ("application/vnd.api+json", lambda text: text.encode()),
    ("application/json", lambda text: b"\xc2\xa0" + text.encode()),
    ("application/json", lambda text: b" \n\t" + text.encode()),
]
USER_HEADER_SPELLINGS = ["X-Memory-User-Id", "x_memory_user_id", "X_MEMORY_USER_ID",
                         "x-memory-user_id", "X-Memory-User-ID"]


@st.composite
def attempts(draw: st.DrawFn) -> tuple[str, EngineRoute, Field | None, dict[str, Any]]:
    flavor, route = draw(st.sampled_from(CASES))
    # None: bob's own ids everywhere, and alice only in a spelling of the user header.
    field = draw(st.sampled_from([*(_placed(route) or [Field("user", QUERY, "user_id")]),
                                  None]))
    return flavor, route, field, {
        "encoding": draw(st.sampled_from(range(len(ENCODINGS)))),
        "path": draw(st.integers(0, 3)),
        "key": draw(st.integers(0, 3)),
        "repeat": draw(st.booleans()),
        "header": draw(st.sampled_from(USER_HEADER_SPELLINGS)),
        "credential": draw(st.sampled_from(CREDENTIAL_KINDS)),
    }


def test_nothing_naming_another_user_reaches_the_engine(tmp_path: Path) -> None:
    loop = asyncio.new_event_loop()
    try:
        loop.run_until_complete(_property(tmp_path))
    finally:
        loop.close()


async def _property(tmp_path: Path) -> None:
    engine = RecordingEngine()
    apps = {}
    stack = []
    for name in FLAVORS:
        config = settings_for(tmp_path / name, flavor=name)
        context = gateway_with(config, engine)
        apps[name] = (await context.__aenter__(), {
            kind: credential_headers(config, "bob", kind) for kind in CREDENTIAL_KINDS})
        stack.append(context)
    try:
        await _run(apps, engine)
    finally:
        for context in reversed(stack):
            await context.__aexit__(None, None, None)


async def _run(apps: dict[str, Any], engine: RecordingEngine) -> None:
    loop = asyncio.get_running_loop()

    @settings(max_examples=300, deadline=None,
              suppress_health_check=[HealthCheck.too_slow])
    @given(attempts())
    def one(attempt: tuple[str, EngineRoute, Field | None, dict[str, Any]]) -> None:
        asyncio.run_coroutine_threadsafe(_attempt(apps, engine, attempt), loop).result()

    await loop.run_in_executor(None, one)


async def _attempt(apps: dict[str, Any], engine: RecordingEngine,
                   attempt: tuple[str, EngineRoute, Field | None, dict[str, Any]]) -> None:
    flavor, route, field, how = attempt
    app, credentials = apps[flavor]
    params = {name: "bob" for name in route.names}
    if "*" in route.pattern:
        params["*"] = "x"
    query: list[str] = []
    content = None
    headers = [*credentials[how["credential"]].items(), (how["header"], VICTIM)]
    if field is None:
        query = ["user_id=bob"]
        content = json.dumps({"user_id": "bob", "sender": "bob", "query": "x"}).encode()
        headers.append(("Content-Type", "application/json"))
    elif field.where == PATH:
        params[field.key] = VICTIM
    elif field.where == QUERY:
        name = _spell_key(field.key, how["key"])
        query = [f"{name}=bob", f"{name}={VICTIM}"] if how["repeat"] else [f"{name}={VICTIM}"]
    elif field.where == BODY:
        content_type, encode = ENCODINGS[how["encoding"]]
        content = encode(json.dumps(_body_with(field, VICTIM)))
        headers.append(("Content-Type", content_type))
    path = _spell_path(route.render(params), how["path"])
    target = path + ("?" + "&".join(query) if query else "")
    engine.requests.clear()
    method = "GET" if route.method == "HEAD" else route.method
    async with client(app) as bob:
        response = await bob.request(method, target, content=content, headers=headers)
    assert response.status_code != 500, response.text
    # Every credential kind authenticates: a refusal must come from the checks, not from 401.
    assert response.status_code != 401, (how["credential"], response.text)
    for seen in engine.seen():
        assert VICTIM.encode() not in seen.lower(), (flavor, route.pattern, field, how, seen)
    if engine.requests:
        assert 200 <= response.status_code < 600


PLAIN = {"encoding": 0, "path": 0, "key": 0, "repeat": False, "header": "X-Memory-User-Id"}
SPELLED = {"encoding": 6, "path": 3, "key": 2, "repeat": True, "header": "x_memory_user_id"}


@pytest.mark.parametrize("credential", CREDENTIAL_KINDS)
async def test_every_route_of_every_flavour_refuses_another_user_in_every_field(
    tmp_path: Path, credential: str
) -> None:
    """The sweep behind the sampling above: each entry, each identity field, two spellings,
    once per kind of credential acting for bob."""
    engine = RecordingEngine()
    for name, flavor in FLAVORS.items():
        config = settings_for(tmp_path / name, flavor=name)
        async with gateway_with(config, engine) as app:
            apps = {name: (app, {credential: credential_headers(config, "bob", credential)})}
            for route in flavor.routes.routes:
                for field in [*_placed(route), None]:
                    for how in (PLAIN, SPELLED):
                        await _attempt(apps, engine,
                                       (name, route, field, {**how, "credential": credential}))


@pytest.mark.parametrize("credential", CREDENTIAL_KINDS)
async def test_claimed_sessions_groups_and_cubes_of_another_user_are_refused_everywhere(
    tmp_path: Path, credential: str
) -> None:
    """Session, group and cube fields of every route: alice's claimed ids are refused to bob,
    whichever kind of credential acts for him."""
    engine = RecordingEngine()
    for name, flavor in FLAVORS.items():
        config = settings_for(tmp_path / name, flavor=name)
        async with gateway_with(config, engine) as app:
            alice = client(app, {"Authorization": f"Bearer {create_key(config, 'alice')}"})
            bob = client(app, credential_headers(config, "bob", credential))
            for scope in (("default", "default"), ("default", "default"), ("_cube", "_cube")):
                await app.services.rules.claim_session("alice", *scope, "alices-id")
            for route in flavor.routes.routes:
                for field in route.checked_fields():
                    if field.kind not in ("session", "group", "cube"):
                        continue
                    params = {n: "bob" for n in route.names} | {"*": "x"}
                    query = ""
                    content = b'{"user_id": "bob"}'
                    if field.where == PATH:
                        params[field.key] = "alices-id"
                    elif field.where == QUERY:
                        query = f"?{field.key}=alices-id&user_id=bob"
                    else:
                        value: Any = "alices-id"
                        if field.key.endswith("_ids"):
                            value = ["alices-id"]
                        content = json.dumps({field.key: value, "user_id": "bob"}).encode()
                    engine.requests.clear()
                    response = await bob.request(
                        route.method, route.render(params) + query, content=content,
                        headers={"Content-Type": "application/json"})
                    # 403 on an add (it would claim it), 404 elsewhere (like no one's id).
                    assert response.status_code in (403, 404), (name, route.pattern, field,
                                                                response.text)
                    assert engine.requests == []
            await alice.aclose()
            await bob.aclose()
