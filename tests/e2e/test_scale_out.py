"""Scale-out (SPEC §15) with real processes: gateways on one PostgreSQL database, and
`server.workers` sharing one port. The engine is the built-in dev engine."""

from __future__ import annotations

import base64
import os
import signal
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import unquote, urlsplit

import httpx
import pytest

from gateway.identity.auth import generate_key, hash_secret
from gateway.ids import now_ms
from gateway.store.database import migrate
from tests import databases
from tests.postgres_server import PostgresServer
from tests.processes import GatewayProcess, dev_engine, gateway

pytestmark = pytest.mark.e2e


def path_of(uri: str) -> Path:
    return Path(unquote(urlsplit(uri).path))


def on_database(url: str, root: Path) -> dict[str, str]:
    return {"MEMORY_GATEWAY_STORAGE_DATABASE": url, "MEMORY_GATEWAY_STORAGE_ROOT": str(root)}


def new_key(database: str, user: str) -> str:
    """A key as `memory-gateway keys create` makes it, without a process per key."""
    new = generate_key(user)
    databases.execute(
        database,
        "INSERT INTO api_keys (id, user_id, secret_sha256, created_at_ms) VALUES (?, ?, ?, ?)",
        new.key_id, new.user_id, hash_secret(new.secret), now_ms(),
    )
    return new.token


def add_body(user: str, session: str, text: str) -> dict[str, object]:
    return {"session_id": session, "messages": [
        {"role": "user", "sender_id": user, "content": [{"type": "text", "text": text}]}]}


def test_two_gateways_give_a_contested_new_session_exactly_one_owner(
    tmp_path: Path, postgres: PostgresServer
) -> None:
    url = postgres.create_database()
    shared = on_database(url, tmp_path / "storage")
    with ExitStack() as stack:
        engine_url = stack.enter_context(dev_engine(tmp_path / "engine"))
        gateways: list[GatewayProcess] = [
            stack.enter_context(gateway(tmp_path / name, engine_url, **shared))
            for name in ("a", "b")
        ]
        users = [f"user{n}" for n in range(20)]
        keys = {user: new_key(url, user) for user in users}
        start = threading.Barrier(len(users))

        def add(index: int) -> tuple[str, int]:
            user = users[index]
            target = gateways[index % 2]  # half through each process
            with httpx.Client(base_url=target.url, timeout=30,
                              headers={"Authorization": f"Bearer {keys[user]}"}) as client:
                start.wait()
                response = client.post("/memories/add",
                                       json=add_body(user, "contested", f"hello from {user}"))
            return user, response.status_code

        with ThreadPoolExecutor(len(users)) as pool:
            answers = list(pool.map(add, range(len(users))))

    owners = databases.rows(url, "SELECT user_id FROM memory_sessions WHERE session_id = ?",
                            "contested")
    assert len(owners) == 1
    owner = owners[0]["user_id"]
    assert sorted(status for _, status in answers) == [200] + [403] * (len(users) - 1)
    assert [user for user, status in answers if status == 200] == [owner]


PNG = b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 4
USERS = 20
REQUESTS_PER_USER = 10  # 200 in all: adds with a file, uploads, searches


@dataclass
class Sent:
    user: str
    kind: str  # "add" | "upload" | "search"
    name: str  # the file's name (adds and uploads)
    via: str  # "a" | "b": the gateway that answered, or was asked when it died
    status: int | None  # None: the connection died with the killed gateway


def plan(user: str) -> list[tuple[str, str]]:
    kinds = ["add", "add", "search", "add", "upload", "add", "search", "add", "upload", "search"]
    return [(kind, f"{user}-{n}.png") for n, kind in enumerate(kinds[:REQUESTS_PER_USER])]


def send(client: httpx.Client, user: str, kind: str, name: str, n: int) -> httpx.Response:
    if kind == "add":
        return client.post("/memories/add", json={"session_id": f"{user}-s", "messages": [{
            "role": "user", "sender_id": user, "content": [
                {"type": "text", "text": f"picture {name}"},
                {"type": "image", "name": name,
                 "base64": base64.b64encode(PNG + name.encode()).decode()}]}]})
    if kind == "upload":
        return client.post("/resources", files={"file": (name, PNG + name.encode())})
    return client.post("/memories/search", json={"query": "picture", "user_id": user})


def owner_pid(owner: str) -> int:
    return int(owner.split("/")[1])


