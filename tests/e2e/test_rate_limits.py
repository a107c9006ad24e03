"""Rate limits across two gateway processes on one database (SPEC §13, §15).

On PostgreSQL both processes draw from one bucket row per credential and class, so a burst is
one burst however the load balancer spreads the requests, even when they race; on SQLite each
process keeps its own buckets (docs/limits.md), so two processes grant twice the burst."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack
from pathlib import Path

import httpx
import pytest

from tests.conftest import BACKENDS
from tests.processes import dev_engine, gateway

pytestmark = pytest.mark.e2e
BURST = 6
# Per process granted, by backend: shared on PostgreSQL, each process its own on SQLite.
GRANTED = {"postgresql": BURST, "sqlite": 2 * BURST}


@pytest.mark.parametrize("database_backend", BACKENDS, indirect=True)
def test_a_credentials_burst_is_shared_by_every_process_on_postgresql(
    tmp_path: Path, shared_database: str, database_backend: str
) -> None:
    shared = {"MEMORY_GATEWAY_STORAGE_DATABASE": shared_database,
              "MEMORY_GATEWAY_STORAGE_ROOT": str(tmp_path / "storage"),
              # 0.05 tokens/s: nothing refills while the test runs.
              "MEMORY_GATEWAY_RATE_LIMITS_REQUESTS_PER_S": "0.05",
              "MEMORY_GATEWAY_RATE_LIMITS_BURST": str(BURST)}
    with ExitStack() as stack:
        engine_url = stack.enter_context(dev_engine(tmp_path / "engine"))
        gateways = [stack.enter_context(gateway(tmp_path / name, engine_url, **shared))
                    for name in ("a", "b")]
        alice, bob = gateways[0].key("alice"), gateways[0].key("bob")

        def get(n: int, token: str = alice) -> httpx.Response:
            return httpx.get(f"{gateways[n % 2].url}/agents",
                             headers={"Authorization": f"Bearer {token}"}, timeout=30)

        with ThreadPoolExecutor(8) as pool:  # racing, spread over both processes
            answers = list(pool.map(get, range(4 * BURST)))
        bobs = [get(n, bob) for n in range(2)]

    statuses = [a.status_code for a in answers]
    assert statuses.count(200) == GRANTED[database_backend]
    assert statuses.count(429) == 4 * BURST - GRANTED[database_backend]
    refused = next(a for a in answers if a.status_code == 429)
    assert refused.json()["error"]["code"] == "rate_limited"
    assert int(refused.headers["retry-after"]) >= 1
    assert refused.headers["ratelimit-remaining"] == "0"
    assert refused.headers["ratelimit-limit"] == str(BURST)
    assert [b.status_code for b in bobs] == [200, 200]  # another credential, its own bucket
