"""Fair share (SPEC §13): per-credential token buckets per route class, the per-user engine
call cap, and their 429 answers, in process on SQLite and PostgreSQL with the engine faked."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from typing import Any

import httpx
import pytest
import respx

from gateway.app import Gateway
from gateway.config import Settings
from tests.conftest import StartGateway, client_for

# Buckets live in the process on SQLite and in one PostgreSQL row each: both are run.
pytestmark = pytest.mark.both_databases

GET = "/api/v2/memory/get"  # an engine read (a POST the table marks `reads`)
ADD = "/api/v2/memory/add"  # an engine write (answered by the gateway's add handler)
READ_BODY = {"user_id": "alice", "memory_type": "episode"}


def limited(settings: Settings, **classes: dict[str, Any]) -> Settings:
    """0.2 tokens/s: no bucket refills a whole token within a test's few requests."""
    values: dict[str, Any] = {"rate_limits": {"requests_per_s": 0.2, "burst": 3}}
    values.update({f"rate_limits_{name}": table for name, table in classes.items()})
    return settings.with_values(**values)


def engine_answers(engine: respx.MockRouter) -> None:
    engine.post(GET).mock(return_value=httpx.Response(200, json={"data": {"episodes": []}}))
    engine.post(ADD).mock(return_value=httpx.Response(200, json={"status": "ok"}))
    engine.post("/api/v2/memory/flush").mock(return_value=httpx.Response(200, json={}))


async def read(client: httpx.AsyncClient, user: str = "alice") -> httpx.Response:
    return await client.post(GET, json={**READ_BODY, "user_id": user})


async def write(client: httpx.AsyncClient) -> httpx.Response:
    return await client.post(ADD, json={"session_id": "s1", "messages": [
        {"role": "user", "sender_id": "alice", "timestamp": 1760000000000, "content": "hi"}]})


async def test_over_the_burst_is_429_rate_limited_with_retry_after_and_ratelimit_headers(
    settings: Settings, start_gateway: StartGateway, engine: respx.MockRouter,
    make_key: Callable[[str], str],
) -> None:
    engine_answers(engine)
    async with start_gateway(limited(settings)) as app, client_for(app, make_key("alice")) as alice:
        answers = [await read(alice) for _ in range(4)]
    assert [a.status_code for a in answers] == [200, 200, 200, 429]
    assert [a.headers["ratelimit-limit"] for a in answers] == ["3"] * 4
    assert [a.headers["ratelimit-remaining"] for a in answers] == ["2", "1", "0", "0"]
    refused = answers[3]
    # Under 0.2 of a token refilled: the next one is 5 s away, a full bucket 15 s.
    assert refused.headers["retry-after"] == "5"
    assert refused.headers["ratelimit-reset"] == "15"
    error = refused.json()["error"]
    assert error["code"] == "rate_limited" and error["status"] == 429
    assert error["request_id"] == refused.headers["x-request-id"]
    assert "retry-after" not in answers[0].headers
    assert engine.routes[0].call_count == 3  # the refused read never reached the engine


async def test_a_bucket_refills_at_its_rate(
    settings: Settings, start_gateway: StartGateway, engine: respx.MockRouter,
    make_key: Callable[[str], str],
) -> None:
    engine_answers(engine)
    fast = settings.with_values(rate_limits={"requests_per_s": 2.0, "burst": 1})
    async with start_gateway(fast) as app, client_for(app, make_key("alice")) as alice:
        first, second = await read(alice), await read(alice)
        await asyncio.sleep(0.6)  # more than one token at 2 per second
        third = await read(alice)
    assert [first.status_code, second.status_code, third.status_code] == [200, 429, 200]
    assert second.headers["retry-after"] == "1"


async def test_route_classes_have_buckets_of_their_own_and_their_own_overrides(
    settings: Settings, start_gateway: StartGateway, engine: respx.MockRouter,
    make_key: Callable[[str], str],
) -> None:
    engine_answers(engine)
    tuned = limited(settings, engine_write={"burst": 1}, owned={"burst": 5})
    async with start_gateway(tuned) as app, client_for(app, make_key("alice")) as alice:
        reads = [(await read(alice)).status_code for _ in range(4)]
        writes = [(await write(alice)).status_code for _ in range(2)]
        owned = [await alice.get("/agents") for _ in range(6)]
    assert reads == [200, 200, 200, 429]
    assert writes == [200, 429]  # engine_write's burst of 1, untouched by the spent reads
    assert [a.status_code for a in owned] == [200] * 5 + [429]
    assert owned[0].headers["ratelimit-limit"] == "5"


