"""The fetch guard (gateway/attachments/fetch_guard.py): which http(s) URIs the engine and the job
service may be sent, judged as tables and properties, then the guard with its resolvers."""

from __future__ import annotations

import asyncio
from ipaddress import IPv4Address, IPv6Address

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gateway.attachments.fetch_guard import (
    MAX_NAMES_PER_CHECK,
    FetchableHosts,
    FetchGuard,
    Refused,
    Resolve,
    judge_addresses,
    judge_uri,
    loose_ipv4,
    refusal,
    system_addresses,
    url_strings,
)
from gateway.config import ConfigError, Settings, load_settings
from gateway.errors import UriNotAllowed
from tests.fake_dns import PUBLIC_ADDRESS, SUITE_DNS, FakeDns

NOTHING = FetchableHosts()

REFUSED = [
    # loopback, in every spelling a C resolver reads
    "http://127.0.0.1:8080/page.html", "http://127.1/", "http://2130706433/",
    "http://0177.0.0.1/", "http://0x7f000001/", "http://0x7f.0.0.1/", "http://017700000001/",
    "http://0x7F.1/", "http://127.0.0.1./", "http://[::1]/", "http://[0:0:0:0:0:0:0:1]/",
    "HTTPS://127.0.0.1/", "http://user:pw@127.0.0.1/", "http://１２７.０.０.１/",
    # IPv6 forms that embed a loopback, private or metadata IPv4 address
    "http://[::ffff:127.0.0.1]/", "http://[::ffff:7f00:1]/", "http://[::127.0.0.1]/",
    "http://[64:ff9b::7f00:1]/", "http://[64:ff9b::a9fe:a9fe]/", "http://[2002:7f00:1::]/",
    "http://[::ffff:10.0.0.1]/",
    # private, shared, link-local and the metadata services
    "http://10.1.2.3/", "http://172.16.0.1/", "http://172.31.255.255/", "http://192.168.1.1/",
    "http://100.64.0.1/", "http://100.100.100.200/latest/meta-data/",
    "http://169.254.169.254/latest/meta-data/", "http://[fd00:ec2::254]/latest/meta-data/",
    "http://[fc00::1]/", "http://[fe80::1]/", "http://[fe80::1%25eth0]/", "http://168.63.129.16/",
    "http://metadata.google.internal/computeMetadata/v1/", "http://metadata/",
    "http://localhost/", "http://LOCALHOST./", "http://api.localhost/", "http://ⓛocalhost/",
    # multicast, unspecified, broadcast, reserved, documentation, benchmarking
    "http://224.0.0.1/", "http://[ff02::1]/", "http://0.0.0.0/", "http://0/", "http://[::]/",
    "http://255.255.255.255/", "http://240.0.0.1/", "http://192.0.2.1/",
    "http://198.51.100.7/", "http://203.0.113.9/", "http://198.18.0.1/", "http://[2001:db8::1]/",
    "http://[100::1]/", "http://[2001::1]/",
    # numeric hosts that are no address, and authorities parsers read differently
    "http://1.2.3.08/", "http://1.2.3.4.5/", "http://999.0.0.1/", "http://example.com\\@127.0.0.1/",
    "http://a@b@127.0.0.1/", "http://127.0.0.1 /", "http://127.0.0.1\t/", "http://[::1/",
    "http://127.0.0.1:port/", "http:///etc/passwd", "http://exa%6dple.com/",
]
FETCHABLE = [
    "https://93.184.215.14/a.png", "http://8.8.8.8:8080/x", "https://[2606:4700:4700::1111]/",
    "http://[::ffff:8.8.8.8]/", "https://[2002:808:808::]/", "https://evil.example:80@8.8.4.4/",
    # not http(s): check_uris judges these
    "s3://bucket/key", "file:///etc/passwd", "resource://res_1", "ftp://127.0.0.1/",
]


@pytest.mark.parametrize("uri", REFUSED)
def test_non_public_hosts_in_any_spelling_are_refused(uri: str) -> None:
    assert isinstance(judge_uri(uri, NOTHING), Refused), uri


@pytest.mark.parametrize("uri", FETCHABLE)
def test_public_addresses_and_other_schemes_pass(uri: str) -> None:
    assert judge_uri(uri, NOTHING) is None, uri


@pytest.mark.parametrize(("uri", "name", "port"), [
    ("https://cdn.example/a.png", "cdn.example", 443),
    ("http://CDN.Example.:8080/a.png", "cdn.example", 8080),
    ("http://bücher.example/", "xn--bcher-kva.example", 80),
])
def test_names_are_judged_by_what_they_resolve_to(uri: str, name: str, port: int) -> None:
    assert judge_uri(uri, NOTHING) == Resolve(name, port)


def test_the_refusal_names_an_odd_spelling_by_its_address() -> None:
    verdict = judge_uri("http://2130706433/", NOTHING)
    assert isinstance(verdict, Refused) and "127.0.0.1" in verdict.why


