"""Which `http(s)` URIs the engine and the job service may be handed (SPEC §5): public hosts only.

Engines fetch the `http(s)` URIs of an add's items (EverOS does, following redirects, with no
address guard), and a job service fetches its inputs, so a key holder could make them read the
gateway's network: loopback, private ranges, link-local, the cloud metadata services. A URI
passes when `upstream.fetchable_hosts` names its host, or when its host is a public address
written plainly, or a name every current address of which is public; anything else, a name that
does not resolve included, is 422 `uri_not_allowed`. The rules are pure (`judge_uri`,
`judge_addresses`); `FetchGuard` resolves names with the event loop's getaddrinfo, bounded by a
timeout. It cannot pin the address the engine resolves later, nor follow its redirects
(docs/security.md, "Fetched URIs").
"""

from __future__ import annotations

import asyncio
import logging
import re
import socket
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from ipaddress import IPv4Address, IPv4Network, IPv6Address, IPv6Network, ip_address, ip_network
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from gateway.config import ConfigError
from gateway.errors import UriNotAllowed

if TYPE_CHECKING:
    from gateway.attachments.add_body import AttachmentItem
    from gateway.config import UpstreamSettings

log = logging.getLogger("gateway")

Address = IPv4Address | IPv6Address
Network = IPv4Network | IPv6Network
Resolver = Callable[[str, int], Awaitable[Sequence[str]]]

FETCHED_SCHEMES = {"http": 80, "https": 443}  # scheme -> default port
DEFAULT_RESOLVE_TIMEOUT_S = 2.0
# Names resolved for one request at most: each is a getaddrinfo call on the loop's thread pool.
MAX_NAMES_PER_CHECK = 32

# IPv4 blocks no engine should be sent to (IANA special-purpose registry, RFC 6890 and after).
_REFUSED_V4: tuple[tuple[IPv4Network, str], ...] = tuple(
    (IPv4Network(block), what) for block, what in (
        ("0.0.0.0/8", "unspecified"),
        ("10.0.0.0/8", "private"),
        ("100.64.0.0/10", "shared (CGNAT)"),  # Alibaba Cloud's metadata is 100.100.100.200
        ("127.0.0.0/8", "loopback"),
        ("169.254.0.0/16", "link-local"),  # the metadata service of most clouds: .169.254
        ("172.16.0.0/12", "private"),
        ("192.0.0.0/24", "IETF protocol"),
        ("192.0.2.0/24", "documentation"),
        ("192.88.99.0/24", "6to4 relay"),
        ("192.168.0.0/16", "private"),
        ("198.18.0.0/15", "benchmarking"),
        ("198.51.100.0/24", "documentation"),
        ("203.0.113.0/24", "documentation"),
        ("224.0.0.0/4", "multicast"),
        ("240.0.0.0/4", "reserved"),  # 255.255.255.255, the broadcast address, included
        ("168.63.129.16/32", "cloud platform"),  # Azure's host services, from inside any VM
    )
)
# Public IPv6 is global unicast (2000::/3) less these; forms that embed an IPv4 address
# (mapped, compatible, NAT64, 6to4) are judged by the address they embed.
_GLOBAL_UNICAST = IPv6Network("2000::/3")
_REFUSED_V6: tuple[tuple[IPv6Network, str], ...] = tuple(
    (IPv6Network(block), what) for block, what in (
        ("::/128", "unspecified"),
        ("::1/128", "loopback"),
        ("2001::/23", "IETF protocol"),  # Teredo, benchmarking, ORCHID
        ("2001:db8::/32", "documentation"),
        ("3fff::/20", "documentation"),
        ("64:ff9b:1::/48", "local NAT64"),
        ("100::/64", "discard"),
        ("fc00::/7", "unique local (private)"),  # AWS's IPv6 metadata is fd00:ec2::254
        ("fe80::/10", "link-local"),
        ("fec0::/10", "site-local"),
        ("ff00::/8", "multicast"),
    )
)
_EMBEDDING_V4 = (IPv6Network("::ffff:0:0/96"), IPv6Network("::/96"), IPv6Network("64:ff9b::/96"))
# Names for this machine (RFC 6761) and the metadata services' own names.
_REFUSED_NAMES = frozenset({"localhost", "metadata", "metadata.google.internal", "instance-data"})
_LABEL = re.compile(r"[a-z0-9_]([a-z0-9_-]{0,61}[a-z0-9_])?")
_NUMERIC_LABEL = re.compile(r"[0-9]+|0x[0-9a-f]*")
_CONTROL_OR_SPACE = re.compile(r"[\x00-\x20\x7f]")


