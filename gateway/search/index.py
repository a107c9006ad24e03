"""Which of the caller's attachments occur in each search result (SPEC §9), with cached matchers.

Per page: one query reads the owners and mapping versions of the sessions on it, and none when
none of those sessions changed since the same sessions were looked up (the database's
"sessions" generation moves on every commit of any process that claims a session or changes
its mappings, and the database says which sessions each move was about:
gateway/store/session_changes.py).
Filename matchers are built once per (user, session) and reused until the session's
`mappings_version` (bumped by database triggers on every mapping change) moves; only then are
that session's mappings read again. A session has a C matcher for the page scanner
(gateway/search/page_scan.py) and, once the Python path needs one, a Python matcher. Matching
is linear in the bytes of `raw` (gateway/search/matching.py); a session with many or long names
has its matchers built in a worker thread, so building them never holds the event loop long.
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from gateway.search import page_scan
from gateway.search.matching import FilenameMatcher, searchable_text
from gateway.serving import jsonio
from gateway.store import attachments as store
from gateway.store.database import Database

CACHE_SESSIONS = 4096
CACHE_LOOKUPS = 1024
# Sessions whose names add up to this many characters have their matchers built in a worker
# thread (the Python automaton costs about 1 µs a character to build).
INLINE_NAME_CHARS = 4096


def result_type(content_type: str) -> str:
    """The attachment `type` in search results: image, audio, video, else file."""
    family = content_type.split("/", 1)[0]
    return family if family in ("image", "audio", "video") else "file"


@dataclass(frozen=True)
class MappedFile:
    id: str
    resource_id: str | None
    content_type: str
    source: str


@dataclass(frozen=True)
class SessionMatcher:
    version: int
    # the Python path's matcher; None when built for the C page scanner alone (it costs about
    # as much to build as the page scanner's, in Python, for a session of long names)
    matcher: FilenameMatcher | None
    by_name: dict[str, list[dict[str, str]]]  # lower-cased name -> attachments with that name
    native: Any = None  # the same, for the C page scanner (gateway/search/page_scan.py)
    # internal URI -> the mapping behind a file the gateway stores (not shown in answers):
    # what the MCP tools name a found file by (gateway/mcp/tools.py)
    files: Mapping[str, MappedFile] = field(default_factory=dict)

    def attachments_in(self, raw: Any) -> list[dict[str, str]]:
        matcher = self.matcher if self.matcher is not None else FilenameMatcher(self.by_name)
        if not matcher:
            return []
        seen: set[str] = set()
        found: list[dict[str, str]] = []
        for name in sorted(matcher.find(searchable_text(raw))):
            for attachment in self.by_name[name]:
                if attachment["internal_uri"] not in seen:
                    seen.add(attachment["internal_uri"])
                    found.append(attachment)
        return found


# The download URL of an attachment id, or None (no server.public_url): gateway/attachments/links.py
DownloadUrl = Callable[[str], str | None]


def _no_url(attachment_id: str) -> str | None:
    return None


def _build(version: int, rows: Sequence[Any], download_url: DownloadUrl = _no_url,
           python: bool = True, probe: bool = True) -> SessionMatcher:
    """A session's matchers: the C page scanner's (when built), and the Python path's when
    `python` (or when there is no C one). `probe=False` keeps the C matcher to its automaton
    (the tests compare the two ways of finding names)."""
    by_name: dict[str, list[dict[str, str]]] = {}
    files: dict[str, MappedFile] = {}
    for row in rows:
        if row["source"] in store.STORED_SOURCES:
            files[row["internal_uri"]] = MappedFile(
                row["id"], row["resource_id"] if "resource_id" in row.keys() else None,
                row["content_type"], row["source"])
        attachment = {"type": result_type(row["content_type"]), "name": row["name"],
                      "internal_uri": row["internal_uri"]}
        # Only files the gateway stores can be downloaded; a client's own URI is theirs.
        url = download_url(row["id"]) if row["source"] in store.STORED_SOURCES else None
        if url is not None:
            attachment["url"] = url
        by_name.setdefault(row["name"].lower(), []).append(attachment)
    native = _native(by_name, probe)
    matcher = FilenameMatcher(by_name) if python or native is None else None
    return SessionMatcher(version, matcher, by_name, native, files)


def _native(by_name: dict[str, list[dict[str, str]]], probe: bool = True) -> Any:
    """The C matcher: names in sorted order (the order attachments are listed in), each with
    its attachments' JSON and a number per internal URI (duplicates are listed once)."""
    if not page_scan.AVAILABLE:
        return None
    names = sorted(by_name)
    uri_numbers: dict[str, int] = {}
    entries = [
        [(uri_numbers.setdefault(a["internal_uri"], len(uri_numbers)), jsonio.dumps(a))
         for a in by_name[name]]
        for name in names
    ]
    return page_scan.matcher(names, entries, probe)


EMPTY = SessionMatcher(-1, FilenameMatcher(()), {})