@given(st.integers(0, 2**32 - 1), st.lists(st.sampled_from(["dec", "oct", "hex"]),
                                             min_size=4, max_size=4), st.integers(1, 4))
def test_loose_ipv4_reads_every_inet_aton_spelling(number: int, bases: list[str],
                                                    parts: int) -> None:
    """Any split of the address into 1–4 parts, each in decimal, octal or hex."""
    octets = list(IPv4Address(number).packed)
    values = [*octets[:parts - 1], int.from_bytes(bytes(octets[parts - 1:]), "big")]
    spelled = ".".join({"dec": str, "oct": lambda v: f"0{v:o}", "hex": hex}[base](value)
                       for base, value in zip(bases, values, strict=False))
    assert loose_ipv4(spelled) == IPv4Address(number)
    verdict = judge_uri(f"http://{spelled}/", NOTHING)
    if spelled == str(IPv4Address(number)) and refusal(IPv4Address(number)) is None:
        assert verdict is None, spelled
    else:  # a non-public address, or any address spelled unusually
        assert isinstance(verdict, Refused), spelled


@given(st.sampled_from(["127.0.0.0/8", "10.0.0.0/8", "169.254.0.0/16", "192.168.0.0/16",
                        "100.64.0.0/10", "0.0.0.0/8", "224.0.0.0/4"]), st.integers(0, 2**24),
       st.sampled_from(["::ffff:{}", "::{}", "64:ff9b::{}"]))
def test_ipv6_forms_of_refused_ipv4_addresses_are_refused(block: str, offset: int,
                                                          form: str) -> None:
    from ipaddress import IPv4Network
    network = IPv4Network(block)
    address = network[offset % network.num_addresses]
    assert refusal(IPv6Address(form.format(address))) is not None
    assert isinstance(judge_uri(f"http://[{form.format(address)}]/", NOTHING), Refused)


def test_all_addresses_of_a_name_must_be_public() -> None:
    assert judge_addresses("cdn.example", 443, [PUBLIC_ADDRESS], NOTHING)[0] is None
    for addresses in ([], None, [PUBLIC_ADDRESS, "10.0.0.1"], ["::1"], ["::ffff:127.0.0.1"],
                      ["fe80::1%eth0"], ["not an address"]):
        refused, why = judge_addresses("cdn.example", 443, addresses, NOTHING)
        assert refused is not None, addresses
        # The same words whatever the reason: the resolver is no oracle of internal names.
        assert refused.why == "does not resolve to public addresses only"


# --- upstream.fetchable_hosts ---------------------------------------------------------------------

def test_fetchable_hosts_are_names_ports_addresses_and_networks() -> None:
    allowed = FetchableHosts.parse(["Files.Internal", "media.internal:8443", "10.2.0.0/16",
                                    "192.168.5.5", "[fd00::7]:8080", "fc00::/7"])
    assert judge_uri("http://files.internal:9999/a.png", allowed) is None
    assert judge_uri("https://media.internal:8443/a.png", allowed) is None
    assert judge_uri("https://media.internal/a.png", allowed) == Resolve("media.internal", 443)
    assert judge_uri("http://10.2.3.4/a.png", allowed) is None
    assert isinstance(judge_uri("http://10.3.0.1/a.png", allowed), Refused)
    assert judge_uri("http://192.168.5.5:81/", allowed) is None
    assert judge_uri("http://[fd00::7]:8080/", allowed) is None
    assert judge_uri("http://[fd00::7]:8081/", allowed) is None  # fc00::/7, any port
    # A network lets names resolving into it pass too.
    assert judge_addresses("nas.lan", 80, ["10.2.9.9"], allowed)[0] is None
    assert judge_addresses("nas.lan", 80, ["10.2.9.9", "10.9.9.9"], allowed)[0] is not None


@pytest.mark.parametrize("entry", ["10.0.0.1/8", "10.0.0.0/33", "fd00::zz/8", "[fd00::1",
                                   "http://files.internal", "files.internal:0",
                                   "files.internal:99999", "*.corp.example", "", " ", "127.1",
                                   "a b", "files internal:80"])
def test_a_bad_fetchable_host_stops_the_guard_with_its_name(entry: str) -> None:
    # The settings hold the list as written; the guard reads it (config imports no domain).
    settings = Settings().with_values(upstream={"fetchable_hosts": [entry]})
    with pytest.raises(ConfigError, match="upstream.fetchable_hosts"):
        FetchGuard.from_settings(settings.upstream)


def test_a_bad_fetchable_host_stops_serve_and_fails_doctor(tmp_path, capsys) -> None:
    from gateway.cli import main
    from gateway.ops.doctor import FAIL, check_settings

    config = tmp_path / "gateway.toml"
    config.write_text('[upstream]\nfetchable_hosts = ["10.0.0.1/8"]\n')
    assert main(["serve", "--config", str(config)]) == 2
    assert "upstream.fetchable_hosts" in capsys.readouterr().err
    checks = list(check_settings(load_settings(config, {}), str(config), {}))
    assert [c.name for c in checks if c.level == FAIL] == ["fetchable hosts"]


