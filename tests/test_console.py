"""The operator console (SPEC §20), in process: sessions and cookies, CSRF and origin proof,
read-only admin keys, the audit of console actions, escaping, and the thumbnail policy."""

from __future__ import annotations

import html
import re
import sqlite3
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
import respx
from markupsafe import escape

from gateway.app import Gateway
from gateway.config import Settings
from gateway.metrics import RecentAnswers
from tests.attachment_helpers import PNG, answer_search, engine_ok, episodes
from tests.conftest import StartGateway, client_for, create_key
from tests.user_data_seed import seed_user

ORIGIN = "http://gateway.test"
SAME = {"Sec-Fetch-Site": "same-origin"}
SVG = b'<svg xmlns="http://www.w3.org/2000/svg"><script>window.__pwned=1</script></svg>'
XSS = '<script>window.__pwned=1</script><img src=x onerror="window.__pwned=2">'
PAGES = ["/console", "/console/keys", "/console/users", "/console/audit", "/console/search",
         "/console/resolutions", "/console/tool-calls", "/console/users/alice"]


def console_client(app: Gateway, base_url: str = ORIGIN, **headers: str) -> httpx.AsyncClient:
    return httpx.AsyncClient(transport=httpx.ASGITransport(app, client=("203.0.113.7", 5555)),
                             base_url=base_url, headers=headers)


def csrf_of(page: str) -> str:
    found = re.search(r'name="csrf_token" value="([^"]+)"', page)
    assert found is not None, page
    return found.group(1)


async def sign_in(client: httpx.AsyncClient, key: str) -> httpx.Response:
    form = await client.get("/console/login")
    return await client.post("/console/login", headers=SAME,
                             data={"csrf_token": csrf_of(form.text), "admin_key": key})


async def token_of(client: httpx.AsyncClient, path: str = "/console") -> str:
    return csrf_of((await client.get(path)).text)


def audit_actions(settings: Settings) -> list[tuple[str, str]]:
    with sqlite3.connect(settings.storage.database) as conn:
        return [(a, t) for a, t in conn.execute(
            "SELECT action, target FROM admin_audit ORDER BY seq")]


def key_rows(settings: Settings) -> list[tuple[str, str, int | None]]:
    with sqlite3.connect(settings.storage.database) as conn:
        return list(conn.execute(
            "SELECT user_id, kind, revoked_at_ms FROM api_keys ORDER BY created_at_ms"))


@pytest.fixture
def admin_key(settings: Settings) -> str:
    return create_key(settings, "ops", kind="admin")


@pytest.fixture
async def ops(app: Gateway, admin_key: str) -> AsyncIterator[httpx.AsyncClient]:
    async with console_client(app) as client:
        assert (await sign_in(client, admin_key)).status_code == 303
        yield client


# --- sessions and cookies -----------------------------------------------------------------


@pytest.mark.both_databases
async def test_signing_in_makes_a_strict_httponly_session_cookie_and_opens_every_page(
    app: Gateway, admin_key: str, database_url: str
) -> None:
    async with console_client(app) as client:
        answer = await sign_in(client, admin_key)
        assert answer.status_code == 303 and answer.headers["location"] == "/console"
        cookie = next(c for c in answer.headers.get_list("set-cookie")
                      if c.startswith("mgw_console="))
        attributes = {part.strip().split("=")[0].lower() for part in cookie.split(";")}
        assert {"httponly", "path", "samesite", "max-age"} <= attributes
        assert "Path=/console" in cookie and "SameSite=strict" in cookie
        assert "Max-Age=28800" in cookie and "secure" not in attributes
        for path in PAGES:
            page = await client.get(path)
            assert page.status_code == 200, (path, page.text)
            assert "Sign out" in page.text


async def test_the_session_table_holds_a_hash_of_the_token_never_the_token(
    ops: httpx.AsyncClient, settings: Settings
) -> None:
    token = ops.cookies["mgw_console"]
    with sqlite3.connect(settings.storage.database) as conn:
        stored = [row[0] for row in conn.execute("SELECT token_sha256 FROM console_sessions")]
    assert len(stored) == 1 and token not in stored[0] and len(stored[0]) == 64


async def test_a_page_without_a_session_redirects_to_the_login_whatever_key_it_carries(
    app: Gateway, admin_key: str
) -> None:
    for headers in ({}, {"Authorization": f"Bearer {admin_key}"}, {"X-API-Key": admin_key}):
        async with console_client(app, **headers) as client:
            for path in PAGES:
                answer = await client.get(path)
                assert answer.status_code == 303, (path, headers)
                assert answer.headers["location"] == "/console/login"


