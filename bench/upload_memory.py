"""Upload memory benchmark (SPEC §14): a 1 GiB `/resources` upload must grow RSS by < 64 MiB.

Streams a multipart body of --size MiB (default 1024) to a gateway process in front of a fast
fake engine, sampling the gateway's resident set size every 20 ms; prints the baseline, the
peak and the growth.

    .venv/bin/python bench/upload_memory.py [--size 1024]
"""

from __future__ import annotations

import argparse
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent))

from harness import fast_upstream, gateway_process  # noqa: E402

MIB = 1024 * 1024
TARGET_MIB = 64


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


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--size", type=int, default=1024, help="upload size in MiB")
    args = parser.parse_args()
    size = args.size * MIB
    extra = {"MEMORY_GATEWAY_LIMITS_MAX_UPLOAD_BYTES": str(size + MIB)}
    with fast_upstream() as upstream, gateway_process(upstream, extra) as (url, key, proc):
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
                url + "/resources", content=multipart(size), timeout=600,
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
    print(f"uploaded {args.size} MiB in {elapsed:.1f} s ({args.size / elapsed:.0f} MiB/s); "
          f"RSS baseline {baseline:.1f} MiB, peak {peak:.1f} MiB, growth {growth:.1f} MiB "
          f"({verdict} the < {TARGET_MIB} MiB target)")
    return 0 if growth < TARGET_MIB else 1


if __name__ == "__main__":
    raise SystemExit(main())