def test_fetch_settings_come_from_the_file_and_the_environment(tmp_path) -> None:
    config = tmp_path / "gateway.toml"
    config.write_text('[upstream]\nfetch_guard = false\nfetchable_hosts = ["files.internal"]\n')
    settings = load_settings(config, {})
    assert (settings.upstream.fetch_guard, settings.upstream.fetchable_hosts) == (
        False, ["files.internal"])
    settings = load_settings(None, {"MEMORY_GATEWAY_UPSTREAM_FETCHABLE_HOSTS": '["10.0.0.0/8"]'})
    assert settings.upstream.fetchable_hosts == ["10.0.0.0/8"]
    assert Settings().upstream.fetch_guard is True  # on unless switched off
    settings = load_settings(None, {"MEMORY_GATEWAY_UPSTREAM_FETCHABLE_HOSTS": '["10.0.0.1/8"]'})
    with pytest.raises(ConfigError, match="fetchable_hosts"):
        FetchGuard.from_settings(settings.upstream)


# --- the guard ----------------------------------------------------------------------------------

def guard(dns: FakeDns | None = None, *allowed: str) -> FetchGuard:
    return FetchGuard(True, FetchableHosts.parse(allowed), (dns or SUITE_DNS).resolve)


async def refused_field(check: FetchGuard, *uris: str) -> str | None:
    try:
        await check.check([(f"messages[0].content[{i}].uri", uri) for i, uri in enumerate(uris)])
    except UriNotAllowed as exc:
        assert exc.error_code == "uri_not_allowed" and exc.status == 422
        return exc.field
    return None


async def test_names_resolving_to_internal_addresses_or_nowhere_are_refused() -> None:
    for uri in ("https://intranet.test/a.png", "http://metadata.test/latest/",
                "https://half-internal.test/a.png", "http://mapped.test/",
                "https://nowhere.invalid/a.png"):
        assert await refused_field(guard(), uri) == "messages[0].content[0].uri", uri
    assert await refused_field(guard(), "https://cdn.example/a.png",
                               "https://dual.test/b.png") is None


async def test_the_first_refused_uri_in_body_order_is_named() -> None:
    field = await refused_field(guard(), "https://cdn.example/a.png",
                                "https://intranet.test/b.png", "http://127.0.0.1/c.png")
    assert field == "messages[0].content[1].uri"


async def test_each_name_is_resolved_once_per_check() -> None:
    dns = FakeDns({})
    assert await refused_field(guard(dns), "https://cdn.example/a.png",
                               "https://CDN.example/b.png", "https://cdn.example./c.png") is None
    assert dns.asked == ["cdn.example"]


async def test_allowlisted_names_are_not_resolved() -> None:
    dns = FakeDns({"files.internal": ["10.0.0.9"]})
    assert await refused_field(guard(dns, "files.internal"), "http://files.internal/a") is None
    assert dns.asked == []
    assert await refused_field(guard(dns), "http://files.internal/a") is not None


async def test_a_resolver_that_does_not_answer_in_time_is_a_refusal() -> None:
    async def silent(name: str, port: int) -> list[str]:
        await asyncio.sleep(10)
        return [PUBLIC_ADDRESS]

    slow = FetchGuard(True, NOTHING, silent, timeout_s=0.05)
    assert await refused_field(slow, "https://cdn.example/a.png") is not None


async def test_more_distinct_names_than_the_limit_are_refused() -> None:
    uris = [f"https://cdn{i}.example/a.png" for i in range(MAX_NAMES_PER_CHECK + 1)]
    assert await refused_field(guard(), *uris[:-1]) is None
    assert await refused_field(guard(), *uris) == f"messages[0].content[{MAX_NAMES_PER_CHECK}].uri"


async def test_switched_off_nothing_is_refused() -> None:
    dns = FakeDns({})
    off = FetchGuard(False, NOTHING, dns.resolve)
    assert await refused_field(off, "http://127.0.0.1/", "https://intranet.test/") is None
    assert dns.asked == []


async def test_the_system_resolver_answers_from_the_event_loop() -> None:
    assert "127.0.0.1" in await system_addresses("localhost", 80)
    real = FetchGuard(True, NOTHING, system_addresses, timeout_s=3.0)
    assert await refused_field(real, "https://no-such-host.invalid/a.png") is not None


def test_job_inputs_are_every_http_url_string() -> None:
    args = {"prompt": "make it blue", "image": "sha256:ab",
            "refs": ["https://cdn.example/a.png", {"url": " HTTP://10.0.0.1/x"}, 3],
            "note": "see http://10.0.0.1 (text, not a URL)"}
    assert url_strings(args, "args") == [("args.refs.0", "https://cdn.example/a.png"),
                                         ("args.refs.1.url", " HTTP://10.0.0.1/x")]