async def test_a_wrong_key_or_a_user_key_shows_the_form_again_and_no_session(
    app: Gateway, settings: Settings
) -> None:
    user_key = create_key(settings, "alice")
    for key in ("mgw_nope_nope", user_key, ""):
        async with console_client(app) as client:
            answer = await sign_in(client, key)
            assert answer.status_code == 401
            assert "That is not a valid admin key." in answer.text
            assert "mgw_console" not in client.cookies
            assert (await client.get("/console")).status_code == 303
    assert audit_actions(settings) == []


async def test_the_console_cookie_opens_nothing_outside_the_console(
    ops: httpx.AsyncClient,
) -> None:
    token = ops.cookies["mgw_console"]
    for path in ("/admin/keys", "/agents", "/resources"):
        answer = await ops.get(path, headers={"Cookie": f"mgw_console={token}"})
        assert answer.status_code == 401, path


async def test_the_cookie_is_secure_when_the_public_url_is_https(
    settings: Settings, start_gateway: StartGateway, admin_key: str
) -> None:
    https = settings.with_values(server={"public_url": "https://gateway.example"})
    async with (start_gateway(https) as app,
                console_client(app, "https://gateway.example") as client):
        form = await client.get("/console/login")
        assert "Secure" in form.headers["set-cookie"]
        answer = await client.post("/console/login", headers=SAME, data={
            "csrf_token": csrf_of(form.text), "admin_key": admin_key})
        assert answer.status_code == 303
        assert all("Secure" in c for c in answer.headers.get_list("set-cookie"))


async def test_sign_out_ends_the_session_on_the_server(
    ops: httpx.AsyncClient, settings: Settings
) -> None:
    token = ops.cookies["mgw_console"]
    answer = await ops.post("/console/logout", headers=SAME,
                            data={"csrf_token": await token_of(ops)})
    assert answer.status_code == 303 and answer.headers["location"] == "/console/login"
    again = await ops.get("/console", headers={"Cookie": f"mgw_console={token}"})
    assert again.status_code == 303  # the old cookie, sent again, opens nothing
    assert [a for a, _ in audit_actions(settings)] == ["console.sign_in", "console.sign_out"]


async def test_revoking_the_admin_key_ends_its_console_sessions(
    app: Gateway, ops: httpx.AsyncClient, admin_key: str
) -> None:
    key_id = admin_key.split("_")[1]
    async with client_for(app, admin_key) as api:
        assert (await api.delete(f"/admin/keys/{key_id}")).status_code == 204
    assert (await ops.get("/console")).status_code == 303


async def test_a_session_made_by_one_process_opens_the_console_in_another(
    settings: Settings, start_gateway: StartGateway, admin_key: str
) -> None:
    async with start_gateway(settings) as first, start_gateway(settings) as second:
        async with console_client(first) as one:
            await sign_in(one, admin_key)
            token = one.cookies["mgw_console"]
        async with console_client(second, Cookie=f"mgw_console={token}") as two:
            assert (await two.get("/console/keys")).status_code == 200


