"""An engine answer's headers reach the client without hop-by-hop ones, nor those its
`Connection` header names, wherever that header stands (gateway/upstream/headers.py)."""

from __future__ import annotations

import pytest

from gateway.upstream.headers import response_headers

KEPT = [(b"content-type", b"application/json"), (b"x-kept", b"y"), (b"content-length", b"2")]


def test_hop_by_hop_headers_are_dropped_and_names_lowered() -> None:
    headers = [(b"Content-Type", b"application/json"), (b"Keep-Alive", b"5"),
               (b"X-Kept", b"y"), (b"Transfer-Encoding", b"chunked"), (b"TE", b"trailers"),
               (b"Content-Length", b"2")]
    assert response_headers(headers) == KEPT


@pytest.mark.parametrize("where", [0, 1, 3, 5])
def test_headers_named_by_connection_are_dropped_wherever_it_stands(where: int) -> None:
    headers = [(b"content-type", b"application/json"), (b"X-Hop", b"1"), (b"x-kept", b"y"),
               (b"x-other-hop", b"2"), (b"content-length", b"2")]
    headers.insert(where, (b"Connection", b"close, X-Hop, x-Other-Hop"))
    assert response_headers(headers) == KEPT


def test_an_answer_without_hop_by_hop_headers_is_kept_whole() -> None:
    assert response_headers(list(KEPT)) == KEPT
