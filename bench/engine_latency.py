"""What the gateway adds in front of the real engine (SPEC §14): EverOS 1.5.1 with the stand-in
model server, add, search and get, through the gateway and straight to the engine.

- One client: each operation is sent through the gateway and straight to the engine in turns
  (`--requests` pairs a round, the order alternating), one keep-alive connection each; the
  added p50 and p99 (the gateway's percentile less the engine's) per round and over all rounds
  pooled, beside the engine's own p50 and p99. The engine's own tail moves by tens of ms from
  round to round (hundreds on a loaded host), so a p99 difference is mostly the engine's noise;
  beside it the gateway's own time per request, from its access log (`duration_ms` less
  `upstream_ms`, LiteLLM's "overhead duration"), which the engine's noise does not reach.
- 8 and 32 clients: requests/s through the gateway ÷ straight, the two runs of each pair
  alternated (bench/harness.py `paired_ratios`), the median of the pairs.

Bars (SPEC §14): with one client the added p50 under 1 ms and p99 under 5 ms for search; at 8
and 32 clients requests/s through the gateway ≥ 0.9× straight. The engine is started as the test
suite starts it (tests/everos_engine.py, `.venv-everos`); the gateway as the other benchmarks
start theirs (bench/harness.py: its shipped log level, a user key). Everything runs on the same
host, so the figures that mean something are the ones inside one run: added latencies and ratios,
not absolute times.

`--baseline CHECKOUT` also runs a gateway from another checkout (another commit, built in
place) in front of the same engine; its requests take turns with this checkout's and the
engine's in the same run, so before and after are measured under the same load.

    .venv/bin/python bench/engine_latency.py [--rounds 5] [--requests 200] [--seconds 3]
        [--clients 8,32] [--ops add,search,get] [--baseline CHECKOUT]
"""

from __future__ import annotations

import argparse
import http.client
import json
import sys
import tempfile
import time
from contextlib import ExitStack
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from harness import gateway_process, load, paired_ratios  # noqa: E402

from tests import everos_engine as engine_process  # noqa: E402
from tests.everos_engine import eventually, everos_engine  # noqa: E402

USER = "bench"
SESSION = "bench-latency"
P50_BAR_MS, P99_BAR_MS, RATE_BAR = 1.0, 5.0, 0.9
JSON_TYPE = {"Content-Type": "application/json"}


def message(text: str, at_ms: int) -> dict[str, Any]:
    return {"role": "user", "sender_id": USER, "timestamp": at_ms, "content": text}


def bodies() -> dict[str, tuple[str, bytes]]:
    """Each operation's path and body. The add goes to the session seeded below, so the
    gateway's owner check finds it claimed (the common case: a conversation's next message)."""
    add = {"session_id": SESSION, "messages": [message("and the harbour at dusk", 1_700_000_000)]}
    search = {"query": "harbour lighthouse", "user_id": USER}
    get = {"user_id": USER, "memory_type": "episode", "page_size": 5}
    return {name: (f"/api/v2/memory/{name}", json.dumps(body).encode())
            for name, body in (("add", add), ("search", search), ("get", get))}


class Client:
    """One keep-alive connection; `post` returns the seconds a request took, answer read."""

    def __init__(self, url: str, headers: dict[str, str]) -> None:
        host, _, port = url.removeprefix("http://").partition(":")
        self.connection = http.client.HTTPConnection(host, int(port), timeout=60)
        self.headers = {**JSON_TYPE, **headers}

    def post(self, path: str, body: bytes) -> float:
        try:
            return self._post(path, body)
        except (BrokenPipeError, ConnectionResetError, http.client.RemoteDisconnected):
            self.connection.close()  # closed while idle (a keep-alive timeout): once more
            return self._post(path, body)

    def _post(self, path: str, body: bytes) -> float:
        started = time.perf_counter()
        self.connection.request("POST", path, body, self.headers)
        answer = self.connection.getresponse()
        data = answer.read()
        elapsed = time.perf_counter() - started
        if answer.status != 200:
            raise RuntimeError(f"{path}: {answer.status} {data[:300]!r}")
        return elapsed