def refusal(address: Address) -> str | None:
    """What kind of non-public address `address` is, or None when it is public."""
    if isinstance(address, IPv6Address):
        for block, what in _REFUSED_V6:
            if address in block:
                return what
        if address.scope_id is not None:
            return "scoped"
        embedded = address.sixtofour
        if embedded is None and any(address in block for block in _EMBEDDING_V4):
            embedded = IPv4Address(int(address) & 0xFFFFFFFF)
        if embedded is not None:
            inner = refusal(embedded)
            return None if inner is None else f"{inner}, embedded in IPv6"
        return None if address in _GLOBAL_UNICAST else "reserved"
    for v4_block, what in _REFUSED_V4:
        if address in v4_block:
            return what
    return None


def loose_ipv4(host: str) -> IPv4Address | None:
    """The address a C resolver (inet_aton) reads in `host`: `127.1`, `2130706433`,
    `0177.0.0.1`, `0x7f.0.0.1`; None when it reads none."""
    parts = host.split(".")
    if not 1 <= len(parts) <= 4:
        return None
    values = []
    for part in parts:
        if part[:2] == "0x":
            digits, base = part[2:] or "0", 16
        elif len(part) > 1 and part[0] == "0":
            digits, base = part[1:], 8
        else:
            digits, base = part, 10
        try:
            values.append(int(digits, base))
        except ValueError:
            return None
    *leading, last = values
    if any(value > 255 for value in leading) or last >= 256 ** (4 - len(leading)):
        return None
    number = last
    for index, value in enumerate(leading):
        number += value << (8 * (3 - index))
    return IPv4Address(number)


@dataclass(frozen=True)
class FetchableHosts:
    """`upstream.fetchable_hosts`, parsed: names (`files.internal`, `files.internal:8443`) and
    addresses or networks (`10.2.3.4`, `10.2.0.0/16`, `[fd00::1]:8080`), each with a port or
    any port (None)."""

    names: frozenset[tuple[str, int | None]] = frozenset()
    networks: tuple[tuple[Network, int | None], ...] = ()

    @classmethod
    def parse(cls, entries: Iterable[str]) -> FetchableHosts:
        """ValueError naming the first entry that is none of those."""
        names: set[tuple[str, int | None]] = set()
        networks: list[tuple[Network, int | None]] = []
        for entry in entries:
            host, port = _split_entry(entry)
            try:
                networks.append((ip_network(host), port))
                continue
            except ValueError as exc:
                if "/" in host or ":" in host:
                    raise ValueError(f"{entry!r}: not a valid address or CIDR ({exc})") from None
            name = _normalised_name(host)
            if name is None:
                raise ValueError(f"{entry!r}: expected a host name, host:port, an address or "
                                 "a CIDR such as 10.0.0.0/8")
            if _NUMERIC_LABEL.fullmatch(name.rsplit(".", 1)[-1]):
                raise ValueError(f"{entry!r}: write an address plainly (10.1.2.3) or as a CIDR")
            names.add((name, port))
        return cls(frozenset(names), tuple(networks))

    def names_host(self, name: str, port: int) -> bool:
        return (name, None) in self.names or (name, port) in self.names

    def holds(self, address: Address, port: int) -> bool:
        return any(address in network and allowed in (None, port)
                   for network, allowed in self.networks)


def _split_entry(entry: str) -> tuple[str, int | None]:
    text = entry.strip().lower()
    if not text or "://" in text or _CONTROL_OR_SPACE.search(text):
        raise ValueError(f"{entry!r}: expected a host name, host:port, an address or a CIDR, "
                         "not a URL")
    if text.startswith("["):  # [v6] or [v6]:port
        inside, bracket, rest = text[1:].partition("]")
        if not bracket or rest and not rest.startswith(":"):
            raise ValueError(f"{entry!r}: expected [address] or [address]:port")
        return inside, _port(entry, rest[1:]) if rest else None
    if text.count(":") == 1:  # name:port or v4:port; more colons is a bare IPv6 address
        host, _, port = text.partition(":")
        return host, _port(entry, port)
    return text, None


