"""More real engine clients against a real gateway process, a fake engine behind it.

`evermemos` 0.3 (EverMemOS v0) runs in the test venv; `everos-cloud` 0.4.x (the Cloud's v1 API)
and mem0's `MemoryClient` run in their own cached venvs (tests/e2e/client_venvs.py), since the
first shares its name with the 1.x SDK and the second brings a vector store and telemetry.
"""

from __future__ import annotations

from datetime import UTC, datetime
from importlib.metadata import version
from pathlib import Path

import evermemos
import pytest
from evermemos import EverMemOS

from tests.e2e.client_venvs import client_python, python_at_least, run_client
from tests.fake_engines import ENGINE_KEY, fake_engine
from tests.processes import gateway

pytestmark = pytest.mark.e2e


def test_evermemos_v0_client_adds_searches_and_cannot_act_as_another_user(
    tmp_path: Path,
) -> None:
    assert version("evermemos").startswith("0.3.")
    now = datetime.now(UTC).isoformat()
    with fake_engine("evermemos-v0") as engine_url, \
            gateway(tmp_path, engine_url, MEMORY_GATEWAY_UPSTREAM_FLAVOR="everos-cloud") as gw:
        alice = EverMemOS(api_key=gw.key("alice"), base_url=gw.url, max_retries=0)
        bob = EverMemOS(api_key=gw.key("bob"), base_url=gw.url, max_retries=0)
        added = alice.v0.memories.add(message_id="m1", create_time=now, sender="alice",
                                      content="the harbour at dawn", group_id="alices-trip")
        assert added.status == "ok"
        found = alice.v0.memories.search(extra_query={"user_id": "alice", "query": "harbour"})
        assert [m.user_id for m in found.result.memories or []] == ["alice"]

        with pytest.raises(evermemos.PermissionDeniedError):  # sender must be the caller
            bob.v0.memories.add(message_id="m2", create_time=now, sender="alice", content="x")
        with pytest.raises(evermemos.PermissionDeniedError):  # alice's group is hers
            bob.v0.memories.add(message_id="m3", create_time=now, sender="bob", content="x",
                                group_id="alices-trip")
        with pytest.raises(evermemos.PermissionDeniedError):
            bob.v0.memories.search(extra_query={"user_id": "alice", "query": "harbour"})
        with pytest.raises(evermemos.UnprocessableEntityError):  # names no user at all
            bob.v0.memories.search(extra_query={"query": "harbour"})
        theirs = bob.v0.memories.search(extra_query={"user_id": "bob", "query": "harbour"})
        assert theirs.result.memories == []


def test_everos_cloud_04_client_against_the_v1_api(tmp_path: Path) -> None:
    python = client_python("everos-cloud-0.4", "everos-cloud==0.4.1")
    with fake_engine("everos-cloud-v1") as engine_url, \
            gateway(tmp_path, engine_url, MEMORY_GATEWAY_UPSTREAM_FLAVOR="everos-cloud-v1") as gw:
        result = run_client(python, "everos_cloud_v04.py", GATEWAY_URL=gw.url,
                            ALICE_KEY=gw.key("alice"), BOB_KEY=gw.key("bob"))
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.strip().endswith("ok")


def test_mem0_memory_client_against_the_platform_paths(tmp_path: Path) -> None:
    python = client_python("mem0ai", "mem0ai==2.2.1")
    with fake_engine("mem0-platform") as engine_url, \
            gateway(tmp_path, engine_url, MEMORY_GATEWAY_UPSTREAM_FLAVOR="mem0") as gw:
        result = run_client(python, "mem0_memory_client.py", GATEWAY_URL=gw.url,
                            ALICE_KEY=gw.key("alice"), BOB_KEY=gw.key("bob"),
                            MEM0_TELEMETRY="False", HOME=str(tmp_path))
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.strip().endswith("ok")


def test_everos_cloud_1_2_quickstart_by_base_url_and_its_new_routes_closed_with_a_reason(
    tmp_path: Path,
) -> None:
    python = client_python("everos-cloud-1.2", "everos-cloud==1.2.0", python_at_least(12))
    with fake_engine("everos-cloud") as engine_url, \
            gateway(tmp_path, engine_url, MEMORY_GATEWAY_UPSTREAM_FLAVOR="everos-cloud",
                    MEMORY_GATEWAY_UPSTREAM_HEADERS='{"Authorization": "Bearer '
                    f'{ENGINE_KEY}"}}') as gw:
        result = run_client(python, "everos_cloud_12_quickstart.py", GATEWAY_URL=gw.url,
                            USER_KEY=gw.key("user-1"))
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.strip().endswith("ok")