def seed(gateway: Client) -> None:
    """A conversation of the user's, extracted and searchable, claimed through the gateway."""
    at = 1_699_999_000_000
    lines = ["we walked to the lighthouse above the harbour", "the harbour lights came on",
             "a ferry left for the islands", "we had fish soup by the lighthouse"]
    body = {"session_id": SESSION,
            "messages": [message(text, at + i * 1000) for i, text in enumerate(lines)]}
    gateway.post("/api/v2/memory/add", json.dumps(body).encode())
    gateway.post("/api/v2/memory/flush", json.dumps({"session_id": SESSION}).encode())
    path, search = bodies()["search"]

    def found() -> bool | None:
        gateway.connection.request("POST", path, search, gateway.headers)
        answer = json.loads(gateway.connection.getresponse().read())
        return True if answer["data"]["episodes"] else None

    eventually(found, timeout=60, what="the seeded episode")


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(share * len(ordered)))]


def one_client(sides: list[Client], path: str, body: bytes, requests: int,
               deadline_s: float) -> list[list[float]]:
    """Seconds per request on each side (the engine straight last), over up to `requests`
    rounds of one request each whose order rotates, stopping early at `deadline_s`."""
    times: list[list[float]] = [[] for _ in sides]
    stop_at = time.monotonic() + deadline_s
    for number in range(requests):
        for turn in range(len(sides)):
            side = (number + turn) % len(sides)
            times[side].append(sides[side].post(path, body))
        if time.monotonic() > stop_at:
            break
    return times


def added(through: list[float], straight: list[float]) -> tuple[float, float]:
    """(added p50, added p99) in ms: the gateway's percentile less the engine's."""
    return ((percentile(through, 0.5) - percentile(straight, 0.5)) * 1e3,
            (percentile(through, 0.99) - percentile(straight, 0.99)) * 1e3)


def own_times(log: Path, start: int, path: str) -> list[float]:
    """The gateway's own ms per request of `path` logged after byte `start` of its log: its
    access line's `duration_ms` less `upstream_ms` (what it waited for the engine)."""
    time.sleep(0.2)  # the access lines are written in batches every 50 ms
    with open(log, "rb") as lines:
        lines.seek(start)
        found = []
        for line in lines:
            try:
                entry = json.loads(line)
            except ValueError:
                continue
            if entry.get("path") == path and "upstream_ms" in entry:
                found.append(entry["duration_ms"] - entry["upstream_ms"])
    return found


def latencies(args: argparse.Namespace, name: str, gateways: dict[str, Client],
              logs: dict[str, Path], direct: Client, path: str, body: bytes) -> bool:
    """One client: per round and pooled over the rounds (the pooled p99 rests on `--rounds`
    times more requests than a round's), and the gateway's own time from its access log; True
    when the operation has no bar or meets it."""
    names = list(gateways)
    starts = {label: log.stat().st_size for label, log in logs.items()}
    pooled: list[list[float]] = [[] for _ in range(len(names) + 1)]
    for number in range(1, args.rounds + 1):
        times = one_client([*gateways.values(), direct], path, body, args.requests,
                           args.round_seconds)
        for kept, more in zip(pooled, times, strict=True):
            kept += more
        straight = times[-1]
        figures = "  ".join(f"{label} added p50 {p50:6.2f} p99 {p99:6.2f}"
                            for label, (p50, p99) in
                            ((label, added(times[i], straight)) for i, label in enumerate(names)))
        print(f"  {name:6s} round {number}: {figures}  (engine p50 "
              f"{percentile(straight, 0.5) * 1e3:6.2f} p99 {percentile(straight, 0.99) * 1e3:6.2f},"
              f" {len(straight)} requests)", flush=True)
    straight = pooled[-1]
    met = True
    for index, label in enumerate(names):
        p50, p99 = added(pooled[index], straight)
        line = (f"{name:6s} {label}: added p50 {p50:.2f} ms, p99 {p99:.2f} ms over "
                f"{len(straight)} requests (engine p50 {percentile(straight, 0.5) * 1e3:.2f} ms, "
                f"p99 {percentile(straight, 0.99) * 1e3:.2f} ms)")
        if name == "search":
            ok = p50 < P50_BAR_MS and p99 < P99_BAR_MS
            met = met and (ok or index > 0)  # the verdict is this checkout's
            line += f" — {'meets' if ok else 'MISSES'} < {P50_BAR_MS} / < {P99_BAR_MS} ms"
        print(line, flush=True)
        own = own_times(logs[label], starts[label], path)
        if own:  # a checkout older than the access line's `upstream_ms` logs none
            print(f"{name:6s} {label}: the gateway's own time (access log: duration less "
                  f"engine) p50 {percentile(own, 0.5):.2f} ms, p99 {percentile(own, 0.99):.2f} "
                  f"ms over {len(own)} requests", flush=True)
    return met


