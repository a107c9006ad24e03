"""JSON body memory benchmark (SPEC §13): a route's peak memory as a multiple of its body.

Sends one large body made of small JSON objects (default 59 MB) to a gateway process in front
of the fast fake engine, on `/api/v2/memory/add` (the add path: identity walk, attachment
check), on a passed-through route (`/api/v2/memory/get`, whose filter tree is walked) and on the
gateway's own `/memories/search` (the same filter tree) and `/memories/add`, each to a fresh
gateway process. Prints the process's peak resident set before and after the request (the
kernel's high-water mark, `VmHWM`) and the growth ÷ the body's size: the multiple.

    .venv/bin/python bench/body_memory.py [--mb 59]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent))

from harness import fast_upstream, gateway_process  # noqa: E402

MB = 1_000_000


def peak_rss(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    raise RuntimeError("no VmHWM")


def small_objects(size: int) -> str:
    """A JSON array of small objects, about `size` bytes."""
    one = '{"type":"text","text":"x"}'
    return "[" + ",".join([one] * (size // (len(one) + 1))) + "]"


def add_body(size: int) -> bytes:
    message = {"role": "user", "sender_id": "bench", "timestamp": 1_700_000_000_000,
               "content": "@@ITEMS@@"}
    text = json.dumps({"session_id": "bench-s", "messages": [message]})
    return text.replace('"@@ITEMS@@"', small_objects(size)).encode()


def get_body(size: int, distinct: bool = False) -> bytes:
    one = '{"session_id":"x"}'
    count = size // (len(one) + 1)
    if distinct:  # half as many conditions, each naming a session of its own
        count //= 2
        nodes = ",".join(f'{{"session_id":"x{index:08d}"}}' for index in range(count))
    else:
        nodes = ",".join([one] * count)
    return (f'{{"user_id":"bench","memory_type":"episode","filters":{{"AND":[{nodes}]}}}}'
            ).encode()


def text_body(size: int) -> bytes:
    return add_body(0).replace(b"[]", b'"' + b"x" * size + b'"')


def refused_body(size: int) -> bytes:
    return add_body(size).replace(b"}]}]}", b'},{"type":"video"}]}]}')


def surrogate_body(size: int) -> bytes:
    return add_body(size).replace(b'"text":"x"}', b'"text":"\\ud800"}', 1)


def measure(path: str, body: bytes, extra_env: dict[str, str]) -> tuple[int, int, int]:
    """(peak before, peak after, status) for one request of `body` to a fresh gateway."""
    with fast_upstream() as upstream, gateway_process(upstream, extra_env) as (url, key, proc):
        headers = {"Authorization": f"Bearer {key}", "Content-Type": "application/json"}
        with httpx.Client(timeout=300) as client:
            client.get(url + "/healthz")
            client.post(url + path, content=b'{"session_id":"w","messages":[]}',
                        headers=headers)  # warm-up: imports and first-request caches
            time.sleep(0.2)
            before = peak_rss(proc.pid)
            status = client.post(url + path, content=body, headers=headers).status_code
            time.sleep(0.2)
            return before, peak_rss(proc.pid), status


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--mb", type=float, default=59.0)
    parser.add_argument("--more", action="store_true", help="bodies of other shapes too")
    args = parser.parse_args()
    size = int(args.mb * MB)
    limits = {"MEMORY_GATEWAY_LIMITS_MAX_BODY_BYTES": str(2 * size),
              "MEMORY_GATEWAY_LIMITS_MAX_PARSING_BYTES": str(2 * size)}
    add, get = "/api/v2/memory/add", "/api/v2/memory/get"
    cases = [("add", add, add_body(size)), ("pass-through", get, get_body(size)),
             ("own search", "/memories/search", get_body(size)),
             ("own add", "/memories/add", add_body(size))]
    if args.more:
        cases += [("long text", add, text_body(size)), ("refused add", add, refused_body(size)),
                  ("surrogate", add, surrogate_body(size)),
                  ("distinct ids", get, get_body(size, distinct=True))]
    for label, path, body in cases:
        before, after, status = measure(path, body, limits)
        growth = max(0, after - before)
        print(f"{label:13s} body {len(body) / MB:6.1f} MB  status {status}  peak RSS "
              f"{before / MB:7.1f} -> {after / MB:7.1f} MB  growth {growth / MB:7.1f} MB  "
              f"multiple {growth / len(body):5.2f}x")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
