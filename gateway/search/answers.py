"""A search answer from the engine's page, the caller's matchers and the foreign scopes (SPEC §9).

Two ways to the same bytes' meaning: `python_answer` over parsed items
(gateway/search/items.py), the reference for every engine; `scanned_answer` over a page the C
scanner read (gateway/search/page_scan.py), used for EverOS-shaped answers when it was built
(`render_scanned` the same with a lookup's C matchers, as the search route calls it).
Both are pure: the caller reads the sessions' owners and matchers between finding the sessions
and answering. `filtered_answer` does all three for a passed-through read (EverMemOS v0).
`off_loop` runs the work on a big page in a worker thread, so no search holds the event loop
for more than a few milliseconds (SPEC §13).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping, Sequence
from collections.abc import Set as AbstractSet
from typing import Any, TypeVar

from gateway.errors import UpstreamBadResponse
from gateway.search.index import EMPTY, AttachmentIndex, SessionMatcher, native_matchers
from gateway.search.items import FoundItem, drop, result
from gateway.serving import jsonio

Scope = tuple[str, str, str]  # (app_id, project_id, session_id)
ItemsOf = Callable[[Any], list[FoundItem]]
T = TypeVar("T")

# Pages from this many bytes on are read and matched in a worker thread: about 1 ms of work on
# the C scanner (which also matches long strings without the GIL), about 2 ms on the Python
# path (bench/search_adversarial.py). Below, a thread hop would cost more than it saves.
SCANNER_INLINE_BYTES = 512 * 1024
PYTHON_INLINE_BYTES = 32 * 1024


async def off_loop(size: int, inline_bytes: int, work: Callable[..., T], *args: Any) -> T:
    """`work(*args)`, in a worker thread when `size` bytes are at least `inline_bytes`."""
    if size < inline_bytes:
        return work(*args)
    return await asyncio.to_thread(work, *args)


def session_ids(items: Sequence[FoundItem]) -> list[str]:
    return sorted({sid for item in items if (sid := item.session_id)})


class ForeignScopes:
    """Which items' sessions are another user's: by (app, project, session) for an item that
    says its app and project, else by the session's scopes taken apart once (an answer asks for
    each of its items: constant time each, whatever the page and its owners)."""

    def __init__(self, scopes: AbstractSet[Scope]) -> None:
        self.scopes = scopes
        self.apps: dict[str, set[str]] = {}
        self.projects: dict[str, set[str]] = {}
        for app, project, session_id in scopes:
            self.apps.setdefault(session_id, set()).add(app)
            self.projects.setdefault(session_id, set()).add(project)

    def holds(self, session_id: str, app_id: str | None, project_id: str | None) -> bool:
        """Whether an item's session is another user's. An item that does not say its app or
        project is foreign when its session is another user's in any of them: the request's
        own `app_id`/`project_id` never fill the gap (a caller could name any)."""
        if app_id and project_id:
            return (app_id, project_id, session_id) in self.scopes
        if app_id:
            return app_id in self.apps.get(session_id, ())
        if project_id:
            return project_id in self.projects.get(session_id, ())
        return session_id in self.apps


async def filtered_answer(
    index: AttachmentIndex, caller: str, items_of: ItemsOf, body: bytes
) -> bytes:
    """A passed-through read answer in the engine's shape (EverMemOS v0): other users' items
    and items of sessions another user owns dropped, attachments added to the rest."""
    try:
        answer = jsonio.loads(body)
    except ValueError:
        raise UpstreamBadResponse(f"upstream answer is not JSON ({len(body)} bytes)") from None
    items = items_of(answer)
    others = [item for item in items if isinstance(item.raw, dict)
              and item.raw.get("user_id") not in (None, caller)]
    if others:
        drop(items, others)
        gone = {id(item) for item in others}
        items = [item for item in items if id(item) not in gone]
    foreign, matchers = await index.lookup(caller, session_ids(items))
    out, _ = await off_loop(len(body), PYTHON_INLINE_BYTES, python_answer, answer, items, True,
                            foreign, matchers)
    return out


def python_answer(
    answer: Any, items: list[FoundItem], native: bool, foreign_scopes: AbstractSet[Scope],
    matchers: Mapping[str, SessionMatcher],
) -> tuple[bytes, int]:
    """The answer's bytes and the number of attachments attached; drops items in place."""
    others = ForeignScopes(foreign_scopes) if foreign_scopes else None
    foreign = [
        item for item in items
        if item.session_id and others is not None
        and others.holds(item.session_id, *item.scope("", ""))
    ]
    if foreign:
        drop(items, foreign)
        dropped = {id(item) for item in foreign}
        items = [item for item in items if id(item) not in dropped]
    found = [matchers.get(item.session_id or "", EMPTY).attachments_in(item.raw) for item in items]
    matched = sum(len(attachments) for attachments in found)
    if not native:
        results = [result(item, index, found[index]) for index, item in enumerate(items)]
        return jsonio.dumps({"results": results, "total": len(results)}), matched
    for item, attachments in zip(items, found, strict=True):
        if isinstance(item.raw, dict):
            item.raw["attachments"] = attachments
    return jsonio.dumps(answer), matched


def scanned_answer(
    page: Any, foreign_scopes: AbstractSet[Scope], matchers: Mapping[str, SessionMatcher],
) -> tuple[bytes, int]:
    """`python_answer`'s result for a page read by the C scanner."""
    return render_scanned(page, foreign_scopes, native_matchers(matchers))


def render_scanned(page: Any, foreign_scopes: AbstractSet[Scope], natives: dict[str, Any]
                   ) -> tuple[bytes, int]:
    """`scanned_answer` with the sessions' C matchers given (a lookup's `natives`)."""
    dropped = None
    if foreign_scopes:
        others = ForeignScopes(foreign_scopes)
        dropped = {
            position for position, (session_id, app, project) in enumerate(page.scopes())
            if session_id and others.holds(session_id, app, project)
        }
    answer: tuple[bytes, int] = page.render(natives, dropped)
    return answer
