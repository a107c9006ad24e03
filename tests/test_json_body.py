"""Bodies read as the engine reads them (gateway/upstream/json_body.py): parsed as its
standard-library parser does, and their nesting counted off their bytes as off the parsed body."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st

from gateway.errors import ValidationFailed
from gateway.routes.common import nesting_exceeds
from gateway.upstream.json_body import json_object, nested_deeper, starts_an_object


@pytest.mark.parametrize("number", [2**64, -(2**63) - 1, 10**30, 2**64 + 1])
def test_an_integer_past_64_bits_is_read_exactly(number: int) -> None:
    body = b'{"page": %d, "note": "x"}' % number

    assert json_object(body) == json.loads(body) == {"page": number, "note": "x"}


@pytest.mark.parametrize("body", [b'{"a": NaN}', b'{"a": "\\ud800"}', b'{"a": 1, "a": 2}'])
def test_what_orjson_refuses_or_reads_otherwise_is_read_as_the_standard_library_does(
        body: bytes) -> None:
    assert repr(json_object(body)) == repr(json.loads(body))


@pytest.mark.parametrize(("body", "opens"), [
    (b"{}", True), (b' \t\r\n{"a": 1}', True), (b"[{}]", False), (b'"{"', False),
    (b"\x0c{}", False), (b"", False),
])
def test_an_object_is_recognised_by_its_first_byte_past_json_whitespace(body: bytes,
                                                                         opens: bool) -> None:
    assert starts_an_object(body) is opens


def test_a_body_that_is_not_an_object_is_refused() -> None:
    with pytest.raises(ValidationFailed, match="must be a JSON object"):
        json_object(b"[1]")


_TEXTS = st.text(alphabet='[]{}"\\ab\u00e9\n', max_size=6)
_JSON = st.recursive(st.one_of(st.none(), st.integers(), _TEXTS), lambda inner: st.one_of(
    st.lists(inner, max_size=3), st.dictionaries(_TEXTS, inner, max_size=3)), max_leaves=30)


@hypothesis_settings(max_examples=500)
@given(value=_JSON, limit=st.integers(0, 8), ascii_only=st.booleans())
def test_nesting_read_off_the_bytes_is_the_parsed_bodys(value: Any, limit: int,
                                                        ascii_only: bool) -> None:
    body = json.dumps(value, ensure_ascii=ascii_only).encode()

    assert nested_deeper(body, limit) == nesting_exceeds(value, limit)


def test_nesting_past_the_limit_is_found_in_a_long_body() -> None:
    shallow = b'{"a": [' + b'{"b": "[[[[\\"]]"},' * 10_000 + b"{}]}"
    deep = b'{"a": ' * 65 + b"1" + b"}" * 65

    assert not nested_deeper(shallow, 64)
    assert nested_deeper(deep, 64) and not nested_deeper(deep, 65)
