"""Which search results' sessions are another user's (SPEC §9): gateway/search/answers.py
`ForeignScopes`, against the definition, and read once per answer whatever its size."""

from __future__ import annotations

from collections.abc import Iterator

from hypothesis import given, settings
from hypothesis import strategies as st

from gateway.search import page_scan
from gateway.search.answers import ForeignScopes, scanned_answer

parts = st.sampled_from(["", "a", "b", "c"])
scopes = st.frozensets(st.tuples(parts.filter(bool), parts.filter(bool), st.sampled_from(
    ["s1", "s2", "s3"])), max_size=8)


def naive(scopes: frozenset[tuple[str, str, str]], session_id: str, app_id: str | None,
          project_id: str | None) -> bool:
    """An item that says its app and project is foreign by that scope; one that does not, when
    its session is another user's in any scope it does not rule out."""
    if app_id and project_id:
        return (app_id, project_id, session_id) in scopes
    return any(sid == session_id and (not app_id or app == app_id)
               and (not project_id or project == project_id) for app, project, sid in scopes)


@settings(max_examples=500, deadline=None)
@given(scopes, st.sampled_from(["s1", "s2", "s3", "s4"]), st.none() | parts, st.none() | parts)
def test_foreign_scopes_agree_with_the_definition(
    held: frozenset[tuple[str, str, str]], session_id: str, app_id: str | None,
    project_id: str | None,
) -> None:
    assert ForeignScopes(held).holds(session_id, app_id, project_id) == naive(
        held, session_id, app_id, project_id)


class CountedScopes(frozenset[tuple[str, str, str]]):
    """Scopes that count how often they are read whole."""

    reads = 0

    def __iter__(self) -> Iterator[tuple[str, str, str]]:
        CountedScopes.reads += 1
        return super().__iter__()


# A page of many items whose sessions are other users' and which do not say their app: the
# scopes are read once for the answer, not once per item (2,000 such items over 2,000 foreign
# sessions had read them 2,000 times, 4 million comparisons; 8,000 took 1.75 s on the loop).
def test_an_answer_reads_the_foreign_scopes_once() -> None:
    if not page_scan.AVAILABLE:
        return
    count = 2000
    held = CountedScopes(("default", "default", f"s{k}") for k in range(count))
    body = ('{"results":[' + ",".join(f'{{"session_id":"s{k}","text":"x"}}' for k in range(count))
            + ',{"session_id":"mine","text":"y"}]}').encode()
    page = page_scan.scan(body, False)
    assert page is not None
    CountedScopes.reads = 0
    out, _ = scanned_answer(page, held, {})
    assert CountedScopes.reads == 1
    assert out.count(b'"session_id":"s') == 0 and b'"session_id":"mine"' in out
