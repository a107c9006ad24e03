"""Schemathesis against the gateway's own OpenAPI document (`/openapi.json`, generated from the
pydantic models): every operation, examples generated from its schemas (valid ones, and invalid
ones that must be refused), sent by two users to a real gateway in front of the dev engine. No
answer may be a server error (5xx). Invalid examples include requests whose key schemathesis
removes on purpose (the 401s in the figures).

The operations are driven one by one through hypothesis (`APIOperation.as_strategy`):
schemathesis' own pytest integration (`from_fixture`) does not run under this pytest version.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from hypothesis.errors import Unsatisfiable
from schemathesis import GenerationMode
from schemathesis.checks import not_a_server_error

from tests.processes import GatewayProcess, dev_engine, gateway
from tests.reliability.support import PNG, auth

pytestmark = pytest.mark.reliability

EXAMPLES = {GenerationMode.POSITIVE: 20, GenerationMode.NEGATIVE: 10}  # per operation


@dataclass
class Target:
    gw: GatewayProcess
    keys: dict[str, str]
    log: Path


@pytest.fixture(scope="module")
def target(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Target]:
    tmp = tmp_path_factory.mktemp("schemathesis")
    log = tmp / "gateway.log"
    with dev_engine(tmp) as engine_url, gateway(tmp, engine_url, log=log) as gw:
        keys = {user: gw.key(user) for user in ("alice", "bob")}
        # Something of alice's to find (or not): a resource and an agent.
        alice = auth(keys["alice"])
        assert httpx.post(gw.url + "/resources", headers=alice,
                          files={"file": ("a.png", PNG, "image/png")}).status_code == 201
        assert httpx.post(gw.url + "/agents", headers=alice,
                          json={"name": "alice's"}).status_code == 201
        yield Target(gw, keys, log)


def test_no_operation_answers_with_a_server_error(target: Target) -> None:
    schema = schemathesis.openapi.from_url(target.gw.url + "/openapi.json")
    operations = [result.ok() for result in schema.get_all_operations()]
    statuses: Counter[int] = Counter()
    failures: list[str] = []
    unsatisfiable: list[str] = []
    started = time.perf_counter()

    for operation in operations:
        for mode, examples in EXAMPLES.items():
            @given(case=operation.as_strategy(generation_mode=mode))
            @settings(max_examples=examples, deadline=None, database=None,
                      suppress_health_check=list(HealthCheck))
            def exercise(case: schemathesis.Case) -> None:
                generated = {k: v for k, v in (case.headers or {}).items()
                             if k.lower() != "authorization"}
                for user in ("alice", "bob"):
                    headers = {**generated, **auth(target.keys[user])}
                    response = case.call(base_url=target.gw.url, headers=headers, timeout=30)
                    statuses[response.status_code] += 1
                    case.validate_response(response, checks=[not_a_server_error])

            try:
                exercise()
            except Unsatisfiable:
                assert mode is GenerationMode.NEGATIVE  # nothing invalid to send (no inputs)
                unsatisfiable.append(operation.label)
            except Exception as exc:  # noqa: BLE001 - collected, reported all at once below
                failures.append(f"{operation.label} ({mode.value}): {exc}")

    calls = sum(statuses.values())
    print(f"\nschemathesis: {len(operations)} operations, {calls} calls in "
          f"{time.perf_counter() - started:.1f} s; statuses {dict(sorted(statuses.items()))}; "
          f"no invalid input possible for {len(unsatisfiable)}")
    assert not failures, "\n\n".join(failures)
    assert len(operations) >= 40 and calls >= len(operations) * 2
    assert not any(status >= 500 for status in statuses)
    assert "Traceback" not in target.log.read_text()
