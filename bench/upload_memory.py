"""Upload memory benchmark (SPEC §14): a 1 GiB `/resources` upload must grow RSS by < 16 MiB,
on local disk and on S3.

Streams a multipart body of --size MiB (default 1024) to a gateway process in front of a fast
fake engine, sampling the gateway's resident set size every 20 ms; prints the baseline, the
peak and the growth (after one 6 MiB warm-up upload). `--store s3` puts the files on a SeaweedFS
server started for the run (tests/s3_server.py); `--store both` measures one after the other.

    .venv/bin/python bench/upload_memory.py [--size 1024] [--store disk|s3|both]
"""

from __future__ import annotations

import argparse
import secrets
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from harness import fast_upstream, gateway_process  # noqa: E402

from tests.s3_server import seaweedfs  # noqa: E402

MIB = 1024 * 1024
TARGET_MIB = 16


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError("no VmRSS")


def multipart(size: int) -> Iterator[bytes]:
    yield (b"--BENCHBOUNDARY\r\nContent-Disposition: form-data; name=\"file\"; "
           b"filename=\"big.bin\"\r\nContent-Type: application/octet-stream\r\n\r\n")
    chunk = bytes(range(256)) * 4096  # 1 MiB
    for _ in range(size // MIB):
        yield chunk
    yield b"\r\n--BENCHBOUNDARY--\r\n"


def measure(store: str, size_mib: int) -> float:
    """Upload once with files on `store`; print the figures and return the RSS growth."""
    size = size_mib * MIB
    extra = {"MEMORY_GATEWAY_LIMITS_MAX_UPLOAD_BYTES": str(size + MIB)}
    with ExitStack() as stack:
        if store == "s3":
            server = stack.enter_context(seaweedfs("gateway-bench"))
            extra.update(server.env())
            extra.update({
                "MEMORY_GATEWAY_STORAGE_FILES": f"s3://{server.bucket}/b-{secrets.token_hex(4)}",
                "MEMORY_GATEWAY_STORAGE_S3_ENDPOINT_URL": server.endpoint_url,
            })
        upstream = stack.enter_context(fast_upstream())
        url, key, proc = stack.enter_context(gateway_process(upstream, extra))
        # One small multipart-sized upload first: what the first use of a store loads once
        # (the S3 client's operation models, its connection pool) is not the upload's growth.
        warm = httpx.post(url + "/resources", files={"file": ("warm.bin", b"w" * 6 * MIB)},
                          headers={"Authorization": f"Bearer {key}"}, timeout=120)
        warm.raise_for_status()
        baseline = rss_mib(proc.pid)
        peak = baseline
        done = threading.Event()

        def sample() -> None:
            nonlocal peak
            while not done.is_set():
                peak = max(peak, rss_mib(proc.pid))
                time.sleep(0.02)

        sampler = threading.Thread(target=sample)
        sampler.start()
        started = time.monotonic()
        try:
            response = httpx.post(
                url + "/resources", content=multipart(size), timeout=900,
                headers={"Authorization": f"Bearer {key}",
                         "Content-Type": "multipart/form-data; boundary=BENCHBOUNDARY"},
            )
        finally:
            done.set()
            sampler.join()
        elapsed = time.monotonic() - started
        response.raise_for_status()
        assert response.json()["size"] == size, response.text
    growth = peak - baseline
    verdict = "meets" if growth < TARGET_MIB else "MISSES"
    print(f"{store}: uploaded {size_mib} MiB in {elapsed:.1f} s ({size_mib / elapsed:.0f} MiB/s); "
          f"RSS baseline {baseline:.1f} MiB, peak {peak:.1f} MiB, growth {growth:.1f} MiB "
          f"({verdict} the < {TARGET_MIB} MiB target)", flush=True)
    return growth


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--size", type=int, default=1024, help="upload size in MiB")
    parser.add_argument("--store", choices=("disk", "s3", "both"), default="disk",
                        help="where the gateway keeps files")
    args = parser.parse_args()
    stores = ("disk", "s3") if args.store == "both" else (args.store,)
    growths = [measure(store, args.size) for store in stores]
    return 0 if all(growth < TARGET_MIB for growth in growths) else 1


if __name__ == "__main__":
    raise SystemExit(main())
