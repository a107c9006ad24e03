"""Pass-through benchmark (SPEC §14): requests/s through the gateway ÷ straight to the upstream.

Small JSON POST (a valid EverOS `memory/get`) to a Starlette upstream (bench/starlette_upstream.py),
16 connections, direct and gateway runs in pairs in one run (which of the two goes first
alternates); prints each pair and the median ratio. Target: ≥ 0.5 on the 2-core machine (SPEC
§14). bench/passthrough_alt.py runs variants of the gateway side by side, with CPU time per
request.

`--credential jwt` measures instead what a JWT costs per request against an API key, on one
gateway trusting a JWKS (bench/identity_provider.py), key and JWT runs alternated in pairs:
- cached: the same token again (verified once, then remembered for auth.jwt.token_cache_s);
- verified: auth.jwt.token_cache_s = 0, every request checks the RS256 signature;
- cold kid: one request right after the provider rotated its key, whose new kid makes the
  gateway fetch the JWKS, against one request with a key (median latency of `--rotations`);
- in process: the authenticator's own time per request (key, cached JWT, JWT verified), the
  part of the above that is the credential's, less shaken by a busy machine.

    .venv/bin/python bench/passthrough.py [--rounds 5] [--seconds 5] [--client native|httpx]
        [--credential key|jwt] [--rotations 20]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # this checkout's gateway

from harness import fast_upstream, gateway, load, paired_ratios, starlette_upstream  # noqa: E402,E501
from identity_provider import AUDIENCE, Provider, identity_provider  # noqa: E402

from gateway.config import Settings  # noqa: E402
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


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--connections", type=int, default=16)
    parser.add_argument("--client", default="native", choices=["native", "httpx"])
    parser.add_argument("--credential", default="key", choices=["key", "jwt"],
                        help="key: gateway vs direct; jwt: a JWT's cost against an API key")
    parser.add_argument("--rotations", type=int, default=20)
    args = parser.parse_args()
    return credentials(args) if args.credential == "jwt" else passthrough(args)


if __name__ == "__main__":
    raise SystemExit(main())
