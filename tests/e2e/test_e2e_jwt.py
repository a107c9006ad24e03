"""End to end: a `memory-gateway serve` process that trusts a real OpenID provider's JWTs.

A JWT for bob reaches bob's data and none of alice's, as an API key would (SPEC §3, §17).
"""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from tests.oidc_server import OidcProvider
from tests.processes import dev_engine, gateway

pytestmark = pytest.mark.e2e
TS = 1764547200000


def add(client: httpx.Client, user: str, session: str, text: str) -> httpx.Response:
    return client.post("/api/v2/memory/add", json={"session_id": session, "messages": [
        {"role": "user", "sender_id": user, "timestamp": TS, "content": text}]})


def test_jwt_for_bob_reaches_bobs_data_and_not_alices(tmp_path: Path, oidc: OidcProvider) -> None:
    with dev_engine(tmp_path) as engine_url, \
            gateway(tmp_path, engine_url, **oidc.gateway_env()) as gw:
        alice = httpx.Client(base_url=gw.url, timeout=20,
                             headers={"Authorization": f"Bearer {oidc.mint('alice')}"})
        bob = httpx.Client(base_url=gw.url, timeout=20,
                           headers={"Authorization": f"Bearer {oidc.mint('bob')}"})
        with alice, bob:
            assert add(alice, "alice", "alice-trip", "alice hiked Tamalpais").status_code == 200
            assert alice.post("/api/v2/memory/flush",
                              json={"session_id": "alice-trip"}).status_code == 200
            uploaded = alice.post("/resources", files={"file": ("notes.txt", b"alice's notes")})
            assert uploaded.status_code == 201, uploaded.text

            assert add(bob, "bob", "bob-trip", "bob sailed to Tamalpais").status_code == 200
            assert bob.post("/api/v2/memory/flush",
                            json={"session_id": "bob-trip"}).status_code == 200
            mine = bob.post("/api/v2/memory/search", json={"query": "Tamalpais",
                                                           "user_id": "bob"})
            assert mine.status_code == 200, mine.text
            assert "sailed" in mine.text and "hiked" not in mine.text

            theirs = bob.post("/api/v2/memory/search", json={"query": "Tamalpais",
                                                             "user_id": "alice"})
            assert theirs.status_code == 403 and "hiked" not in theirs.text
            intrude = add(bob, "bob", "alice-trip", "bob writes into alice's session")
            assert intrude.status_code == 403
            assert intrude.json()["error"]["code"] == "session_owned_by_another_user"
            assert add(bob, "alice", "bob-trip", "bob speaking as alice").status_code == 403
            assert bob.get(f"/resources/{uploaded.json()['id']}").status_code == 404
            assert alice.get(f"/resources/{uploaded.json()['id']}").status_code == 200

        # A key still works beside JWTs; a token from no provider the gateway trusts does not.
        key = {"Authorization": f"Bearer {gw.key('carol')}"}
        assert httpx.get(gw.url + "/health", headers=key, timeout=10).status_code == 200
        forged = oidc.mint("bob")[:-4] + "AAAA"
        refused = httpx.get(gw.url + "/health", headers={"Authorization": f"Bearer {forged}"},
                            timeout=10)
        assert refused.status_code == 401
        assert refused.json()["error"]["message"] == "JWT signature does not verify"
