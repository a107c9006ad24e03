"""Schemathesis against the gateway's own OpenAPI document (`/openapi.json`, generated from the
pydantic models): every operation, examples generated from its schemas, sent by two users to a
real gateway in front of the dev engine. No answer may be a server error (5xx).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
import schemathesis
from hypothesis import HealthCheck, settings
from schemathesis.checks import not_a_server_error

from tests.processes import GatewayProcess, dev_engine, gateway
from tests.reliability.support import PNG, auth

pytestmark = pytest.mark.reliability

EXAMPLES_PER_OPERATION = 20


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
        # Something of alice's to find (or not): a resource, an agent, an add with a file.
        alice = auth(keys["alice"])
        assert httpx.post(gw.url + "/resources", headers=alice,
                          files={"file": ("a.png", PNG, "image/png")}).status_code == 201
        assert httpx.post(gw.url + "/agents", headers=alice,
                          json={"name": "alice's"}).status_code == 201
        yield Target(gw, keys, log)


@pytest.fixture(scope="module")
def api(target: Target) -> schemathesis.BaseSchema:
    return schemathesis.openapi.from_url(target.gw.url + "/openapi.json")


schema = schemathesis.pytest.from_fixture("api")


@schema.parametrize()
@settings(max_examples=EXAMPLES_PER_OPERATION, deadline=None,
          suppress_health_check=list(HealthCheck))
def test_no_operation_answers_with_a_server_error(case: schemathesis.Case, target: Target
                                                  ) -> None:
    for user in ("alice", "bob"):
        headers = {**(case.headers or {}), **auth(target.keys[user])}
        response = case.call(base_url=target.gw.url, headers=headers, timeout=30)
        case.validate_response(response, checks=[not_a_server_error])
