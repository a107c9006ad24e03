"""gateway/upstream/origin.py: the configured origin, parsed once, and origin-form targets only."""

from __future__ import annotations

from urllib.parse import urlsplit

import httpx
import pytest
from hypothesis import given
from hypothesis import strategies as st

from gateway.config import ConfigError, Settings
from gateway.errors import BadRequest
from gateway.upstream.origin import UpstreamOrigin, origin_form


@pytest.mark.parametrize("target", [
    "/", "/api/v2/memory/get", "/a/b/", "/a//b", "/x?", "/x?a=1&b=%20c&c=../d",
    "/a.b/c..d/.e/...", "/%41%2f?%42=1", "/x@y:z/!$&'()*+,;=~", "/x?q=/?:@",
    "/x?a[]=1&b={c}|^`\\\"<>", "/x?a=../b",
])
def test_origin_form_targets_are_accepted_unchanged(target: str) -> None:
    assert origin_form(target) == target


@pytest.mark.parametrize("target", [
    "", "*", "x", "api/v2", "*@127.0.0.1:9/steal", "@127.0.0.1:9/x", "//127.0.0.1:9/x",
    "http://127.0.0.1:9/x", "127.0.0.1:9/x", "/..", "/.", "/a/../b", "/a/./b", "/a/..?x",
    "/%2e%2E/x", "/%2e/x", "/x#f", "/x y", "/x\ty", "/x\r\nHost: evil", "/\\evil", "/caf\u00e9",
    "/x%", "/x%zz", "/x?%g0", "/x?a#b", "/x?a b", "/x?\u00e9", "/x?a\x7f", "/x[y]", "/x{y}",
    "/x|y", '/x"y', "/x<y>", "/x^y", "/x`y",
])
def test_anything_else_is_refused_with_400(target: str) -> None:
    with pytest.raises(BadRequest) as refused:
        origin_form(target)
    assert refused.value.error_code == "invalid_request_target"
    assert refused.value.status == 400


@pytest.mark.parametrize(("base_url", "parts"), [
    ("http://engine.test", ("http", "engine.test", 80, "engine.test", "")),
    ("https://engine.test", ("https", "engine.test", 443, "engine.test", "")),
    ("http://127.0.0.1:8001/", ("http", "127.0.0.1", 8001, "127.0.0.1:8001", "")),
    ("http://Engine.Test:9/api/", ("http", "engine.test", 9, "Engine.Test:9", "/api")),
    ("http://[::1]:8000/v", ("http", "::1", 8000, "[::1]:8000", "/v")),
])
def test_base_url_is_taken_apart_once(base_url: str, parts: tuple[str, str, int, str, str]) -> None:
    origin = UpstreamOrigin.parse(base_url)
    assert (origin.scheme, origin.host, origin.port, origin.authority, origin.prefix) == parts


@pytest.mark.parametrize("base_url", [
    "http://user@engine.test", "http://user:pw@engine.test", "http://engine.test@thief.test/",
    "http://engine.test/?x=1", "http://engine.test?", "http://engine.test/#f", "ftp://engine.test",
    "engine.test", "http://", "http://engine.test:99999", "http://engine.test:x",
    "http://engine.test/a/../b", "http://engine.test/a b",
])
def test_base_url_that_is_not_a_plain_origin_is_refused(base_url: str) -> None:
    with pytest.raises(ValueError):
        UpstreamOrigin.parse(base_url)


def test_the_prefix_is_kept_before_the_target() -> None:
    origin = UpstreamOrigin.parse("http://engine.test/engine/")
    assert origin.target("/api/v2/memory/get?x=1") == "/engine/api/v2/memory/get?x=1"


_TARGET_ALPHABET = st.sampled_from(
    list("/?#@:*%.\\ ab0-_~!$&'()+,;=[]{}|\"<>^`\r\n\t") + ["%2e", "%2E", "..", "//", "\u00e9"]
)


@given(st.lists(_TARGET_ALPHABET, max_size=20).map("".join))
def test_an_accepted_target_never_changes_the_origin(target: str) -> None:
    origin = UpstreamOrigin.parse("http://engine.test:8000/base")
    try:
        line_target = origin.target(target)
    except BadRequest:
        return
    # Even joined as a string, an accepted target keeps the origin and lands under the prefix.
    url = f"http://engine.test:8000{line_target}"
    assert urlsplit(url).netloc == "engine.test:8000"
    assert urlsplit(url).path.startswith("/base/")
    parsed = httpx.URL(url)
    assert (parsed.host, parsed.port) == ("engine.test", 8000)
    assert parsed.path.startswith("/base/")


@pytest.mark.parametrize(("key", "path"), [
    ("add_path", "/api/../admin"), ("search_path", "/search#x"), ("flush_path", "/a b"),
])
def test_engine_paths_that_are_not_plain_paths_stop_start_up(key: str, path: str) -> None:
    with pytest.raises(ConfigError, match=f"upstream.{key}"):
        Settings().with_values(upstream={key: path})