def test_a_gateway_killed_mid_add_loses_and_duplicates_nothing(
    tmp_path: Path, postgres: PostgresServer
) -> None:
    """Two gateways on one PostgreSQL and one storage folder, 200 mixed requests from 20 users
    spread over both; one gateway is SIGKILLed while it holds adds in flight. Requests meant
    for it afterwards go to the survivor (as a load balancer would send them)."""
    url = postgres.create_database()
    shared = on_database(url, tmp_path / "storage")
    log_b = tmp_path / "b.log"
    sent: list[Sent] = []
    lock = threading.Lock()
    killing, killed = threading.Event(), threading.Event()  # SIGKILL about to go; gone
    settled_before_kill: list[str] = []
    with ExitStack() as stack:
        engine_url = stack.enter_context(dev_engine(tmp_path / "engine"))
        a = stack.enter_context(gateway(tmp_path / "a", engine_url, **shared))
        b = stack.enter_context(gateway(tmp_path / "b", engine_url, log=log_b, **shared))
        keys = {f"user{n}": new_key(url, f"user{n}") for n in range(USERS)}

        def run_user(index: int) -> None:
            user = f"user{index}"
            headers = {"Authorization": f"Bearer {keys[user]}"}
            with httpx.Client(base_url=a.url, timeout=60, headers=headers) as to_a, \
                    httpx.Client(base_url=b.url, timeout=60, headers=headers) as to_b:
                for n, (kind, name) in enumerate(plan(user)):
                    via = "a" if (index + n) % 2 == 0 and not killed.is_set() else "b"
                    try:
                        response = send(to_a if via == "a" else to_b, user, kind, name, n)
                        status: int | None = response.status_code
                    except httpx.ConnectError:
                        assert via == "a" and killing.is_set()
                        via, status = "b", send(to_b, user, kind, name, n).status_code
                    except httpx.TransportError:
                        assert via == "a" and killing.is_set()
                        status = None
                    with lock:
                        sent.append(Sent(user, kind, name, via, status))

        def kill_a_mid_add() -> None:
            """SIGKILL gateway a as soon as it holds adds whose engine call is in flight."""
            while not killed.is_set():
                held = databases.rows(url, "SELECT owner FROM pending_intents")
                if any(owner_pid(r["owner"]) == a.proc.pid for r in held):
                    settled_before_kill.extend(
                        line for line in log_b.read_text().splitlines() if "settled" in line
                        or "dropped" in line)
                    killing.set()
                    a.proc.send_signal(signal.SIGKILL)
                    a.proc.wait(timeout=10)
                    killed.set()
                    return
                time.sleep(0.005)

        killer = threading.Thread(target=kill_a_mid_add)
        killer.start()
        with ThreadPoolExecutor(USERS) as pool:
            list(pool.map(run_user, range(USERS)))
        killed.set()
        killer.join()

        # The survivor settles what the killed gateway left (it is gone: same host, dead pid).
        deadline = time.monotonic() + 60
        while databases.rows(url, "SELECT id FROM pending_intents"):
            assert time.monotonic() < deadline, "the survivor never settled the leftovers"
            time.sleep(0.2)

    assert len(sent) == USERS * REQUESTS_PER_USER
    assert settled_before_kill == []  # nothing settled while its owner lived
    in_flight = [s for s in sent if s.status is None]
    print(f"killed with {len(in_flight)} request(s) in flight: {in_flight}")
    assert all(s.via == "a" for s in in_flight)
    assert [s for s in sent if s.status is not None and s.status >= 500] == []
    assert all(s.status in (200, 201) for s in sent if s.status is not None)

    mappings = databases.rows(
        url, "SELECT user_id, session_id, name, internal_uri FROM memory_attachments "
             "WHERE deleted_at IS NULL")
    by_name: dict[str, list[dict[str, object]]] = {}
    for row in mappings:
        by_name.setdefault(str(row["name"]), []).append(dict(row))
    assert all(len(rows) == 1 for rows in by_name.values()), "a mapping was duplicated"
    for s in sent:
        if s.kind == "search":
            continue
        found = by_name.get(s.name, [])
        if s.status is not None:  # answered: its mapping is there, its file holds the bytes
            assert len(found) == 1, f"{s} lost its mapping"
        for row in found:  # kept, whether answered or settled: the file is on disk
            assert row["user_id"] == s.user
            assert s.kind == "upload" or row["session_id"] == f"{s.user}-s"
            assert path_of(str(row["internal_uri"])).read_bytes() == PNG + s.name.encode()


def children(pid: int) -> list[int]:
    return sorted(int(p) for p in Path(f"/proc/{pid}/task/{pid}/children").read_text().split())


@pytest.mark.parametrize("backend", ["sqlite", "postgresql"])
def test_workers_share_one_port_and_a_dead_worker_is_replaced(
    tmp_path: Path, backend: str, request: pytest.FixtureRequest
) -> None:
    if backend == "postgresql":
        url = request.getfixturevalue("postgres").create_database()
    else:
        url = str(tmp_path / "gw.db")
        migrate(url)  # the key below is written before the workers start
    with dev_engine(tmp_path / "engine") as engine_url, gateway(
        tmp_path, engine_url, MEMORY_GATEWAY_SERVER_WORKERS="2", **on_database(url, tmp_path)
    ) as gw:
        key = new_key(url, "alice")
        with httpx.Client(base_url=gw.url, timeout=30,
                          headers={"Authorization": f"Bearer {key}"}) as client:
            workers = children(gw.proc.pid)
            assert len(workers) == 2
            for n in range(20):
                response = client.post("/memories/add", json=add_body("alice", "s", f"m{n}"))
                assert response.status_code == 200, response.text
            os.kill(workers[0], signal.SIGKILL)
            deadline = time.monotonic() + 30
            while len(children(gw.proc.pid)) != 2 or workers[0] in children(gw.proc.pid):
                assert time.monotonic() < deadline, "the dead worker was not replaced"
                time.sleep(0.1)
            for n in range(20):
                with httpx.Client(base_url=gw.url, timeout=30,  # a new connection each time
                                  headers={"Authorization": f"Bearer {key}"}) as fresh:
                    assert fresh.get("/healthz").status_code == 200
                    response = fresh.post("/memories/add", json=add_body("alice", "s", f"n{n}"))
                    assert response.status_code == 200, response.text
        survivors = children(gw.proc.pid)
    assert all(not Path(f"/proc/{pid}").exists() for pid in survivors)  # stopped with it