def throughput(args: argparse.Namespace, connections: int, name: str, engine_url: str,
               gateways: dict[str, str], auth: dict[str, dict[str, str]], path: str,
               body: bytes) -> bool:
    """Requests/s through each gateway ÷ straight at `connections` clients, alternated pairs."""
    met = True
    for index, (label, url) in enumerate(gateways.items()):
        print(f"{connections} clients, {name}, {label}:")
        ratio = paired_ratios(
            args.rounds,
            lambda: load(engine_url + path, body, JSON_TYPE, connections, args.seconds),
            lambda: load(url + path, body, {**JSON_TYPE, **auth[label]},  # noqa: B023
                         connections, args.seconds),
            ("straight", "gateway"))
        ok = ratio >= RATE_BAR
        met = met and (ok or index > 0)
        print(f"{connections} clients {name:6s} {label}: requests/s gateway ÷ straight "
              f"{ratio:.3f} (median) — {'meets' if ok else 'MISSES'} ≥ {RATE_BAR}", flush=True)
    return met


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--requests", type=int, default=200,
                        help="alternated pairs per operation and round, one client")
    parser.add_argument("--round-seconds", type=float, default=20.0,
                        help="a one-client round ends after this long, whatever its count")
    parser.add_argument("--seconds", type=float, default=3.0, help="each load run, many clients")
    parser.add_argument("--clients", default="8,32")
    parser.add_argument("--ops", default="add,search,get")
    parser.add_argument("--baseline", metavar="CHECKOUT",
                        help="also a gateway run from this checkout, in front of the same engine, "
                        "its requests alternated with this one's in the same run")
    args = parser.parse_args()
    engine_process.STARTUP_TIMEOUT_S = 240.0  # the suite's 60 s is short on a loaded host
    ops = args.ops.split(",")
    clients = [int(n) for n in args.clients.split(",") if n]
    paths = bodies()
    verdicts: list[bool] = []
    serves: dict[str, list[str] | None] = {"this checkout": None}
    if args.baseline:
        serves[f"baseline {args.baseline}"] = [
            "-c", f"import sys; sys.path.insert(0, {str(Path(args.baseline).resolve())!r}); "
            "from gateway.cli import main; raise SystemExit(main(['serve']))"]
    with tempfile.TemporaryDirectory(prefix="mgw-bench-engine-") as tmp, \
            everos_engine(Path(tmp)) as engine, ExitStack() as stack:
        urls: dict[str, str] = {}
        auth: dict[str, dict[str, str]] = {}
        clients_of: dict[str, Client] = {}
        logs: dict[str, Path] = {}
        for number, (label, serve) in enumerate(serves.items()):
            logs[label] = Path(tmp) / f"gateway-{number}.log"
            url, key, _ = stack.enter_context(gateway_process(engine.url, None, serve,
                                                              log=logs[label]))
            urls[label], auth[label] = url, {"Authorization": f"Bearer {key}"}
            clients_of[label] = Client(url, auth[label])
            seed(clients_of[label])  # the same session, claimed by each gateway's user
        direct = Client(engine.url, {})
        for name in ops:  # warm-up: connections, caches, the engine's first requests
            one_client([*clients_of.values(), direct], *paths[name], 20, 10.0)
        print(f"one client, {args.rounds} rounds of up to {args.requests} requests on each side "
              "(ms; added = through the gateway less straight):")
        for name in ops:
            verdicts.append(latencies(args, name, clients_of, logs, direct, *paths[name]))
        for connections in clients:
            for name in ops:
                verdicts.append(throughput(args, connections, name, engine.url, urls, auth,
                                           *paths[name]))
    return 0 if all(verdicts) else 1


if __name__ == "__main__":
    raise SystemExit(main())
