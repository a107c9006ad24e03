"""`upstream.flavor`: validation, paths that follow the flavour, routing, and naming files."""

from __future__ import annotations

import httpx
import pytest
import respx

from gateway.attachments.add_body import attachment_items
from gateway.config import ConfigError, Settings, check_dev_engine_flavor, load_settings
from gateway.upstream.flavors import FLAVORS
from gateway.upstream.flavors.base import name_files

# The route suite runs once per production upstream client over a loopback engine (conftest).
pytestmark = [pytest.mark.both_clients, pytest.mark.both_databases]


def test_unknown_flavour_stops_start_up_naming_the_key() -> None:
    with pytest.raises(ConfigError, match="upstream.flavor") as bad:
        load_settings(environ={"MEMORY_GATEWAY_UPSTREAM_FLAVOR": "zep"})
    assert "everos, everos-cloud, everos-cloud-v1, mem0, memos" in str(bad.value)


@pytest.mark.parametrize(("flavor", "paths"), [
    ("everos", ("/api/v2/memory/add", "/api/v2/memory/search", "/api/v2/memory/flush")),
    ("everos-cloud", ("/api/v2/memory/add", "/api/v2/memory/search", "/api/v2/memory/flush")),
    ("everos-cloud-v1", ("/api/v1/memories", "/api/v1/memories/search",
                         "/api/v1/memories/flush")),
    ("mem0", ("/memories", "/search", "")),
    ("memos", ("/product/add", "/product/search", "")),
])
def test_paths_default_to_the_flavours_own(flavor: str, paths: tuple[str, str, str]) -> None:
    upstream = load_settings(environ={"MEMORY_GATEWAY_UPSTREAM_FLAVOR": flavor}).upstream
    assert (upstream.add_path, upstream.search_path, upstream.flush_path) == paths
    assert FLAVORS[flavor].default_paths == paths


def test_an_explicit_path_is_kept_and_a_flavour_change_moves_the_others() -> None:
    settings = load_settings(environ={"MEMORY_GATEWAY_UPSTREAM_FLAVOR": "memos",
                                      "MEMORY_GATEWAY_UPSTREAM_ADD_PATH": "/api/product/add"})
    assert settings.upstream.add_path == "/api/product/add"
    assert settings.upstream.search_path == "/product/search"
    back = settings.with_values(upstream={"flavor": "everos"})
    assert back.upstream.search_path == "/api/v2/memory/search"
    assert back.upstream.add_path == "/api/product/add"


def test_engines_the_dev_engine_cannot_stand_in_for_need_a_base_url() -> None:
    with pytest.raises(ConfigError, match="upstream.base_url"):
        check_dev_engine_flavor(Settings().with_values(upstream={"flavor": "mem0"}))
    check_dev_engine_flavor(Settings().with_values(upstream={"flavor": "everos-cloud"}))


async def test_other_methods_on_an_engine_path_are_refused_unless_in_the_table(
    alice: httpx.AsyncClient, engine: respx.MockRouter
) -> None:
    route = engine.get("/api/v2/memory/add").mock(return_value=httpx.Response(405))
    response = await alice.get("/api/v2/memory/add")
    assert response.status_code == 404 and not route.called
    assert response.json()["error"]["code"] == "route_not_found"


def test_name_files_puts_a_line_before_each_file_in_every_content_shape() -> None:
    body = {"messages": [
        {"role": "user", "content": [{"type": "image", "uri": "https://x/a.png"},
                                     {"type": "text", "text": "two"},
                                     {"type": "image", "uri": "https://x/b.png"}]},
        {"role": "user", "content": {"type": "image_url", "image_url": {"url": "https://x/c.png"}}},
        {"type": "file", "file": {"file_data": "https://x/d.pdf", "filename": "d.pdf"}},
    ]}
    named = name_files(body, attachment_items(body))
    first, second, line, part = named["messages"]
    assert [i.get("text") or i["uri"] for i in first["content"]] == [
        "Attached file: a.png", "https://x/a.png", "two", "Attached file: b.png",
        "https://x/b.png"]
    assert second["content"][0] == {"type": "text", "text": "Attached file: c.png"}
    assert line == {"type": "text", "text": "Attached file: d.pdf"} and part["type"] == "file"
    assert len(body["messages"][0]["content"]) == 3  # the caller's body is left as it was


@pytest.mark.parametrize("name", sorted(FLAVORS))
def test_a_dialect_that_sends_searches_as_they_came_makes_no_payload_of_any(name: str) -> None:
    # `searches_as_sent` lets /memories/search skip making a mapping of the body: only true
    # where the flavour's search_payload never rewrites one.
    dialect = FLAVORS[name].dialect
    bodies = [{}, {"query": "trip"}, {"query": "trip", "user_id": "alice", "top_k": 3},
              {"filters": {"session_id": "s1"}, "method": "hybrid"}]
    made = [dialect.search_payload(body, "alice") for body in bodies]
    assert dialect.searches_as_sent == all(payload is None for payload in made), made


@pytest.mark.parametrize("name", sorted(FLAVORS))
def test_a_dialect_that_sends_adds_as_they_came_makes_no_payload_of_any(name: str) -> None:
    # `adds_as_sent` lets /memories/add read only what its lean model keeps of the body.
    dialect = FLAVORS[name].dialect
    bodies = [
        {"session_id": "s1", "messages": [{"role": "user", "sender_id": "alice",
                                           "content": "hi"}]},
        {"session_id": "s1", "messages": [{"role": "user", "sender_id": "alice", "content": [
            {"type": "image", "uri": "https://example.com/a.png", "name": "a.png"}]}]},
    ]
    made = [dialect.add_payload(body, "alice", attachment_items(body)) for body in bodies]
    assert dialect.adds_as_sent == all(payload is None for payload in made), made