async def test_a_session_ends_after_its_lifetime(
    settings: Settings, start_gateway: StartGateway, admin_key: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    async with start_gateway(settings) as app, console_client(app) as client:
        await sign_in(client, admin_key)
        assert (await client.get("/console")).status_code == 200
        from gateway.console import guard
        later = guard.now_ms() + settings.console.session_ttl_s * 1000 + 1
        monkeypatch.setattr(guard, "now_ms", lambda: later)
        assert (await client.get("/console")).status_code == 303


# --- CSRF and origin proof ----------------------------------------------------------------


@pytest.mark.parametrize("headers, token", [
    ({}, "good"),  # no proof of origin at all
    ({"Origin": "null"}, "good"),
    ({"Sec-Fetch-Site": "cross-site"}, "good"),
    ({"Sec-Fetch-Site": "same-site"}, "good"),
    ({"Sec-Fetch-Site": "cross-site", "Origin": ORIGIN}, "good"),
    ({"Origin": "http://evil.test"}, "good"),
    ({"Referer": "http://evil.test/console/keys"}, "good"),
    ({"Origin": "null", "Referer": "http://evil.test/x"}, "good"),
    (SAME, None),
    (SAME, "wrong"),
    ({"Origin": ORIGIN}, ""),
], ids=["no-proof", "origin-null", "cross-site", "same-site", "cross-site-with-origin",
        "foreign-origin", "foreign-referer", "null-and-foreign-referer", "no-token",
        "wrong-token", "empty-token"])
async def test_a_change_without_same_origin_proof_or_its_token_is_403_and_changes_nothing(
    ops: httpx.AsyncClient, settings: Settings, headers: dict[str, str], token: str | None
) -> None:
    good = await token_of(ops, "/console/keys")
    data = {"user": "mallory", "kind": "user", "scopes": ["read", "write"]}
    if token is not None:
        data["csrf_token"] = good if token == "good" else token
    answer = await ops.post("/console/keys", headers=headers, data=data)
    assert answer.status_code == 403, answer.text
    assert [row for row in key_rows(settings) if row[0] == "mallory"] == []
    assert [a for a, _ in audit_actions(settings)] == ["console.sign_in"]


@pytest.mark.parametrize("headers", [{"Origin": ORIGIN}, {"Referer": f"{ORIGIN}/console/keys"},
                                     {"Origin": "null", "Referer": f"{ORIGIN}/console"}])
async def test_a_same_origin_origin_or_referer_is_proof_where_no_fetch_metadata_is_sent(
    ops: httpx.AsyncClient, settings: Settings, headers: dict[str, str]
) -> None:
    answer = await ops.post("/console/keys", headers=headers, data={
        "csrf_token": await token_of(ops, "/console/keys"), "user": "carol", "kind": "user",
        "scopes": ["read"]})
    assert answer.status_code == 201, answer.text
    assert ("carol", "user", None) in key_rows(settings)


async def test_the_sign_in_needs_its_own_form_token_and_same_origin_proof(
    app: Gateway, admin_key: str, settings: Settings
) -> None:
    async with console_client(app) as client:
        form = await client.get("/console/login")
        token = csrf_of(form.text)
        for headers, data in [
            (SAME, {"admin_key": admin_key}),
            (SAME, {"admin_key": admin_key, "csrf_token": "forged"}),
            ({"Sec-Fetch-Site": "cross-site"}, {"admin_key": admin_key, "csrf_token": token}),
            ({"Origin": "http://evil.test"}, {"admin_key": admin_key, "csrf_token": token}),
        ]:
            answer = await client.post("/console/login", headers=headers, data=data)
            assert answer.status_code == 403
            assert "mgw_console" not in client.cookies
    async with console_client(app) as fresh:  # a token without its login cookie
        answer = await fresh.post("/console/login", headers=SAME,
                                  data={"admin_key": admin_key, "csrf_token": token})
        assert answer.status_code == 403
    assert audit_actions(settings) == []


# --- actions, audit and read-only keys ----------------------------------------------------


async def test_a_key_made_in_the_console_is_shown_once_works_and_is_revoked_there(
    app: Gateway, ops: httpx.AsyncClient, settings: Settings
) -> None:
    made = await ops.post("/console/keys", headers=SAME, data={
        "csrf_token": await token_of(ops, "/console/keys"), "user": "bob", "kind": "user",
        "scopes": ["read"], "name": "bob's laptop", "expires": "2099-01-31"})
    assert made.status_code == 201, made.text
    token = html.unescape(re.search(r'id="new-token">([^<]+)<', made.text).group(1))
    key_id = token.split("_")[1]
    async with client_for(app, token) as bob:
        assert (await bob.get("/agents")).status_code == 200
        assert (await bob.post("/agents", json={"name": "A"})).status_code == 403  # read only
    listing = await ops.get("/console/keys", params={"user": "bob"})
    assert key_id in listing.text and token not in listing.text
    assert "bob&#39;s laptop" in listing.text and "2099-01-31" in listing.text
    revoked = await ops.post(f"/console/keys/{key_id}/revoke", headers=SAME,
                             data={"csrf_token": await token_of(ops, "/console/keys")})
    assert revoked.status_code == 303
    async with client_for(app, token) as bob:
        assert (await bob.get("/agents")).status_code == 401
    actions = audit_actions(settings)
    assert ("console.key_create", key_id) in actions and ("keys.create", key_id) in actions
    assert ("console.key_revoke", key_id) in actions and ("keys.revoke", key_id) in actions
    only = await ops.get("/console/audit", params={"action": "console.key_revoke"})
    rows = re.findall(r"<tr><td>\d+</td>.*?</tr>", only.text, re.S)
    assert len(rows) == 1 and key_id in rows[0]


async def test_a_bad_key_form_is_shown_again_with_the_api_s_message_and_makes_nothing(
    ops: httpx.AsyncClient, settings: Settings
) -> None:
    answer = await ops.post("/console/keys", headers=SAME, data={
        "csrf_token": await token_of(ops, "/console/keys"), "user": "../etc", "kind": "user",
        "scopes": ["read"]})
    assert answer.status_code == 422 and "user id must match" in answer.text
    assert [row[0] for row in key_rows(settings)] == ["ops"]


async def test_a_read_only_admin_key_sees_every_page_and_changes_nothing(
    app: Gateway, settings: Settings, start_gateway: StartGateway
) -> None:
    reader = create_key(settings, "auditor", kind="admin", scopes="read")
    create_key(settings, "alice")
    async with console_client(app) as client:
        assert (await sign_in(client, reader)).status_code == 303
        for path in PAGES:
            page = await client.get(path)
            assert page.status_code == 200 and "(read-only)" in page.text, path
        token = await token_of(client)
        alice_key = key_rows(settings)[-1]
        made = await client.post("/console/keys", headers=SAME, data={
            "csrf_token": token, "user": "eve", "kind": "user", "scopes": ["read"]})
        key_id = re.search(r"<code>([0-9a-f]{16})</code></td>\s*<td><a href=\"/console/users/"
                           r"alice", (await client.get("/console/keys")).text).group(1)
        revoked = await client.post(f"/console/keys/{key_id}/revoke", headers=SAME,
                                    data={"csrf_token": token})
        erased = await client.post("/console/users/alice/erase", headers=SAME,
                                   data={"csrf_token": token, "confirm_user": "alice"})
        assert (made.status_code, revoked.status_code, erased.status_code) == (403, 403, 403)
        signed_out = await client.post("/console/logout", headers=SAME,
                                       data={"csrf_token": token})
        assert signed_out.status_code == 303  # ending its own session changes no data
    assert key_rows(settings) == [("auditor", "admin", None), alice_key]
    assert [a for a, _ in audit_actions(settings)] == ["console.sign_in", "console.sign_out"]


async def test_erase_needs_the_typed_user_id_and_is_audited(
    app: Gateway, ops: httpx.AsyncClient, settings: Settings
) -> None:
    create_key(settings, "alice")
    confirm = await ops.get("/console/users/alice/erase")
    assert confirm.status_code == 200
    assert '<label for="confirm-user">User id</label>' in confirm.text
    token = csrf_of(confirm.text)
    wrong = await ops.post("/console/users/alice/erase", headers=SAME,
                           data={"csrf_token": token, "confirm_user": "alic"})
    assert wrong.status_code == 422 and ("alice", "user", None) in key_rows(settings)
    done = await ops.post("/console/users/alice/erase", headers=SAME,
                          data={"csrf_token": token, "confirm_user": "alice"})
    assert done.status_code == 200, done.text
    assert "User <span class=\"id\">alice</span>: erased" in done.text
    assert [row for row in key_rows(settings) if row[0] == "alice"] == []
    actions = audit_actions(settings)
    assert ("console.user_erase", "alice") in actions and ("users.erase", "alice") in actions


async def test_export_downloads_the_zip_and_is_audited(
    app: Gateway, ops: httpx.AsyncClient, settings: Settings
) -> None:
    async with client_for(app, create_key(settings, "alice")) as alice:
        await alice.post("/agents", json={"name": "helper"})
    answer = await ops.post("/console/users/alice/export", headers=SAME,
                            data={"csrf_token": await token_of(ops, "/console/users/alice")})
    assert answer.status_code == 200
    assert answer.headers["content-type"] == "application/zip"
    assert answer.content[:2] == b"PK" and "attachment" in answer.headers["content-disposition"]
    assert ("console.user_export", "alice") in audit_actions(settings)


async def test_export_of_an_id_never_seen_is_404_and_records_nothing(
    app: Gateway, ops: httpx.AsyncClient, settings: Settings
) -> None:
    """The admin API's and the CLI's rule (SPEC §17), in the console's door too."""
    answer = await ops.post("/console/users/nosuchuser/export", headers=SAME,
                            data={"csrf_token": await token_of(ops, "/console/users")})
    assert answer.status_code == 404
    assert answer.headers["content-type"].startswith("text/html")
    assert [a for a in audit_actions(settings) if a[1] == "nosuchuser"] == []


# --- headers, escaping, thumbnails --------------------------------------------------------


async def test_every_console_answer_carries_the_security_headers(
    app: Gateway, ops: httpx.AsyncClient
) -> None:
    async with console_client(app) as anonymous:
        answers = [await anonymous.get("/console"), await anonymous.get("/console/login"),
                   await anonymous.get("/console/static/console.css")]
    answers += [await ops.get(path) for path in [*PAGES, "/console/nowhere"]]
    for answer in answers:
        assert answer.headers["content-security-policy"] == (
            "default-src 'self'; script-src 'self'; object-src 'none'; "
            "frame-ancestors 'none'; base-uri 'none'; form-action 'self'")
        assert answer.headers["x-content-type-options"] == "nosniff"
        assert answer.headers["referrer-policy"] == "no-referrer"
        assert answer.headers["cache-control"] == "no-store"


async def seed_hostile_user(app: Gateway, settings: Settings, engine: respx.MockRouter,
                            sessions: dict[str, str] | None = None) -> str:
    """alice with the payload in an agent name, a conversation title, an upload's filename and
    a memory's text; a PNG upload and an SVG one that claims to be a PNG."""
    engine_ok(engine)
    sessions = {} if sessions is None else sessions
    async with client_for(app, create_key(settings, "alice")) as alice:
        agent = (await alice.post("/agents", json={"name": XSS})).json()["id"]
        made = await alice.post(f"/agents/{agent}/conversations", json={"title": XSS})
        assert made.status_code == 201, made.text
        made_ids: dict[str, str] = {}
        for name, data in ((f"{XSS}.png", PNG), ("photo.png", PNG), ("vector.png", SVG)):
            up = await alice.post("/resources", files={"file": (name, data, "image/png")})
            assert up.status_code in (200, 201), up.text
            made_ids[name] = up.json()["id"]
            sessions[name] = up.json()["session_id"]
    answer_search(engine, episodes({"id": "ep1", "session_id": sessions["photo.png"],
                                    "score": 0.5,
                                    "episode": f"alice said {XSS} about photo.png",
                                    "timestamp": "2026-11-30T00:00:00Z"}))
    return made_ids["vector.png"]


async def test_user_content_is_escaped_on_every_page(
    app: Gateway, ops: httpx.AsyncClient, settings: Settings, engine: respx.MockRouter
) -> None:
    await seed_hostile_user(app, settings, engine)
    async with client_for(app, create_key(settings, "alice")) as alice:
        resolved = await alice.post("/chats/c1/resolve", json={"text": XSS})
        assert resolved.status_code == 200, resolved.text
    pages = [await ops.get("/console/users/alice"),
             await ops.get("/console/search", params={"user": "alice", "query": XSS}),
             await ops.get("/console/resolutions", params={"user": "alice"}),
             await ops.get("/console/keys", params={"user": XSS})]
    for page in pages:
        assert page.status_code == 200, page.text
        assert "<script>window.__pwned" not in page.text and "<img src=x" not in page.text
        assert str(escape(XSS)) in page.text
    assert "alice said" in pages[1].text


async def test_thumbnails_are_shown_only_for_raster_bytes_and_svg_is_a_download(
    app: Gateway, ops: httpx.AsyncClient, settings: Settings, engine: respx.MockRouter
) -> None:
    svg_id = await seed_hostile_user(app, settings, engine)
    page = (await ops.get("/console/users/alice")).text
    images = re.findall(r'<img class="thumb" src="([^"]+)"', page)
    assert images and all("/files/" in src for src in images)
    assert not any(svg_id in src for src in images)
    assert f"/console/users/alice/files/resource/{svg_id}?download=1" in page
    shown = await ops.get(images[0])
    assert shown.status_code == 200 and shown.headers["content-type"] == "image/png"
    assert shown.content == PNG
    svg = await ops.get(f"/console/users/alice/files/resource/{svg_id}")
    assert svg.headers["content-type"] == "application/octet-stream"
    assert svg.headers["content-disposition"] == "attachment" and svg.content == SVG
    async with console_client(app) as anonymous:
        assert (await anonymous.get(images[0])).status_code == 303


async def test_the_recall_debugger_shows_what_each_attachment_matched_on(
    app: Gateway, ops: httpx.AsyncClient, settings: Settings, engine: respx.MockRouter
) -> None:
    sessions: dict[str, str] = {}
    await seed_hostile_user(app, settings, engine, sessions)
    page = await ops.get("/console/search", params={"user": "alice", "query": "photo",
                                                    "session": sessions["photo.png"]})
    assert page.status_code == 200
    assert "1 result" in page.text and "photo.png" in page.text
    matched = re.findall(r'<q class="matched">(.*?)</q>', page.text, re.S)
    assert matched == [str(escape(f"alice said {XSS} about photo.png"))]
    sent: Any = engine.routes[-1].calls.last.request  # the search sent as alice
    assert sessions["photo.png"].encode() in sent.content


def test_recent_answers_count_the_last_hour_by_status() -> None:
    recent = RecentAnswers()
    for status in (200, 200, 404, 429, 500, 503):
        recent.add(status, now_s=10_000.0)
    recent.add(500, now_s=10_000.0 - 3_700)  # more than an hour before
    assert recent.last_hour(now_s=10_030.0) == {"requests": 6, "4xx": 2, "5xx": 2, "429": 1}
    assert recent.last_hour(now_s=10_000.0 + 3_700)["requests"] == 0


@pytest.mark.both_databases
async def test_the_lists_across_users_read_every_database(
    app: Gateway, ops: httpx.AsyncClient
) -> None:
    """Resolutions, tool calls by state, a user's sessions and the overview's counts."""
    for user in ("carol", "dave"):
        await seed_user(app.services.db, app.services.files, user)
    pending = await ops.get("/console/tool-calls", params={"state": "pending"})
    assert pending.text.count('<a href="/console/users/carol">') == 1
    assert pending.text.count('<a href="/console/users/dave">') == 1
    failed = await ops.get("/console/tool-calls", params={"state": "failed"})
    assert "No failed tool calls." in failed.text
    assert (await ops.get("/console/tool-calls", params={"state": "gone"})).status_code == 404
    everyone = await ops.get("/console/resolutions")
    assert "carol" in everyone.text and "dave" in everyone.text
    one = await ops.get("/console/resolutions", params={"user": "dave"})
    assert "/console/users/dave" in one.text and "/console/users/carol" not in one.text
    user = await ops.get("/console/users/carol")
    assert "s-carol" in user.text and "file-0.txt" in user.text and "file-1.txt" in user.text
    overview = await ops.get("/console")
    assert re.search(r"<th>Users</th><td><a href=\"/console/users\">2</a>", overview.text)


async def test_resolutions_and_tool_calls_page_by_cursor_with_a_next_link(
    app: Gateway, ops: httpx.AsyncClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    from gateway.console import resolutions, tool_calls
    monkeypatch.setattr(resolutions, "PAGE", 2)
    monkeypatch.setattr(tool_calls, "PAGE", 2)
    for user in ("u1", "u2", "u3"):
        await seed_user(app.services.db, app.services.files, user, stored_files=0)
    for path in ("/console/resolutions", "/console/tool-calls"):
        seen: list[str] = []
        url: str | None = path
        while url:
            page = await ops.get(html.unescape(url))
            seen += re.findall(r'<a href="/console/users/(u\d)">', page.text)
            found = re.search(r'<a href="([^"]+)" class="next">Next</a>', page.text)
            url = found.group(1) if found else None
        assert sorted(seen) == ["u1", "u2", "u3"], path


async def test_a_console_form_past_its_size_is_413_before_it_is_read(
    app: Gateway, ops: httpx.AsyncClient, admin_key: str
) -> None:
    padding = "x" * (70 * 1024)
    answer = await ops.post("/console/keys", headers=SAME, data={
        "csrf_token": await token_of(ops), "user": "bob", "name": padding})
    assert answer.status_code == 413
    async with console_client(app) as client:
        form = await client.get("/console/login")
        answer = await client.post("/console/login", headers=SAME, data={
            "csrf_token": csrf_of(form.text), "admin_key": admin_key, "pad": padding})
        assert answer.status_code == 413 and "mgw_console" not in client.cookies


async def test_console_enabled_false_serves_no_console(
    settings: Settings, start_gateway: StartGateway
) -> None:
    off = settings.with_values(console={"enabled": False})
    async with start_gateway(off) as app, console_client(app) as client:
        for path in ("/console", "/console/login", "/console/static/console.css"):
            answer = await client.get(path)
            assert answer.status_code == 401, path  # no key: like any path the gateway serves
            assert "content-security-policy" not in answer.headers
