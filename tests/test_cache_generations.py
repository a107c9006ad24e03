"""Caches invalidated across processes (SPEC §15): what one process keeps in memory (verified
keys, session owners, attachment matchers) is dropped when another process changes it.

Two adapters opened on one database stand for two processes: each has its own connections,
and on PostgreSQL its own listening connection, exactly as a second gateway would. On
PostgreSQL another process's change arrives as a notification, so the tests wait for it (up to
a few seconds, the time a notification may take on a loaded machine); nothing else could move
the number or drop the cached answer, since the key cache's TTL here is an hour.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator

import pytest

from gateway.errors import Unauthorized
from gateway.identity.auth import Authenticator, generate_key, hash_secret
from gateway.search.index import AttachmentIndex
from gateway.store import keys
from gateway.store.database import TOPICS, Database, database_for
from tests import databases
from tests.attachment_helpers import add_mappings as claim
from tests.databases import eventually

pytestmark = pytest.mark.both_databases

HOUR = 3600.0


@pytest.fixture
async def here(database_url: str) -> AsyncIterator[Database]:
    """This process's adapter."""
    db = database_for(database_url)
    await db.open()
    yield db
    await db.close()


@pytest.fixture
async def there(database_url: str, here: Database) -> AsyncIterator[Database]:
    """Another process's adapter on the same database."""
    db = database_for(database_url)
    await db.open()
    yield db
    await db.close()


async def settled(db: Database, other: Database, topic: str = "sessions") -> None:
    """Until `db` has heard of every change `other` made so far: a marker change of `topic`
    made last, seen when `db` hears of it. Notifications arrive in commit order, so once the
    marker is heard every earlier commit's has been too. A session (claimed by a user who never
    searches) is waited for by its id: a mere move of the generation would not do, since a late
    notification of `db`'s own earlier commit moves it as well. A key (a marker key revoked)
    cannot be named, so "keys" waits for its topic to move."""
    before = db.generation(topic)
    if topic == "keys":
        key_id, _ = await new_key(other, "marker")
        await keys.revoke(other, key_id)

        async def moved() -> bool:
            return db.generation(topic) != before
        assert await eventually(moved)
        return
    marker = f"marker-{uuid.uuid4().hex}"
    await claim(other, "marker", marker)

    async def heard() -> bool:
        now = db.generation("sessions")
        changed = db.changed_sessions(before, now)
        # None: every move since was dropped at once (a listener replaced): later ones are new
        return now != before and (changed is None or marker in changed)
    assert await eventually(heard)


async def new_key(db: Database, user: str) -> tuple[str, str]:
    key = generate_key(user)
    await keys.insert(db, key.key_id, user, hash_secret(key.secret))
    return key.key_id, key.token


# --- generations --------------------------------------------------------------------------


async def unrelated_writes(db: Database, n: int) -> None:
    """Writes that change nothing any process keeps: a new key, an agent."""
    await new_key(db, f"user{n}")
    async with db.write() as tx:
        await tx.execute(
            "INSERT INTO agents (id, user_id, name, activity_at_ms, created_at_ms, updated_at_ms)"
            " VALUES (?, 'alice', 'a', 0, 0, 0)", (f"agt_{n}",))


async def test_a_generation_stands_still_while_nothing_of_its_topic_changes(
    here: Database, there: Database
) -> None:
    await settled(here, there, "sessions")
    await settled(here, there, "keys")
    start = {topic: here.generation(topic) for topic in TOPICS}
    await here.read("SELECT * FROM memory_sessions")
    assert {topic: here.generation(topic) for topic in TOPICS} == start

    await unrelated_writes(there, 1)
    await settled(here, there, "sessions")  # every change above has reached `here` by now
    assert here.generation("keys") == start["keys"]

    moved_sessions = here.generation("sessions")
    await unrelated_writes(there, 2)
    await settled(here, there, "keys")
    assert here.generation("sessions") == moved_sessions


async def test_another_processs_claim_moves_the_sessions_generation(
    here: Database, there: Database
) -> None:
    start = here.generation("sessions")
    await claim(there, "bob", "s1")

    async def moved() -> bool:
        return here.generation("sessions") != start
    assert await eventually(moved)


async def test_a_mapping_change_in_another_process_moves_the_sessions_generation(
    here: Database, there: Database
) -> None:
    await claim(there, "alice", "s1", "a.png")
    await settled(here, there)
    start = here.generation("sessions")
    await claim(there, "alice", "s1", "b.png", "c.png")

    async def moved() -> bool:
        return here.generation("sessions") != start
    assert await eventually(moved)


