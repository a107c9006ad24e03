"""Scale-out (SPEC §15) with real processes: gateways on one PostgreSQL database with their files
on S3 (SeaweedFS) or one shared folder, and `server.workers` sharing one port. The engine is the
built-in dev engine."""

from __future__ import annotations

import base64
import json
import os
import re
import secrets
import signal
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import unquote, urlsplit

import httpx
import pytest

from gateway.attachments.recovery import RECOVERY_INTERVAL_S
from gateway.identity.auth import generate_key, hash_secret
from gateway.store.ids import now_ms
from tests import databases
from tests.conftest import BACKENDS
from tests.postgres_server import PostgresServer
from tests.processes import ROOT, GatewayProcess, dev_engine, gateway
from tests.s3_server import S3Server, objects

pytestmark = pytest.mark.e2e


def path_of(uri: str) -> Path:
    return Path(unquote(urlsplit(uri).path))


def storage_env(url: str, root: Path) -> dict[str, str]:
    """A gateway process on the database `url`, keeping its files under `root`."""
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
        {"role": "user", "sender_id": user, "timestamp": now_ms(),
         "content": [{"type": "text", "text": text}]}]}


class Files:
    """The file store both gateways share, seen from outside: a folder, or a prefix of the
    session's SeaweedFS bucket. Files are named by their path under the root or prefix."""

    def __init__(self, tmp_path: Path, s3: S3Server | None) -> None:
        self.root = tmp_path / "storage"
        self.s3 = s3
        self.prefix = f"scale-{secrets.token_hex(4)}"
        self.client = s3.client() if s3 is not None else None

    def env(self) -> dict[str, str]:
        if self.s3 is None:
            return {}
        return {**self.s3.env(),
                "MEMORY_GATEWAY_STORAGE_FILES": f"s3://{self.s3.bucket}/{self.prefix}",
                "MEMORY_GATEWAY_STORAGE_S3_ENDPOINT_URL": self.s3.endpoint_url,
                "MEMORY_GATEWAY_STORAGE_S3_REGION": self.s3.region}

    def name_of(self, uri: str) -> str:
        if self.s3 is None:
            return str(path_of(uri).relative_to(self.root.resolve()))
        start = f"s3://{self.s3.bucket}/{self.prefix}/"
        assert uri.startswith(start), uri
        return unquote(uri[len(start):])

    def names(self) -> set[str]:
        if self.s3 is None:
            root = self.root.resolve()
            return {str(p.relative_to(root)) for p in root.rglob("*") if p.is_file()}
        return set(objects(self.s3, self.prefix))

    def exists(self, name: str) -> bool:
        if self.s3 is None:
            return (self.root / name).is_file()
        try:
            self.client.head_object(Bucket=self.s3.bucket, Key=f"{self.prefix}/{name}")
        except Exception as exc:
            if "404" in str(exc) or "Not Found" in str(exc):
                return False
            raise
        return True

    def read(self, name: str) -> bytes:
        if self.s3 is None:
            return (self.root / name).read_bytes()
        got = self.client.get_object(Bucket=self.s3.bucket, Key=f"{self.prefix}/{name}")
        return bytes(got["Body"].read())


def test_two_gateways_give_a_contested_new_session_exactly_one_owner(
    tmp_path: Path, postgres: PostgresServer, s3_server: S3Server
) -> None:
    """Two gateways on one PostgreSQL and S3 (as deployed behind a load balancer)."""
    url = postgres.create_database()
    shared = {**storage_env(url, tmp_path / "storage"), **Files(tmp_path, s3_server).env()}
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