async def test_uploads_count_against_the_upload_class(
    settings: Settings, start_gateway: StartGateway, engine: respx.MockRouter,
    make_key: Callable[[str], str],
) -> None:
    engine_answers(engine)
    tuned = limited(settings, upload={"burst": 1})
    async with start_gateway(tuned) as app, client_for(app, make_key("alice")) as alice:
        uploads = [await alice.post("/resources", files={"file": (f"n{i}.txt", b"hi %d" % i)})
                   for i in range(2)]
        listed = await alice.get("/resources")
    assert [u.status_code for u in uploads] == [201, 429]
    assert uploads[1].json()["error"]["code"] == "rate_limited"
    assert listed.status_code == 200  # listing is an owned route, not an upload
    assert len(listed.json()["items"]) == 1


async def test_the_sdks_sign_requests_count_against_the_upload_class(
    settings: Settings, start_gateway: StartGateway, make_key: Callable[[str], str],
) -> None:
    """Signing opens upload forms posted without a key: the sign request is what is drawn."""
    tuned = limited(settings, upload={"burst": 2})
    body = {"objectList": [{"fileId": "f0", "fileName": "harbour.png", "fileType": "image"}]}
    async with start_gateway(tuned) as app, client_for(app, make_key("alice")) as alice:
        signs = [await alice.post("/api/v2/object/sign", json=body) for _ in range(2)]
        upload = await alice.post("/resources", files={"file": ("n.txt", b"hi")})
        other = await alice.post("/api/v1/object/sign", json=body)
        owned = await alice.get("/agents")
    assert [s.status_code for s in signs] == [200, 200]
    assert all(s.json()["status"] == 0 for s in signs)
    assert [s.headers["ratelimit-remaining"] for s in signs] == ["1", "0"]
    assert upload.status_code == other.status_code == 429  # one bucket for both kinds
    assert other.json()["error"]["code"] == "rate_limited"
    assert owned.status_code == 200 and owned.headers["ratelimit-remaining"] == "2"


async def test_one_credentials_flood_does_not_limit_another(
    settings: Settings, start_gateway: StartGateway, engine: respx.MockRouter,
    make_key: Callable[[str], str],
) -> None:
    engine_answers(engine)
    async with start_gateway(limited(settings)) as app, \
            client_for(app, make_key("alice")) as alice, \
            client_for(app, make_key("bob")) as bob:
        flood = [(await read(alice)).status_code for _ in range(10)]
        bobs = [await read(bob, "bob") for _ in range(3)]
    assert flood.count(200) == 3 and flood.count(429) == 7
    assert [b.status_code for b in bobs] == [200, 200, 200]
    assert [b.headers["ratelimit-remaining"] for b in bobs] == ["2", "1", "0"]


async def test_two_keys_of_one_user_have_a_bucket_each(
    settings: Settings, start_gateway: StartGateway, engine: respx.MockRouter,
    make_key: Callable[[str], str],
) -> None:
    engine_answers(engine)
    async with start_gateway(limited(settings)) as app, \
            client_for(app, make_key("alice")) as laptop, \
            client_for(app, make_key("alice")) as phone:
        spent = [(await read(laptop)).status_code for _ in range(4)]
        other = (await read(phone)).status_code
    assert spent[-1] == 429 and other == 200


async def test_limits_are_off_by_default(
    alice: httpx.AsyncClient, engine: respx.MockRouter, app: Gateway
) -> None:
    engine_answers(engine)
    answers = [await read(alice) for _ in range(30)]
    assert {a.status_code for a in answers} == {200}
    assert not any("ratelimit-limit" in a.headers for a in answers)
    assert app.limiter.enabled is False and app.limiter.slots is None


async def test_unauthenticated_and_public_requests_draw_no_tokens(
    settings: Settings, start_gateway: StartGateway, make_key: Callable[[str], str],
) -> None:
    async with start_gateway(limited(settings)) as app, client_for(app) as anonymous, \
            client_for(app, make_key("alice")) as alice:
        health = [(await anonymous.get("/healthz")).status_code for _ in range(5)]
        unknown = [(await anonymous.get("/agents")).status_code for _ in range(5)]
        mine = await alice.get("/agents")
    assert health == [200] * 5 and unknown == [401] * 5
    assert mine.headers["ratelimit-remaining"] == "2"


