"""Pass-through benchmark (SPEC §14): requests/s through the gateway ÷ straight to the upstream.

Small JSON POST (a valid EverOS `memory/get`) to a Starlette upstream (bench/starlette_upstream.py),
16 connections, direct and gateway runs in pairs in one run (which of the two goes first
alternates); prints each pair and the median ratio. Target: ≥ 0.5 on the 2-core machine (SPEC
§14).

    .venv/bin/python bench/passthrough.py [--rounds 5] [--seconds 5] [--client native|httpx]

The same measurement with one thing varied:

- `--limits`: the limiter's cost (SPEC §14: at most 5 %). Requests/s of a gateway with every
  rate limit and the engine-call cap on (set high enough never to refuse: every request still
  draws from its bucket and takes an engine slot) ÷ the same gateway with them off, both in
  front of one fast upstream, in alternated pairs; also the gateway's CPU time per request, on ÷
  off. `--calibrate` runs the same pairs with the limits off on both: the noise a 5 % figure must
  stand out of. `--postgresql`: both gateways on a throw-away PostgreSQL. The limiter alone, in
  process: bench/limiter_cost.py.
- `--variants current,base[,twowrites,asyncio,httpx,granian]`: gateway variants side by side,
  all alive at once in front of one Starlette upstream; each round loads the upstream directly,
  then each variant in turn (the order rotates); per variant the median ratio and the gateway
  process's CPU time per request (utime + stime from /proc ÷ requests), the figure other work on
  the machine disturbs least. `base` is the tree at `--base-tree` (e.g. a `git archive` of an
  older commit); `twowrites` each answer's head and body written separately, as uvicorn does;
  `asyncio` the asyncio loop instead of uvloop; `httpx` `upstream.client = "httpx"`; `granian`
  granian's ASGI server, importable from `GRANIAN_PATH` (a `pip install --target` folder).
  Each variant is served by this script (`--serve-variant NAME`).
- `--credential jwt`: what a JWT costs per request against an API key, on one gateway trusting a
  JWKS (bench/identity_provider.py), key and JWT runs alternated in pairs: cached (the same token
  again), verified (auth.jwt.token_cache_s = 0), a cold kid (one request right after the
  provider rotated its key, against one with a key; median latency of `--rotations`), and the
  authenticator's own time per request in process.

    .venv/bin/python bench/passthrough.py --limits [--calibrate] [--postgresql]
    .venv/bin/python bench/passthrough.py --variants current,base --base-tree DIR
    .venv/bin/python bench/passthrough.py --credential jwt [--rotations 20]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # this checkout's gateway

from harness import (  # noqa: E402
    ROOT,
    cpu_seconds,
    fast_upstream,
    gateway,
    gateway_process,
    load,
    median,
    paired_ratios,
    starlette_upstream,
)
from identity_provider import AUDIENCE, Provider, identity_provider  # noqa: E402

from gateway import cli, logs  # noqa: E402
from gateway.config import Settings, load_settings  # noqa: E402
from gateway.identity.auth import Authenticator, generate_key, hash_secret  # noqa: E402
from gateway.identity.jwt import JwtVerifier  # noqa: E402
from gateway.store import keys  # noqa: E402
from gateway.store.database import database_for, migrate  # noqa: E402

BODY = b'{"user_id": "bench", "memory_type": "episode", "page_size": 5}'
PATH = "/api/v2/memory/get"
TARGET = 0.5
JSON_TYPE = {"Content-Type": "application/json"}


def bearer(token: str) -> dict[str, str]:
    return {**JSON_TYPE, "Authorization": f"Bearer {token}"}


def passthrough(args: argparse.Namespace) -> int:
    with starlette_upstream() as upstream, gateway(
        upstream, {"MEMORY_GATEWAY_UPSTREAM_CLIENT": args.client}
    ) as (gateway_url, key):
        auth = bearer(key)
        load(gateway_url + PATH, BODY, auth, args.connections, 1.0)  # warm-up
        load(upstream + PATH, BODY, JSON_TYPE, args.connections, 1.0)
        result = paired_ratios(
            args.rounds,
            lambda: load(upstream + PATH, BODY, JSON_TYPE, args.connections, args.seconds),
            lambda: load(gateway_url + PATH, BODY, auth, args.connections, args.seconds),
            ("direct", "gateway"),
        )
    verdict = "meets" if result >= TARGET else "MISSES"
    print(f"client={args.client} connections={args.connections} median ratio {result:.3f} "
          f"({verdict} the {TARGET} target)")
    return 0 if result >= TARGET else 1


def jwt_against_key(args: argparse.Namespace, upstream: str, provider: Provider,
                    cache_s: str) -> float:
    env = {"MEMORY_GATEWAY_UPSTREAM_CLIENT": args.client,
           **provider.gateway_env(token_cache_s=cache_s)}
    with gateway(upstream, env) as (url, key):
        with_key, with_jwt = bearer(key), bearer(provider.token("bench"))
        load(url + PATH, BODY, with_key, args.connections, 1.0)  # warm-up
        load(url + PATH, BODY, with_jwt, args.connections, 1.0)
        return paired_ratios(
            args.rounds,
            lambda: load(url + PATH, BODY, with_key, args.connections, args.seconds),
            lambda: load(url + PATH, BODY, with_jwt, args.connections, args.seconds),
            ("key", "jwt"),
        )


def cold_kid(args: argparse.Namespace, upstream: str, provider: Provider) -> float:
    env = {"MEMORY_GATEWAY_UPSTREAM_CLIENT": args.client,
           **provider.gateway_env(jwks_refetch_interval_s="0")}
    with gateway(upstream, env) as (url, key), httpx.Client(base_url=url) as client:

        def timed(headers: dict[str, str]) -> float:
            started = time.perf_counter()
            answer = client.post(PATH, content=BODY, headers=headers)
            elapsed = time.perf_counter() - started
            if answer.status_code != 200:
                raise RuntimeError(f"{answer.status_code}: {answer.text}")
            return elapsed

        for _ in range(50):  # warm-up: connection, key cache, first JWKS fetch
            timed(bearer(key))
            timed(bearer(provider.token("bench")))
        cold, warm = [], []
        for _ in range(args.rotations):
            provider.rotate()
            cold.append(timed(bearer(provider.token("bench"))))
            warm.append(timed(bearer(key)))
        print(f"cold kid: median {statistics.median(cold) * 1e3:.2f} ms, key "
              f"{statistics.median(warm) * 1e3:.2f} ms over {args.rotations} rotations")
        return statistics.median(cold) / statistics.median(warm)


async def authenticator_cost(provider: Provider) -> dict[str, float]:
    """Microseconds per `principal_for` call: an API key, a cached JWT, a JWT verified anew."""
    with tempfile.TemporaryDirectory(prefix="mgw-bench-") as tmp:
        settings = Settings().with_values(
            upstream={"base_url": "http://127.0.0.1:9"},
            storage={"root": f"{tmp}/storage", "database": f"{tmp}/gw.db"})
        migrate(settings.storage.database)
        new = generate_key("bench")
        jwt_settings = settings.with_values(auth_jwt={
            "jwks_url": provider.url + "/jwks", "audience": AUDIENCE}).auth_jwt
        db = database_for(settings.storage.database)
        await db.open()
        await keys.insert(db, new.key_id, new.user_id, hash_secret(new.secret))
        cached = Authenticator(db, 5.0, JwtVerifier(jwt_settings))
        fresh = Authenticator(db, 5.0, JwtVerifier(replace(jwt_settings, token_cache_s=0)))
        token = provider.token("bench")
        runs = {"key": (cached, new.token), "jwt cached": (cached, token),
                "jwt verified": (fresh, token)}
        best = dict.fromkeys(runs, float("inf"))
        for _ in range(5):  # alternated; the best of five rounds of 2,000 calls each
            for name, (authenticator, credential) in runs.items():
                started = time.perf_counter()
                for _ in range(2000):
                    await authenticator.principal_for(f"Bearer {credential}")
                best[name] = min(best[name], (time.perf_counter() - started) / 2000 * 1e6)
        await db.close()
        return best


def credentials(args: argparse.Namespace) -> int:
    with identity_provider() as provider:
        cost = asyncio.run(authenticator_cost(provider))
    print("in process, per authentication: " + ", ".join(
        f"{name} {micros:.1f} µs" for name, micros in cost.items()))
    with fast_upstream() as upstream, identity_provider() as provider:
        print("JWT, cached token:")
        cached = jwt_against_key(args, upstream, provider, "60")
        print("JWT, verified on every request (auth.jwt.token_cache_s = 0):")
        verified = jwt_against_key(args, upstream, provider, "0")
        cold = cold_kid(args, upstream, provider)
    print(f"client={args.client} connections={args.connections} requests/s JWT/key: "
          f"cached {cached:.3f}, verified every request {verified:.3f}; "
          f"latency of a cold-kid request / a key request {cold:.2f}; in process JWT/key: "
          f"cached {cost['jwt cached'] / cost['key']:.2f}, verified "
          f"{cost['jwt verified'] / cost['key']:.2f}")
    return 0


# --limits: limits that never refuse the benchmark's load (every request still draws from its
# bucket and takes an engine slot).
LIMITS_TARGET = 0.95
LIMITS_ON = {"MEMORY_GATEWAY_RATE_LIMITS_REQUESTS_PER_S": "1000000",
             "MEMORY_GATEWAY_RATE_LIMITS_BURST": "1000000",
             "MEMORY_GATEWAY_RATE_LIMITS_ENGINE_CONCURRENCY_PER_USER": "1000"}


def limits(args: argparse.Namespace) -> int:
    if not args.postgresql:
        return limiter_cost(args)
    sys.path.insert(0, str(ROOT))
    from tests import postgres_server

    server = postgres_server.start()
    try:
        return limiter_cost(args, lambda: {
            "MEMORY_GATEWAY_STORAGE_DATABASE": server.create_database()})
    finally:
        server.stop()


def limiter_cost(args: argparse.Namespace,
                 database: Callable[[], dict[str, str]] = dict) -> int:
    """Limits on ÷ off, as requests/s and as the gateway's CPU time per request: the second
    holds steady on a machine other work shares (it counts only the gateway's own cycles)."""
    client = {"MEMORY_GATEWAY_UPSTREAM_CLIENT": args.client}
    on = {} if args.calibrate else LIMITS_ON
    off_env, on_env = {**client, **database()}, {**client, **on, **database()}
    # each side's CPU time per request, one entry per round: the i-th of each form a pair
    cpu_per_request: dict[str, list[float]] = {"off": [], "on": []}
    with fast_upstream() as upstream, \
            gateway_process(upstream, off_env) as (off_url, off_key, off_proc), \
            gateway_process(upstream, on_env) as (on_url, on_key, on_proc):

        def run(name: str, url: str, key: str, pid: int, seconds: float) -> float:
            before = cpu_seconds(pid)
            rate = load(url + PATH, BODY, bearer(key), args.connections, seconds)
            cpu_per_request[name].append((cpu_seconds(pid) - before) / (rate * seconds))
            print(f"  CPU per request: {name} {cpu_per_request[name][-1] * 1e6:.0f} us")
            return rate

        run("off", off_url, off_key, off_proc.pid, 1.0)  # warm-up
        run("on", on_url, on_key, on_proc.pid, 1.0)
        for runs in cpu_per_request.values():
            runs.clear()
        labels = ("limits off", "limits off too" if args.calibrate else "limits on")
        result = paired_ratios(
            args.rounds,
            lambda: run("off", off_url, off_key, off_proc.pid, args.seconds),
            lambda: run("on", on_url, on_key, on_proc.pid, args.seconds),
            labels)
    cpu = median([on / off for on, off in zip(cpu_per_request["on"], cpu_per_request["off"],
                                               strict=True)])
    figures = (f"median requests/s ratio {result:.3f}; median CPU per request ratio {cpu:.3f} "
               f"({100 * (cpu - 1):+.1f} %)")
    if args.calibrate:
        print(f"client={args.client} connections={args.connections} two gateways, limits off "
              f"on both (the noise of this sitting): {figures}")
        return 0
    verdict = "meets" if result >= LIMITS_TARGET else "MISSES"
    print(f"client={args.client} connections={args.connections} limits on ÷ off: {figures}; "
          f"{verdict} the {LIMITS_TARGET} requests/s target")
    return 0 if result >= LIMITS_TARGET else 1


# --variants: the search benchmarks' settings (bench/harness.py), which the pass-through does
# not use, are left out for every variant, so that a tree older than them (`base`) starts and
# all run alike.
SEARCH_SETTINGS: dict[str, str | None] = {"MEMORY_GATEWAY_UPSTREAM_ALLOW_PATHS": None,
                                          "MEMORY_GATEWAY_UPSTREAM_FETCHABLE_HOSTS": None}


def tree_cpu_seconds(pid: int) -> float:
    """CPU time of a process and its children (granian serves from a worker process)."""
    children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    return cpu_seconds(pid) + sum(tree_cpu_seconds(int(child)) for child in children)


def variant(name: str, base_tree: Path | None
            ) -> tuple[list[str] | None, dict[str, str | None]]:
    """(the command after the interpreter, extra environment) of a variant."""
    if name == "current":
        return None, SEARCH_SETTINGS
    if name == "base":
        if base_tree is None:
            raise SystemExit("the base variant needs --base-tree")
        return ["-c", f"import sys; sys.path.insert(0, {str(base_tree)!r}); "
                      "from gateway.cli import main; raise SystemExit(main(['serve']))"], \
            SEARCH_SETTINGS
    if name == "httpx":
        return None, {**SEARCH_SETTINGS, "MEMORY_GATEWAY_UPSTREAM_CLIENT": "httpx"}
    launcher = [str(Path(__file__).resolve()), "--serve-variant", name]
    if name in ("twowrites", "asyncio"):
        return launcher, SEARCH_SETTINGS
    if name == "granian":
        return launcher, {**SEARCH_SETTINGS, "PYTHONPATH": os.environ.get("GRANIAN_PATH", "")}
    raise SystemExit(f"unknown variant {name!r}")


@contextmanager
def gateways(names: list[str], upstream: str,
             base_tree: Path | None) -> Iterator[dict[str, tuple[str, str, int]]]:
    with ExitStack() as stack:
        running = {}
        for name in names:
            serve, env = variant(name, base_tree)
            url, key, proc = stack.enter_context(gateway_process(upstream, env, serve))
            running[name] = (url, key, proc.pid)
        yield running


def variants(args: argparse.Namespace) -> int:
    names = args.variants.split(",")
    ratios: dict[str, list[float]] = {name: [] for name in names}
    cpu: dict[str, list[float]] = {name: [] for name in names}
    with starlette_upstream() as upstream, gateways(names, upstream, args.base_tree) as running:
        def run(name: str, seconds: float) -> tuple[float, float]:
            url, key, pid = running[name]
            before = tree_cpu_seconds(pid)
            rate = load(url + PATH, BODY, bearer(key), args.connections, seconds)
            used = tree_cpu_seconds(pid) - before
            return rate, used / (rate * seconds)

        for name in names:
            run(name, 1.0)  # warm-up
        load(upstream + PATH, BODY, JSON_TYPE, args.connections, 1.0)
        for round_no in range(1, args.rounds + 1):
            direct = load(upstream + PATH, BODY, JSON_TYPE, args.connections, args.seconds)
            shift = round_no % len(names)
            line = [f"round {round_no}: direct {direct:7.0f}"]
            for name in names[shift:] + names[:shift]:
                rate, per_request = run(name, args.seconds)
                ratios[name].append(rate / direct)
                cpu[name].append(per_request)
                line.append(f"{name} {rate:7.0f} ({rate / direct:.3f}, {per_request * 1e6:.0f} µs)")
            print("  ".join(line), flush=True)
    first = names[0]
    for name in names:
        ratio, per_request = statistics.median(ratios[name]), statistics.median(cpu[name])
        relative = "" if name == first else (
            f"  CPU/request ÷ {first} "
            f"{statistics.median(c / f for c, f in zip(cpu[name], cpu[first], strict=True)):.3f}")
        print(f"{name:10s} median ratio {ratio:.3f}  CPU {per_request * 1e6:.1f} µs/request"
              f"{relative}")
    return 0


def granian_app() -> Any:
    """The app factory granian calls in its worker (`--serve-variant granian`)."""
    from gateway.app import create_app

    settings = load_settings()
    logs.configure(settings.server.log_level, settings.server.log_format)
    return create_app(settings)


def serve_variant(which: str) -> int:
    """`memory-gateway serve` with one thing changed; settings from the environment."""
    if which == "twowrites":
        from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

        import gateway.serving.protocol

        gateway.serving.protocol.OneWriteProtocol = HttpToolsProtocol  # type: ignore[misc,assignment]
    elif which == "asyncio":
        cli._run_async = asyncio.run
    elif which == "granian":
        settings = load_settings()
        os.execv(sys.executable, [
            sys.executable, "-m", "granian", "--interface", "asgi", "--factory",
            "--host", settings.server.host, "--port", str(settings.server.port),
            "--workers", "1", "--runtime-threads", "1", "--loop", "uvloop", "--http", "1",
            "--no-ws", "--no-access-log",
            "--working-dir", str(Path(__file__).resolve().parent), "passthrough:granian_app",
        ])
    else:
        raise SystemExit(f"unknown variant {which!r}")
    return cli.main(["serve"])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--connections", type=int, default=16)
    parser.add_argument("--client", default="native", choices=["native", "httpx"])
    parser.add_argument("--credential", default="key", choices=["key", "jwt"],
                        help="key: gateway vs direct; jwt: a JWT's cost against an API key")
    parser.add_argument("--rotations", type=int, default=20)
    parser.add_argument("--limits", action="store_true",
                        help="limits on ÷ off, two gateways in front of one fast upstream")
    parser.add_argument("--calibrate", action="store_true",
                        help="with --limits: limits off on both gateways (this sitting's noise)")
    parser.add_argument("--postgresql", action="store_true",
                        help="with --limits: both gateways on a throw-away PostgreSQL")
    parser.add_argument("--variants", help="gateway variants side by side, e.g. current,base")
    parser.add_argument("--base-tree", type=Path, help="the tree the `base` variant serves")
    parser.add_argument("--serve-variant", metavar="NAME", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve_variant:
        return serve_variant(args.serve_variant)
    if args.limits or args.calibrate:
        return limits(args)
    if args.variants:
        return variants(args)
    return credentials(args) if args.credential == "jwt" else passthrough(args)


if __name__ == "__main__":
    raise SystemExit(main())