PNG = b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 512  # 128 KiB: writing it takes a while
USERS = 20
REQUESTS_PER_USER = 10  # 200 in all: adds with a file, uploads, searches
# Requests gateway a answers before it is stopped: the kill lands mid-run, not on the first add.
ANSWERED_BEFORE_KILL = 30
ANSWERED_BY_THE_LATEST = 60  # ... waiting until then for an add caught writing its files
WRITTEN = ("memory_add_base64", "resource_upload")  # sources whose file the gateway stored


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
            "role": "user", "sender_id": user, "timestamp": now_ms() + n, "content": [
                {"type": "text", "text": f"picture {name}"},
                {"type": "image", "name": name, "ext": "png",
                 "base64": base64.b64encode(PNG + name.encode()).decode()}]}]})
    if kind == "upload":
        return client.post("/resources", files={"file": (name, PNG + name.encode())})
    return client.post("/memories/search", json={"query": "picture", "user_id": user})


def owner_pid(owner: str) -> int:
    return int(owner.split("/")[1])


def settle_lines(log: Path) -> list[str]:
    """What a gateway's log says it settled (gateway/app.py logs every intent it settles)."""
    return [line for line in log.read_text().splitlines()
            if "settled" in line or "dropped" in line]


def settled_count(log: Path) -> int:
    """How many intents a gateway's log says it settled, kept or dropped."""
    return sum(int(found) for found in re.findall(r"(?:settled|dropped) (\d+) interrupted",
                                                  log.read_text()))