async def test_a_revocation_in_another_process_moves_the_keys_generation(
    here: Database, there: Database
) -> None:
    key_id, _ = await new_key(there, "alice")
    await settled(here, there)
    start = here.generation("keys")
    assert await keys.revoke(there, key_id)

    async def moved() -> bool:
        return here.generation("keys") != start
    assert await eventually(moved)


async def test_this_processs_own_commit_moves_its_topic_before_the_next_request(
    here: Database,
) -> None:
    start = here.generation("sessions")
    await claim(here, "alice", "s1")
    assert here.generation("sessions") != start  # no waiting: read-your-writes in one process


# --- the caches ---------------------------------------------------------------------------


async def test_a_key_revoked_by_another_process_is_refused_despite_a_long_ttl(
    here: Database, there: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    key_id, token = await new_key(there, "alice")
    auth = Authenticator(here, HOUR)
    reads = 0
    find = keys.find_now  # a request's key check (gateway/identity/auth.py)

    async def counted(db: Database, wanted: str) -> keys.ApiKey | None:
        nonlocal reads
        reads += 1
        return await find(db, wanted)
    monkeypatch.setattr(keys, "find_now", counted)

    await settled(here, there)
    assert await auth.user_for(f"Bearer {token}") == "alice"
    assert await auth.user_for(f"Bearer {token}") == "alice"
    assert reads == 1  # kept: the second request read nothing

    assert await keys.revoke(there, key_id)

    async def refused() -> bool:
        try:
            await auth.user_for(f"Bearer {token}")
        except Unauthorized:
            return True
        return False
    assert await eventually(refused)


async def test_a_session_claimed_by_another_process_drops_the_kept_lookup(
    here: Database, there: Database
) -> None:
    await claim(here, "alice", "mine", "a.png")
    await settled(here, there)  # on PostgreSQL the claim's own notification moves it again
    index = AttachmentIndex(here)
    first = await index.lookup("alice", ["mine", "open"])
    assert first[0] == frozenset()  # "open" is nobody's yet
    assert await index.lookup("alice", ["mine", "open"]) is first  # kept

    await claim(there, "bob", "open")

    async def foreign() -> bool:
        found = await index.lookup("alice", ["mine", "open"])
        return found[0] == frozenset({("default", "default", "open")})
    assert await eventually(foreign)


async def test_mappings_added_by_another_process_reach_the_kept_matcher(
    here: Database, there: Database
) -> None:
    await claim(here, "alice", "s1", "a.png")
    index = AttachmentIndex(here)
    _, matchers = await index.lookup("alice", ["s1"])
    assert sorted(matchers["s1"].by_name) == ["a.png"]

    await claim(there, "alice", "s1", "b.png")

    async def both() -> bool:
        _, found = await index.lookup("alice", ["s1"])
        return sorted(found["s1"].by_name) == ["a.png", "b.png"]
    assert await eventually(both)


async def test_a_session_deleted_directly_in_the_database_drops_the_kept_lookup(
    here: Database, database_url: str
) -> None:
    """Operators' own SQL counts too: the triggers, not the gateway's code, move the topic."""
    await claim(here, "bob", "s1")
    index = AttachmentIndex(here)
    first = await index.lookup("alice", ["s1"])
    assert first[0] == frozenset({("default", "default", "s1")})
    databases.execute(database_url, "DELETE FROM memory_sessions WHERE session_id = ?", "s1")

    async def gone() -> bool:
        return (await index.lookup("alice", ["s1"]))[0] == frozenset()
    assert await eventually(gone)


async def test_another_users_new_session_leaves_the_kept_lookup(
    here: Database, there: Database, database_url: str
) -> None:
    """Which sessions moved is known (migrations/0014): a search keeps its lookup while other
    users claim sessions, the common case under many users."""
    await claim(here, "alice", "mine", "a.png")
    await settled(here, there)
    index = AttachmentIndex(here)
    first = await index.lookup("alice", ["mine", "open"])
    before = here.generation("sessions")
    await claim(there, "bob", "elsewhere")
    databases.execute(database_url, "INSERT INTO memory_sessions (app_id, project_id, session_id,"
                      " user_id, created_at) VALUES ('default', 'default', 'direct', 'carol', 0)")

    async def both_heard() -> bool:
        now = here.generation("sessions")
        return now != before and here.changed_sessions(before, now) == {"elsewhere", "direct"}
    assert await eventually(both_heard)
    assert await index.lookup("alice", ["mine", "open"]) is first  # not read again

    await claim(there, "bob", "open")  # one of the page's sessions: dropped, and now foreign

    async def foreign() -> bool:
        found = await index.lookup("alice", ["mine", "open"])
        return found[0] == frozenset({("default", "default", "open")})
    assert await eventually(foreign)