def native_matchers(matchers: Mapping[str, SessionMatcher]) -> dict[str, Any]:
    """The sessions' C matchers, by session, as the page scanner's render takes them."""
    return {sid: m.native for sid, m in matchers.items() if m.native is not None}


class Lookup(tuple[frozenset[tuple[str, str, str]], Mapping[str, SessionMatcher]]):
    """(scopes of the sessions owned by someone else, a matcher per own session); `natives`
    holds the own sessions' C matchers, by session, as the page scanner's render takes them
    (made once per lookup, not per search)."""

    natives: dict[str, Any]

    def __new__(cls, foreign: frozenset[tuple[str, str, str]],
                matchers: Mapping[str, SessionMatcher]) -> Lookup:
        made = super().__new__(cls, (foreign, matchers))
        made.natives = native_matchers(matchers)
        return made


LookupKey = tuple[str, tuple[str, ...], bool]  # (user, the page's session ids, python)


class AttachmentIndex:
    def __init__(self, db: Database, download_url: DownloadUrl = _no_url) -> None:
        self._db = db
        self._download_url = download_url
        self._cache: OrderedDict[tuple[str, str], SessionMatcher] = OrderedDict()
        # Whole lookups, kept until one of their sessions is claimed or changed by anyone (the
        # database says which sessions each move of its "sessions" generation was about; when
        # it cannot, all are dropped): a page of the same sessions then costs no query at all.
        self._lookups: dict[LookupKey, Lookup] = {}
        self._lookups_of: dict[str, set[LookupKey]] = {}  # session id -> the lookups naming it
        self._lookups_version = -1

    async def lookup(self, user_id: str, session_ids: Sequence[str], python: bool = True
                     ) -> Lookup:
        """Sessions owned by others (app, project, session), and a matcher per own session;
        `python=False`: for the C page scanner, whose matchers are then all that is built."""
        found = self.kept(user_id, session_ids, python)
        if found is None:
            version = self._lookups_version
            key = (user_id, tuple(session_ids), python)
            found = await self._lookup(user_id, session_ids, python)
            if len(self._lookups) >= CACHE_LOOKUPS:
                self._forget(None)
            if self._db.generation("sessions") == version:  # nothing changed meanwhile
                self._lookups[key] = found
                for session_id in key[1]:
                    self._lookups_of.setdefault(session_id, set()).add(key)
        return found

    def kept(self, user_id: str, session_ids: Sequence[str], python: bool = True
             ) -> Lookup | None:
        """`lookup`'s answer when it is kept and none of its sessions changed since, without
        a query or a wait; None otherwise."""
        version = self._db.generation("sessions")
        if version != self._lookups_version:
            self._forget(self._db.changed_sessions(self._lookups_version, version))
            self._lookups_version = version
        return self._lookups.get((user_id, tuple(session_ids), python))

    def _forget(self, changed: frozenset[str] | None) -> None:
        """Drop the lookups naming any of these sessions (all of them: None)."""
        if changed is None:
            self._lookups.clear()
            self._lookups_of.clear()
            return
        for session_id in changed:
            for key in self._lookups_of.pop(session_id, ()):
                if self._lookups.pop(key, None) is not None:
                    for other in key[1]:
                        if other != session_id and (keys := self._lookups_of.get(other)):
                            keys.discard(key)

    async def _lookup(self, user_id: str, session_ids: Sequence[str], python: bool) -> Lookup:
        owners = await store.session_versions(self._db, session_ids)
        foreign: set[tuple[str, str, str]] = set()
        versions: dict[str, int] = {}
        for app_id, project_id, session_id, owner, version in owners:
            if owner != user_id:
                foreign.add((app_id, project_id, session_id))
            else:
                versions[session_id] = versions.get(session_id, 0) + version
        matchers: dict[str, SessionMatcher] = {}
        stale: list[str] = []
        for session_id, version in versions.items():
            cached = self._cache.get((user_id, session_id))
            if (cached is not None and cached.version == version
                    and (cached.matcher is not None or not python)):
                self._cache.move_to_end((user_id, session_id))
                matchers[session_id] = cached
            else:
                stale.append(session_id)
        if stale:
            rows = await store.live_mappings(self._db, user_id, stale)
            for session_id in stale:
                session_rows = rows.get(session_id, [])
                args = (versions[session_id], session_rows, self._download_url, python)
                if sum(len(row["name"]) for row in session_rows) < INLINE_NAME_CHARS:
                    built = _build(*args)
                else:
                    built = await asyncio.to_thread(_build, *args)
                matchers[session_id] = built
                self._remember((user_id, session_id), built)
        return Lookup(frozenset(foreign), matchers)

    def _remember(self, key: tuple[str, str], matcher: SessionMatcher) -> None:
        self._cache[key] = matcher
        self._cache.move_to_end(key)
        while len(self._cache) > CACHE_SESSIONS:
            self._cache.popitem(last=False)