@pytest.mark.parametrize("files_on", ["disk", "s3"])
def test_a_gateway_killed_mid_add_loses_and_duplicates_nothing(
    tmp_path: Path, postgres: PostgresServer, files_on: str, request: pytest.FixtureRequest
) -> None:
    """Two gateways on one PostgreSQL and one file store (a shared folder, or S3), 200 mixed
    requests from 20 users spread over both. Mid-run, while gateway a holds adds in flight, it
    is frozen (SIGSTOP) for a few of the survivor's recovery rounds: alive, its intents must stay
    pending. Then it is SIGKILLed; requests meant for it afterwards go to the survivor (as a
    load balancer would send them), which settles what a left."""
    files = Files(tmp_path, request.getfixturevalue("s3_server") if files_on == "s3" else None)
    url = postgres.create_database()
    shared = {**storage_env(url, files.root), **files.env()}
    log_b = tmp_path / "b.log"
    sent: list[Sent] = []
    lock = threading.Lock()
    killing, killed = threading.Event(), threading.Event()  # SIGKILL about to go; gone
    # a's intents pending while it was stopped, each with the files it had not stored yet
    frozen_with: dict[str, list[str]] = {}
    left_alone: list[str] = []  # ... and still pending rounds later, before the kill
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

        def held_by_a() -> dict[str, list[str]]:
            """a's pending intents: each one's files that are not stored (yet)."""
            return {str(r["id"]): [files.name_of(m["internal_uri"])
                                   for m in json.loads(r["payload"])["mappings"]
                                   if m["source"] in WRITTEN
                                   and not files.exists(files.name_of(m["internal_uri"]))]
                    for r in databases.rows(url, "SELECT id, owner, payload FROM pending_intents")
                    if owner_pid(r["owner"]) == a.proc.pid}

        def kill_a_mid_add() -> None:
            """Once a has answered some requests: stop it while it holds adds in flight (one
            still writing its files if it can be caught so), let the survivor's recovery run a
            few rounds, then SIGKILL it."""
            while not killed.is_set():
                with lock:
                    answered = sum(s.via == "a" and s.status is not None for s in sent)
                held = held_by_a() if answered >= ANSWERED_BEFORE_KILL else {}
                writing = any(missing for missing in held.values())
                if held and (writing or answered >= ANSWERED_BY_THE_LATEST):
                    a.proc.send_signal(signal.SIGSTOP)
                    held = held_by_a()  # a cannot change them now
                    if not held:  # finished in between: let it run on
                        a.proc.send_signal(signal.SIGCONT)
                        continue
                    frozen_with.update(held)
                    time.sleep(3 * RECOVERY_INTERVAL_S)  # the survivor looks at them, twice
                    left_alone.extend(sorted(i for i in held_by_a() if i in held))
                    settled_before_kill.extend(settle_lines(log_b))
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
        assert frozen_with, "gateway a was never caught holding an add"

        # The survivor settles what the killed gateway left (it is gone: same host, dead pid),
        # and logs it once their folders are gone too.
        deadline = time.monotonic() + 60
        while settled_count(log_b) < len(frozen_with):
            assert time.monotonic() < deadline, "the survivor never settled the leftovers"
            time.sleep(0.2)
        assert databases.rows(url, "SELECT id FROM pending_intents") == []
        assert settled_count(log_b) == len(frozen_with)  # a's, and nothing else

        # What recovery leaves to gc: an upload killed before its intent was recorded.
        orphans_before_gc = files.names()
        gc = subprocess.run([sys.executable, "-m", "gateway", "gc", "--grace-seconds", "0"],
                            env=b.env, cwd=ROOT, capture_output=True, text=True, check=True)

    assert len(sent) == USERS * REQUESTS_PER_USER
    # Alive (if frozen), a kept its intents: the survivor settled nothing while a lived (and
    # settled exactly those, above, once a was dead).
    assert left_alone == sorted(frozen_with)
    print(f"a was stopped holding {frozen_with}")
    assert settled_before_kill == []
    in_flight = [s for s in sent if s.status is None]
    print(f"killed with {len(in_flight)} request(s) in flight: {in_flight}")
    assert all(s.via == "a" for s in in_flight)
    assert [s for s in sent if s.status is not None and s.status >= 500] == []
    assert all(s.status in (200, 201) for s in sent if s.status is not None)

    mappings = databases.rows(
        url, "SELECT user_id, session_id, name, internal_uri, source FROM memory_attachments "
             "WHERE deleted_at IS NULL")
    by_name: dict[str, list[dict[str, object]]] = {}
    for row in mappings:
        by_name.setdefault(str(row["name"]), []).append(dict(row))
    assert all(len(rows) == 1 for rows in by_name.values()), "a mapping was duplicated"
    for s in sent:
        if s.kind == "search":
            continue
        found = by_name.get(s.name, [])
        if s.status is not None:  # answered: its mapping is there
            assert len(found) == 1, f"{s} lost its mapping"
        for row in found:  # kept, whether answered or settled: its file holds the bytes
            assert row["user_id"] == s.user
            assert s.kind == "upload" or row["session_id"] == f"{s.user}-s"
            assert files.read(files.name_of(str(row["internal_uri"]))) == PNG + s.name.encode()

    # Every stored file is a kept mapping's: a dropped intent's folder went with it. The only
    # other files are uploads a was killed writing, before their intent existed; gc takes them.
    kept = {files.name_of(str(row["internal_uri"])) for row in mappings if row["source"] in WRITTEN}
    assert {row["source"] for row in mappings} <= set(WRITTEN)
    cut_short = {s.user for s in in_flight if s.kind == "upload"}
    for name in orphans_before_gc - kept:
        user, kind = name.split("/")[:2]
        assert kind == "resources" and user in cut_short, f"{name} was left behind"
    assert files.names() == kept, gc.stdout
    # An intent a was stopped writing the files of is dropped, never kept (on disk a stopped
    # process cannot finish a file; an S3 server may still complete an upload it fully received).
    if files_on == "disk":
        assert all(name not in kept for missing in frozen_with.values() for name in missing)


def children(pid: int) -> list[int]:
    return sorted(int(p) for p in Path(f"/proc/{pid}/task/{pid}/children").read_text().split())


@pytest.mark.parametrize("database_backend", BACKENDS, indirect=True)
def test_workers_share_one_port_and_a_dead_worker_is_replaced(
    tmp_path: Path, shared_database: str
) -> None:
    url = shared_database  # migrated: the key below is written before the workers start
    with dev_engine(tmp_path / "engine") as engine_url, gateway(
        tmp_path, engine_url, MEMORY_GATEWAY_SERVER_WORKERS="2", **storage_env(url, tmp_path)
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