def _port(entry: str, text: str) -> int:
    if not text.isdigit() or not 0 < int(text) < 65536:
        raise ValueError(f"{entry!r}: the port must be a number from 1 to 65535")
    return int(text)


def _normalised_name(host: str) -> str | None:
    """`host` as DNS reads it (IDNA, lower case, no final dot), or None when it is no name."""
    if not host.isascii():
        try:
            host = host.encode("idna").decode("ascii")
        except UnicodeError:
            return None
    host = host.lower()
    host = host[:-1] if host.endswith(".") else host
    labels = host.split(".")
    if not host or len(host) > 253 or not all(_LABEL.fullmatch(label) for label in labels):
        return None
    return host


@dataclass(frozen=True)
class Refused:
    host: str
    why: str  # completes "… {host} {why}"


@dataclass(frozen=True)
class Resolve:
    """The URI is fetchable when every current address of `name` is."""

    name: str
    port: int


def judge_uri(uri: str, allowed: FetchableHosts) -> Refused | Resolve | None:
    """Whether the engine may fetch `uri`: None (yes, or not an http(s) URI: check_uris judges
    those), Refused, or Resolve (it depends on the addresses of a name)."""
    text = uri.strip()
    scheme = text.partition(":")[0].lower()
    if scheme not in FETCHED_SCHEMES:
        return None
    if _CONTROL_OR_SPACE.search(text):
        return Refused("the URI", "holds spaces or control characters")
    try:
        parts = urlsplit(text)
        host, port = parts.hostname or "", parts.port
    except ValueError:
        return Refused("the URI", "is not a valid URL")
    port = FETCHED_SCHEMES[scheme] if port is None else port
    # Parsers disagree on where such authorities end or which `@` starts the host.
    if "\\" in parts.netloc or parts.netloc.count("@") > 1 or "%" in host:
        return Refused(parts.netloc, "is an authority URL parsers read differently")
    if ":" in host:
        try:
            address: Address = IPv6Address(host)
        except ValueError:
            return Refused(host, "is not a valid IPv6 address")
        return _judge_literal(host, address, port, allowed)
    if not host:
        return Refused("the URI", "names no host")
    name = _normalised_name(host)
    if name is None:
        return Refused(host, "is not a host name")
    try:
        literal = IPv4Address(name)
    except ValueError:
        literal = None
    if literal is not None:
        return _judge_literal(host, literal, port, allowed)
    if _NUMERIC_LABEL.fullmatch(name.rsplit(".", 1)[-1]):
        loose = loose_ipv4(name)
        if loose is None:
            return Refused(host, "is neither a name nor an IPv4 address")
        return Refused(host, f"is an unusual spelling of the IPv4 address {loose}")
    if allowed.names_host(name, port):
        return None
    if name in _REFUSED_NAMES or name.endswith(".localhost"):
        return Refused(host, "names this machine or a metadata service")
    return Resolve(name, port)


def _judge_literal(host: str, address: Address, port: int, allowed: FetchableHosts
                   ) -> Refused | None:
    if allowed.holds(address, port):
        return None
    what = refusal(address)
    return None if what is None else Refused(host, f"is not a public address ({what})")


def judge_addresses(name: str, port: int, addresses: Sequence[str] | None,
                    allowed: FetchableHosts) -> tuple[Refused | None, str]:
    """Whether a name with these current addresses (None: it did not resolve) is fetchable, and
    why, for the log. Refusals all read alike to the caller, so that the gateway's resolver is
    no oracle of the internal names it knows."""
    refused = Refused(name, "does not resolve to public addresses only")
    if not addresses:
        return refused, "does not resolve"
    for text in addresses:
        try:
            address = ip_address(text)
        except ValueError:
            return refused, f"resolves to {text!r}"
        if allowed.holds(address, port):
            continue
        what = refusal(address)
        if what is not None:
            return refused, f"resolves to {address} ({what})"
    return None, "public"


