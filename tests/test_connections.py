"""The connection caps' bookkeeping (gateway/serving/connections.py); the real thing is in
tests/e2e/test_connections.py."""

from gateway.serving.connections import ConnectionCounts


def test_caps_count_in_all_and_per_client_and_free_on_leave() -> None:
    counts = ConnectionCounts(max_total=3, max_per_client=2)
    assert [counts.admit("a"), counts.admit("a"), counts.admit("a")] == [True, True, False]
    assert counts.admit("b") is True
    assert counts.admit("c") is False  # three open in all
    counts.leave("a")
    assert counts.admit("c") is True
    assert counts.by_client == {"a": 1, "b": 1, "c": 1}
    for client in ("a", "b", "c"):
        counts.leave(client)
    assert (counts.total, counts.by_client) == (0, {})


def test_zero_means_no_cap() -> None:
    counts = ConnectionCounts(max_total=0, max_per_client=0)
    assert all(counts.admit("a") for _ in range(10_000))