def held_until(release: asyncio.Event, seen: list[str], note: Callable[[httpx.Request], str]
               ) -> Callable[[httpx.Request], Awaitable[httpx.Response]]:
    """An engine answer held until `release`, each request noted in `seen` first."""
    async def answer(request: httpx.Request) -> httpx.Response:
        seen.append(note(request))
        await release.wait()
        return httpx.Response(200, json={"data": {"episodes": []}})
    return answer


async def test_engine_calls_beyond_the_users_cap_are_429_and_others_pass(
    settings: Settings, start_gateway: StartGateway, engine: respx.MockRouter,
    make_key: Callable[[str], str],
) -> None:
    release = asyncio.Event()
    waiting: list[str] = []
    engine.post(GET).mock(side_effect=held_until(
        release, waiting, lambda request: json.loads(request.content)["user_id"]))
    capped = settings.with_values(rate_limits={"engine_concurrency_per_user": 2})
    async with start_gateway(capped) as app, \
            client_for(app, make_key("alice")) as alice, \
            client_for(app, make_key("bob")) as bob:
        held = [asyncio.create_task(read(alice)) for _ in range(2)]
        bobs = asyncio.create_task(read(bob, "bob"))
        while len(waiting) < 3:
            await asyncio.sleep(0.01)
        refused = await read(alice)
        reached = len(waiting)
        owned = await alice.get("/agents")  # no engine call: not capped
        release.set()
        done = [await task for task in held] + [await bobs]
        after = await read(alice)
    assert refused.status_code == 429
    assert refused.json()["error"]["code"] == "rate_limited"
    assert refused.headers["retry-after"] == "1"
    assert owned.status_code == 200
    assert [d.status_code for d in done] == [200, 200, 200]
    assert after.status_code == 200  # the slots came back
    assert reached == 3  # the refused call never reached the engine
    assert sorted(waiting) == ["alice", "alice", "alice", "bob"]
    assert app.limiter.slots is not None and app.limiter.slots.in_flight == {}


async def test_a_refused_engine_call_frees_nothing_it_did_not_take(
    settings: Settings, start_gateway: StartGateway, engine: respx.MockRouter,
    make_key: Callable[[str], str],
) -> None:
    engine.post(GET).mock(return_value=httpx.Response(503, json={"detail": "busy"}))
    capped = settings.with_values(rate_limits={"engine_concurrency_per_user": 1})
    async with start_gateway(capped) as app, client_for(app, make_key("alice")) as alice:
        answers = [(await read(alice)).status_code for _ in range(3)]
        forbidden = await alice.post(GET, json={**READ_BODY, "user_id": "bob"})
    assert answers == [503, 503, 503]  # the engine's own answer, passed through, slot freed
    assert forbidden.status_code == 403
    assert app.limiter.slots is not None and app.limiter.slots.in_flight == {}


async def test_owned_and_passed_through_engine_calls_share_the_users_cap(
    settings: Settings, start_gateway: StartGateway, engine: respx.MockRouter,
    make_key: Callable[[str], str],
) -> None:
    """The pass-through takes its slot itself, an owned route through its ticket: one count."""
    release = asyncio.Event()
    calls: list[str] = []
    slow = held_until(release, calls, lambda request: request.url.path)
    engine.post(GET).mock(side_effect=slow)
    engine.post("/api/v2/memory/search").mock(side_effect=slow)
    search = {"query": "trip", "user_id": "alice"}
    capped = settings.with_values(rate_limits={"engine_concurrency_per_user": 1})
    async with start_gateway(capped) as app, client_for(app, make_key("alice")) as alice:
        held = asyncio.create_task(alice.post("/memories/search", json=search))
        while not calls:
            await asyncio.sleep(0.01)
        passed_through = await read(alice)  # the owned search holds alice's one slot
        release.set()
        searched = await held
        release.clear()
        held = asyncio.create_task(read(alice))
        while len(calls) < 2:
            await asyncio.sleep(0.01)
        owned = await alice.post("/memories/search", json=search)  # now the pass-through's
        release.set()
        read_back = await held
        assert app.limiter.slots is not None and app.limiter.slots.in_flight == {}
    assert passed_through.status_code == 429 and owned.status_code == 429
    assert passed_through.headers["retry-after"] == owned.headers["retry-after"] == "1"
    assert searched.status_code == 200 and read_back.status_code == 200
    assert calls == ["/api/v2/memory/search", GET]  # neither refused call reached the engine