async def system_addresses(name: str, port: int) -> list[str]:
    """The addresses the event loop's getaddrinfo (the system resolver, off the loop) finds."""
    infos = await asyncio.get_running_loop().getaddrinfo(name, port, type=socket.SOCK_STREAM)
    return [str(info[4][0]) for info in infos]


# What a guard built without a resolver asks; the test suite puts a fixed table here.
default_resolver: Resolver = system_addresses


class FetchGuard:
    """Refuses (422 `uri_not_allowed`, naming the field) the first URI the engine or the job
    service may not be sent to fetch."""

    def __init__(self, enabled: bool = True, allowed: FetchableHosts | None = None,
                 resolver: Resolver | None = None,
                 timeout_s: float = DEFAULT_RESOLVE_TIMEOUT_S) -> None:
        self.enabled = enabled
        self.allowed = allowed or FetchableHosts()
        self.resolver = resolver
        self.timeout_s = timeout_s

    @classmethod
    def from_settings(cls, upstream: UpstreamSettings,
                      resolver: Resolver | None = None) -> FetchGuard:
        """The guard `upstream.fetch_guard` and `upstream.fetchable_hosts` describe; ConfigError
        naming the first entry of the list that is no host, address or network."""
        try:
            allowed = FetchableHosts.parse(upstream.fetchable_hosts)
        except ValueError as exc:
            raise ConfigError(f"upstream.fetchable_hosts: {exc}") from None
        return cls(upstream.fetch_guard, allowed, resolver)

    async def check(self, uris: Iterable[tuple[str, str]]) -> None:
        """`uris`: (field, uri) pairs in body order; UriNotAllowed for the first refused."""
        if not self.enabled:
            return
        judged = [(field, judge_uri(uri, self.allowed)) for field, uri in uris]
        names = list(dict.fromkeys(v for _, v in judged if isinstance(v, Resolve)))
        if len(names) > MAX_NAMES_PER_CHECK:
            field = next(f for f, v in judged if v == names[MAX_NAMES_PER_CHECK])
            raise UriNotAllowed(f"{field}: at most {MAX_NAMES_PER_CHECK} distinct host names "
                                "per request are checked", field=field)
        found = await asyncio.gather(*(self._addresses(name) for name in names)) if names else []
        by_name = dict(zip(names, found, strict=True))
        for field, verdict in judged:
            if isinstance(verdict, Resolve):
                verdict, why = judge_addresses(verdict.name, verdict.port, by_name[verdict],
                                               self.allowed)
                if verdict is not None:
                    log.info("fetch guard refused %s: %s %s", field, verdict.host, why)
            if verdict is not None:
                raise UriNotAllowed(
                    f"{field}: {verdict.host} {verdict.why}; only public hosts are fetched "
                    "(an operator may list others in upstream.fetchable_hosts)", field=field)

    async def _addresses(self, name: Resolve) -> Sequence[str] | None:
        resolver = self.resolver or default_resolver
        try:
            return await asyncio.wait_for(resolver(name.name, name.port), self.timeout_s)
        except (OSError, UnicodeError, ValueError, TimeoutError):
            return None


def item_uris(items: Iterable[AttachmentItem]) -> list[tuple[str, str]]:
    """The (field, uri) of each attachment item that carries a URI."""
    return [(item.field, item.uri) for item in items if item.uri is not None]


def url_strings(document: Any, field: str) -> list[tuple[str, str]]:
    """Every string in a JSON document that is an http(s) URL, with where it sits, spelled as
    the tool-call errors spell it (`args.reference`, `args.sources.1`): what a job service
    would fetch."""
    if isinstance(document, str):
        fetched = document.strip().partition(":")[0].lower() in FETCHED_SCHEMES
        return [(field, document)] if fetched else []
    if isinstance(document, Mapping):
        return [found for key, value in document.items()
                for found in url_strings(value, f"{field}.{key}")]
    if isinstance(document, list):
        return [found for index, value in enumerate(document)
                for found in url_strings(value, f"{field}.{index}")]
    return []
