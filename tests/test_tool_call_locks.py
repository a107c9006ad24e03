"""Per-conversation locks: one holder at a time per key, keys independent, nothing kept after."""

from __future__ import annotations

import asyncio

from gateway.toolcalls.locks import KeyedLocks


async def test_one_holder_per_key_and_keys_are_independent() -> None:
    locks = KeyedLocks()
    inside: dict[str, int] = {"a": 0, "b": 0}
    most: dict[str, int] = {"a": 0, "b": 0}

    async def hold(key: str) -> None:
        async with locks.hold(key):
            inside[key] += 1
            most[key] = max(most[key], inside[key])
            await asyncio.sleep(0)
            inside[key] -= 1

    await asyncio.gather(*(hold(key) for key in "ab" * 10))
    assert most == {"a": 1, "b": 1}
    assert len(locks) == 0


async def test_a_holder_that_fails_releases_the_key() -> None:
    locks = KeyedLocks()
    try:
        async with locks.hold("a"):
            raise RuntimeError("boom")
    except RuntimeError:
        pass
    async with asyncio.timeout(5):
        async with locks.hold("a"):
            pass
    assert len(locks) == 0
