"""The route tables as data (gateway/upstream/routes.py, each flavour's table), pure."""

from __future__ import annotations

from pathlib import Path

import pytest

from gateway.config import ConfigError, Settings
from gateway.errors import BadRequest
from gateway.upstream.flavors import FLAVORS
from gateway.upstream.route_doc import rewrite
from gateway.upstream.routes import EngineRoute, RouteTable, named_in, parse_allowed
from gateway.upstream.target import parse_target

DOC = Path(__file__).resolve().parent.parent / "docs" / "engines.md"


def test_docs_engines_md_prints_the_tables_as_they_are() -> None:
    text = DOC.read_text()
    assert rewrite(text) == text, "run: python -m gateway.upstream.route_doc docs/engines.md"


@pytest.mark.parametrize("pattern,path,params", [
    ("/api/v2/memory/get", "/api/v2/memory/get", {}),
    ("/memories/{memory_id}", "/memories/abc", {"memory_id": "abc"}),
    ("/v1/memories/{memory_id}/", "/v1/memories/a b", {"memory_id": "a b"}),
    ("/api/v2/knowledge/*", "/api/v2/knowledge/a/b", {"*": "a/b"}),
    ("/api/v2/knowledge/*", "/api/v2/knowledge", {"*": ""}),
])
def test_a_route_matches_its_paths(pattern: str, path: str, params: dict[str, str]) -> None:
    segments = tuple(part for part in path.split("/") if part)
    assert EngineRoute("GET", pattern).match(segments) == params


@pytest.mark.parametrize("pattern,path", [
    ("/api/v2/memory/get", "/api/v2/memory/get/more"),
    ("/memories/{memory_id}", "/memories"),
    ("/memories/{memory_id}", "/memories/a/history"),
    ("/api/v2/knowledge/*", "/api/v2/other"),
])
def test_a_route_does_not_match_other_paths(pattern: str, path: str) -> None:
    segments = tuple(part for part in path.split("/") if part)
    assert EngineRoute("GET", pattern).match(segments) is None


def test_rendering_keeps_the_engines_spelling_and_encodes_each_parameter_whole() -> None:
    assert EngineRoute("GET", "/v1/memories/{id}/").render({"id": "a/b@c?d"}) == \
        "/v1/memories/a%2Fb%40c%3Fd/"
    assert EngineRoute("GET", "/k/*").render({"*": "x y/z"}) == "/k/x%20y/z"


def test_targets_are_read_once_and_normalised() -> None:
    target = parse_target("/api//v2/memory/add/", b"/api//v2/memory/%61dd/",
                          b"user%5Fid=a&user_id=b&x=%20")
    assert target.segments == ("api", "v2", "memory", "add")
    assert target.query == {"user_id": ["a", "b"], "x": [" "]}
    assert target.upstream_query() == "user_id=a&user_id=b&x=%20"


@pytest.mark.parametrize("path,raw", [
    ("*", b"*"), ("*@127.0.0.1:9/steal", b"*@127.0.0.1:9/steal"), ("/a", b"http://x/a"),
    ("/a/../b", b"/a/../b"), ("/a/./b", b"/a/./b"), ("/a\x00b", b"/a%00b"),
])
def test_targets_that_are_not_plain_paths_are_refused(path: str, raw: bytes) -> None:
    with pytest.raises(BadRequest):
        parse_target(path, raw, b"")


def test_every_flavour_table_finds_its_routes_and_nothing_else() -> None:
    for flavor in FLAVORS.values():
        table = flavor.routes
        for route in table.routes:
            params = {name: "x" for name in route.names} | {"*": "x"}
            rendered = route.render(params)
            segments = tuple(part for part in rendered.split("/") if part)
            found = table.find(route.method, segments)
            assert found is not None and found[0].pattern == route.pattern
        assert table.find("POST", ("reset",)) is None
        assert table.find("DELETE", ("api", "v2", "memory", "add")) is None


def test_engine_administration_is_in_no_table() -> None:
    admin = [("POST", "/reset"), ("POST", "/configure"), ("GET", "/memories"),
             ("POST", "/admin/reset"), ("GET", "/api/v1/settings"), ("PUT", "/api/v1/settings"),
             ("POST", "/product/users/register"), ("POST", "/product/configure"),
             ("GET", "/v1/entities/")]
    for flavor in FLAVORS.values():
        for method, path in admin:
            found = flavor.routes.find(method, tuple(p for p in path.split("/") if p))
            assert found is None or found[0].scoped, (flavor.name, method, path)


def test_the_policy_reads_every_field_in_body_query_and_path() -> None:
    route = EngineRoute("GET", "/api/v1/senders/{sender_id}")
    named = named_in(route, {"user_id": "a", "messages": [
        {"role": "assistant", "sender_id": "x"}, {"role": "user", "sender_id": "b"}],
        "filters": {"user_id": "c"}, "mem_cube_id": "k"},
        {"user_id": ["q1", "q2"], "group_id": ["g"]}, {"sender_id": "p"})
    assert [v for _, v in named.of("user", "sender")] == ["a", "b", "q1", "q2"]
    assert named.of("filters") == [("filters", {"user_id": "c"})]
    assert named.of("cube") == [("mem_cube_id", "k")]
    assert named.of("group") == [("query.group_id", "g")]


def test_allow_paths_are_validated_and_open_routes() -> None:
    opened = parse_allowed("GET /api/v2/knowledge/*")
    table = RouteTable([opened])
    assert table.find("GET", ("api", "v2", "knowledge", "a")) is not None
    assert table.find("POST", ("api", "v2", "knowledge", "a")) is None
    for bad in ("/x", "get /x", "GET x", "GET /a/*/b", "GET /a/../b", "GET /a*"):
        with pytest.raises(ConfigError, match="allow_paths"):
            Settings().with_values(upstream={"allow_paths": [bad]})
    assert Settings().with_values(upstream={"allow_paths": ["PUT /x/{id}"]}).upstream.allow_paths \
        == ["PUT /x/{id}"]


def test_a_closed_route_is_named_with_why_it_is_closed() -> None:
    from gateway.upstream.closed_routes import closed_route_message

    kb = closed_route_message("everos-cloud", "POST", "/api/v2/knowledge_bases/kb1/search")
    assert kb.startswith("POST /api/v2/knowledge_bases/kb1/search is an engine route this "
                         "gateway does not open: knowledge bases belong to the engine account")
    update = closed_route_message("everos-cloud", "POST", "/api/v2/memory/update")
    assert "names memories by id alone" in update
    other = closed_route_message("mem0", "GET", "/v1/entities/")
    assert other.startswith("GET /v1/entities/ is not an engine route this gateway opens: the "
                            "mem0 flavour's table") and "upstream.allow_paths" in other
