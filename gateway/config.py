"""Settings: every key declared once (section, default, help), loaded from TOML, overridden by env.

`SETTINGS` is the single table of keys; `config.example.toml` is tested against it. A key
`section.key` is overridden by the environment variable `MEMORY_GATEWAY_<SECTION>_<KEY>`.
"""

from __future__ import annotations

import json
import os
import re
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any

from gateway.upstream.origin import UpstreamOrigin, is_origin_form
from gateway.upstream.routes import parse_allowed

ENV_PREFIX = "MEMORY_GATEWAY_"
MIB = 1024 * 1024


class ConfigError(ValueError):
    """A configuration value or key is wrong; the message names the key."""


def _setting(default: Any, help: str) -> Any:
    if isinstance(default, dict):
        return field(default_factory=lambda: dict(default), metadata={"help": help})
    if isinstance(default, list):
        return field(default_factory=lambda: list(default), metadata={"help": help})
    return field(default=default, metadata={"help": help})


# server.max_head_bytes below this would refuse ordinary requests (a bearer JWT alone is 1-2 KB)
MIN_HEAD_BYTES = 1024

@dataclass(frozen=True)
class ServerSettings:
    host: str = _setting("127.0.0.1", "address to listen on")
    port: int = _setting(8080, "port to listen on")
    workers: int = _setting(
        1, "gateway processes serving the port (each a whole gateway; docs/scale-out.md)"
    )
    log_level: str = _setting("info", "log level: debug, info, warning, error")
    log_format: str = _setting("json", "log lines: json (one object per line) or text")
    native_search: bool = _setting(
        True, "answer searches with the C page scanner when it was built; false = Python only"
    )
    public_url: str = _setting(
        "", "URL by which clients and the engine reach the gateway (download and signed file "
        "URLs); empty = search attachments carry no `url`"
    )
    file_url_secret: str = _setting(
        "", "secret signing /files/{token} URLs; empty = generated once, kept in storage.root"
    )
    file_url_ttl_s: int = _setting(
        86400, "seconds a signed file URL handed to the engine stays valid"
    )
    header_timeout_s: float = _setting(
        10.0, "seconds a connection has to send a whole request head, else it is closed"
    )
    body_timeout_s: float = _setting(
        30.0, "seconds a request body may go without sending a byte; then 408 request_timeout "
        "and the connection is closed (also the grace before min_body_rate applies)"
    )
    min_body_rate: int = _setting(
        1024, "bytes/s a request body must average once it has been arriving for "
        "body_timeout_s, else 408 request_timeout and the connection is closed (0 = no floor)"
    )
    max_head_bytes: int = _setting(
        65536, "most bytes of one request head (request line and headers); beyond it 431 "
        "request_head_too_large and the connection is closed (0 = no cap)"
    )
    max_connections: int = _setting(
        2048, "most open client connections per gateway process; beyond it new ones are "
        "closed at once (0 = no cap)"
    )
    max_connections_per_client: int = _setting(
        256, "most open connections from one client address per gateway process (0 = no cap; "
        "behind a reverse proxy every client has its address)"
    )


@dataclass(frozen=True)
class UpstreamSettings:
    base_url: str = _setting("", "upstream memory engine URL; empty = run the built-in dev engine")
    flavor: str = _setting(
        "everos", "engine API: everos, everos-cloud, everos-cloud-v1, mem0 or memos "
        "(docs/engines.md); the three paths below default to the flavour's own"
    )
    timeout_s: float = _setting(
        60.0, "deadline in seconds for a whole upstream exchange (send, answer and its body)"
    )
    connect_timeout_s: float = _setting(5.0, "upstream connect timeout in seconds")
    user_header: str = _setting("X-Memory-User-Id", "header carrying the authenticated user id")
    headers: dict[str, Any] = _setting(
        {}, "extra headers sent upstream, e.g. the engine's own API key: mem0's server "
        "wants {\"X-API-Key\" = \"<its key>\"}, EverOS Cloud {\"Authorization\" = \"Bearer "
        "sk-…\"} (docs/engines.md)"
    )
    add_path: str = _setting("/api/v2/memory/add", "the engine's add path")
    search_path: str = _setting("/api/v2/memory/search", "the engine's search path")
    flush_path: str = _setting("/api/v2/memory/flush", "the engine's flush path; empty = none")
    client: str = _setting("native", "upstream HTTP client: native (fastest) or httpx")
    keepalive_expiry_s: float = _setting(
        4.0, "idle upstream connections older than this are not reused"
    )
    max_connections: int = _setting(100, "most concurrent upstream requests (pool size)")
    pool_timeout_s: float = _setting(5.0, "wait for a free pool slot before answering 503")
    allow_paths: list[str] = _setting(
        [], "engine routes opened beyond the flavour's table, \"METHOD /path\" with {name} or a "
        "final * (docs/engines.md); the identity checks apply to them too"
    )
    fetch_guard: bool = _setting(
        True, "refuse http(s) URIs in adds and job inputs unless their host is public (no "
        "loopback, private, link-local or metadata address; docs/security.md); false = off"
    )
    fetchable_hosts: list[str] = _setting(
        [], "hosts the engine and the job service may always be sent to fetch from, checked "
        "first: names, name:port, addresses or CIDRs, e.g. [\"files.internal\", \"10.2.0.0/16\"]"
    )
    file_access: str = _setting(
        "auto", "how the engine gets stored files: path (file:// URIs, an engine on this disk), "
        "url (signed, expiring URLs) or auto (path for everos, url for the others)"
    )


@dataclass(frozen=True)
class ResourcesSettings:
    flush_after_ingest: bool = _setting(True, "flush a resource's session after ingesting it")


@dataclass(frozen=True)
class StorageSettings:
    root: str = _setting("storage", "root folder of stored files")
    database: str = _setting(
        "storage/_gateway.db",
        "SQLite database file, or a postgresql://user:password@host:port/dbname URL (left at its "
        "default, it follows storage.root: <root>/_gateway.db)",
    )
    files: str = _setting(
        "", "where files live: empty = under storage.root; s3://bucket/prefix = an S3-compatible "
        "store (credentials from the standard AWS_* environment variables)"
    )
    s3_endpoint_url: str = _setting("", "S3 endpoint URL; empty = AWS S3 itself")
    s3_region: str = _setting("", "S3 region; empty = from AWS_* settings, else us-east-1")
    gc_grace_s: float = _setting(
        3600.0, "`gc` leaves files and rows younger than this alone (work may be in flight)"
    )


@dataclass(frozen=True)
class LimitsSettings:
    max_body_bytes: int = _setting(
        64 * MIB, "largest request body on /memories/add|search and proxied paths"
    )
    max_json_body_bytes: int = _setting(
        8 * MIB, "largest JSON body on the application routes (agents, conversations, assets...)"
    )
    max_upload_bytes: int = _setting(512 * MIB, "largest single /resources upload")
    max_inline_file_bytes: int = _setting(25 * MIB, "largest decoded base64 item in an add")
    proxy_buffer_bytes: int = _setting(
        1 * MIB, "upstream responses up to this size are buffered; larger ones stream"
    )
    max_parsing_bytes: int = _setting(
        64 * MIB, "JSON request bodies being parsed at once per process, in bytes; beyond it "
        "503 with Retry-After (at least max_body_bytes)"
    )
    max_upstream_answer_bytes: int = _setting(
        32 * MIB, "largest engine answer the gateway reads whole (search rewriting, filtered "
        "reads, checks); beyond it 502 upstream_answer_too_large"
    )


@dataclass(frozen=True)
class RateLimitsSettings:
    requests_per_s: float = _setting(
        0.0, "requests per second each credential may make, per route class (0 = no rate "
        "limit; docs/limits.md)"
    )
    burst: int = _setting(
        0, "requests a credential may make at once after idling, beyond the steady rate "
        "(0 = none: requests spaced 1/requests_per_s apart)"
    )
    engine_concurrency_per_user: int = _setting(
        0, "engine calls one user may have in flight at once, per gateway process "
        "(0 = no cap)"
    )


@dataclass(frozen=True)
class RouteClassLimits:
    requests_per_s: float = _setting(
        0.0, "this route class's requests per second per credential (0 = [rate_limits]'s)"
    )
    burst: int = _setting(0, "this route class's burst (0 = [rate_limits]'s)")


@dataclass(frozen=True)
class AuthSettings:
    key_cache_ttl_s: float = _setting(
        5.0, "longest a verified API key is trusted without a database read (0 = always read);"
        " a revocation by any process takes effect at once regardless"
    )
    last_used_interval_s: float = _setting(
        60.0, "how often a process writes its keys' last-used times (lastUsedAtMs is at most "
        "this late; 0 = at shutdown only)"
    )
    erased_users: str = _setting(
        "refuse", "an erased user id: refuse (401 for any credential naming it) or fresh (a new,"
        " empty account for a credential that names it again)"
    )


@dataclass(frozen=True)
class JwtSettings:
    issuer: str = _setting(
        "", "JWTs from your identity provider (docs/identity.md): its issuer URL, checked "
        "against `iss`; alone, its keys are found by OpenID discovery (jwks_uri); empty = no JWTs"
        " unless a key source below is set"
    )
    jwks_url: str = _setting("", "the provider's JWKS URL, instead of discovery from `issuer`")
    public_key: str = _setting("", "a static PEM public key, instead of a JWKS")
    secret: str = _setting(
        "", "a shared HS256 secret (at least 32 bytes), for small deployments without a JWKS"
    )
    audience: str = _setting("", "required `aud` of every token (required once JWTs are on)")
    algorithms: list[str] = _setting(
        [], "accepted `alg` values; empty = RS256, PS256, ES256 and EdDSA for a JWKS or public "
        "key, HS256 for a secret (never none, never HMAC with a public key)"
    )
    user_claim: str = _setting("sub", "claim naming the user, validated as a user id")
    user_id_map: str = _setting(
        "strict", "a subject that is not a valid user id: strict (401) or encode (mapped to one "
        "by the documented rule of docs/identity.md)"
    )
    scopes_claim: str = _setting(
        "scope", "claim holding scopes: memory:read gives read, memory:write write; a token "
        "without it gets both"
    )
    leeway_s: float = _setting(30.0, "clock skew allowed on exp, nbf and iat, in seconds")
    max_token_bytes: int = _setting(8192, "longer tokens are refused before they are parsed")
    token_cache_s: float = _setting(
        60.0, "a verified token is trusted this long without checking it again (never beyond "
        "its exp; 0 = verify every request)"
    )
    jwks_refresh_s: float = _setting(600.0, "fetched keys are refreshed after this many seconds")
    jwks_refetch_interval_s: float = _setting(
        30.0, "at most one fetch per this many seconds, however many unknown `kid`s arrive"
    )
    jwks_outage_s: float = _setting(
        3600.0, "keys are kept this long past jwks_refresh_s while the provider cannot be reached"
    )
    fetch_timeout_s: float = _setting(5.0, "deadline of one discovery or JWKS fetch, in seconds")
    max_document_bytes: int = _setting(
        256 * 1024, "largest discovery or JWKS document read from the provider"
    )

    @property
    def enabled(self) -> bool:
        return bool(self.issuer or self.jwks_url or self.public_key or self.secret)


@dataclass(frozen=True)
class DevEngineSettings:
    port: int = _setting(8081, "port of the built-in dev engine started by `serve`")
    database: str = _setting("storage/_dev_engine.db", "SQLite file of the dev engine (left at "
                             "its default, it follows storage.root: <root>/_dev_engine.db)")


@dataclass(frozen=True)
class TracingSettings:
    enabled: bool = _setting(False, "trace requests with OpenTelemetry (the [tracing] extra): "
                             "spans for auth, the route model, owner checks, the engine call "
                             "and matching; the client's traceparent continued to the engine")
    otlp_endpoint: str = _setting("", "OTLP/HTTP traces endpoint, e.g. "
                                  "http://127.0.0.1:4318/v1/traces; empty = the exporter's "
                                  "default (OTEL_EXPORTER_OTLP_* variables, else localhost)")
    service_name: str = _setting("memory-gateway", "service.name of the spans")
    sample_ratio: float = _setting(0.01, "share of new traces recorded (by trace id; 1 = "
                                   "all, at about +70 % CPU a request); unrecorded ones make "
                                   "no span and still send the engine a traceparent")
    parent_based: bool = _setting(True, "follow the sampled flag of the client's traceparent; "
                                  "false = sample_ratio decides every trace, the client's too")


@dataclass(frozen=True)
class LlmSettings:
    base_url: str = _setting("", "OpenAI-compatible API base URL; empty = no model is ever called")
    api_key: str = _setting("", "API key sent as a bearer token to the model endpoint")
    model: str = _setting("", "chat completions model name")
    timeout_s: float = _setting(20.0, "model call timeout in seconds")
    summary_every_n_messages: int = _setting(
        20, "refresh a conversation's rolling summary every N messages"
    )


@dataclass(frozen=True)
class MetricsSettings:
    enabled: bool = _setting(True, "serve Prometheus metrics at /metrics (no key: firewall it)")


@dataclass(frozen=True)
class ConsoleSettings:
    enabled: bool = _setting(True, "serve the operator console at /console (admin keys sign in)")
    session_ttl_s: int = _setting(28800, "a console session ends this many seconds after sign-in")


@dataclass(frozen=True)
class ToolsSettings:
    registry: str = _setting(
        "", "JSON file of the tools agents may propose (docs/tool-calls.md); empty = the "
        "example registry shipped with the gateway (tools.example.json)"
    )


@dataclass(frozen=True)
class JobsSettings:
    base_url: str = _setting(
        "", "job service that runs confirmed tool calls; empty = the built-in dev job runner"
    )
    dev_delay_s: float = _setting(1.0, "seconds the dev job runner takes to finish a job")
    timeout_s: float = _setting(10.0, "job service request timeout in seconds")


@dataclass(frozen=True)
class UploadsSettings:
    sign_ttl_s: int = _setting(
        900, "how long an upload form signed by /api/v1|v2/object/sign stays valid (seconds)"
    )
    object_ttl_s: int = _setting(
        86400, "how long a signed object key may be named in an add; `gc` then removes the "
        "objects never added"
    )
    max_image_bytes: int = _setting(10 * MIB, "largest file signed as fileType image")
    max_file_bytes: int = _setting(100 * MIB, "largest file signed as fileType file")
    max_video_bytes: int = _setting(500 * MIB, "largest file signed as fileType video")


@dataclass(frozen=True)
class McpSettings:
    enabled: bool = _setting(
        True, "serve the Model Context Protocol at mcp.path and its OAuth metadata "
        "(docs/mcp.md); false = both answer 404"
    )
    path: str = _setting("/mcp", "path of the MCP endpoint")
    jwt_audience: str = _setting(
        "", "`aud` a JWT must carry on the MCP endpoint (RFC 8707); empty = "
        "<server.public_url>/mcp (neither set: JWTs are refused there, keys still work)"
    )
    default_session: str = _setting("mcp", "session of add_memory when the call names none")
    max_read_bytes: int = _setting(
        16 * MIB, "largest file resources/read returns inline; a bigger one answers an error "
        "naming its download URL"
    )


@dataclass(frozen=True)
class Settings:
    server: ServerSettings = field(default_factory=ServerSettings)
    upstream: UpstreamSettings = field(default_factory=UpstreamSettings)
    resources: ResourcesSettings = field(default_factory=ResourcesSettings)
    storage: StorageSettings = field(default_factory=StorageSettings)
    limits: LimitsSettings = field(default_factory=LimitsSettings)
    auth: AuthSettings = field(default_factory=AuthSettings)
    auth_jwt: JwtSettings = field(default_factory=JwtSettings, metadata={"section": "auth.jwt"})
    dev_engine: DevEngineSettings = field(default_factory=DevEngineSettings)
    tracing: TracingSettings = field(default_factory=TracingSettings)
    llm: LlmSettings = field(default_factory=LlmSettings)
    metrics: MetricsSettings = field(default_factory=MetricsSettings)
    tools: ToolsSettings = field(default_factory=ToolsSettings)
    jobs: JobsSettings = field(default_factory=JobsSettings)
    rate_limits: RateLimitsSettings = field(default_factory=RateLimitsSettings)
    # Per route class (gateway/limits/classes.py): engine reads, engine writes, uploads, and
    # the gateway's own application routes.
    rate_limits_engine_read: RouteClassLimits = field(
        default_factory=RouteClassLimits, metadata={"section": "rate_limits.engine_read"})
    rate_limits_engine_write: RouteClassLimits = field(
        default_factory=RouteClassLimits, metadata={"section": "rate_limits.engine_write"})
    rate_limits_upload: RouteClassLimits = field(
        default_factory=RouteClassLimits, metadata={"section": "rate_limits.upload"})
    rate_limits_owned: RouteClassLimits = field(
        default_factory=RouteClassLimits, metadata={"section": "rate_limits.owned"})
    uploads: UploadsSettings = field(default_factory=UploadsSettings)
    console: ConsoleSettings = field(default_factory=ConsoleSettings)
    mcp: McpSettings = field(default_factory=McpSettings)

    @property
    def llm_enabled(self) -> bool:
        return bool(self.llm.base_url and self.llm.model)

    def with_values(self, **sections: Mapping[str, Any]) -> Settings:
        """A copy with some keys replaced, validated like file values (used by tests and CLI)."""
        tables = {_TABLE_OF_ATTR.get(name, name): dict(values) for name, values in sections.items()}
        return _apply(self, tables, "override")


@dataclass(frozen=True)
class SettingInfo:
    section: str  # as written in TOML: "server", or "auth.jwt" for a table inside [auth]
    key: str
    default: Any
    type: type
    help: str

    @property
    def env_var(self) -> str:
        return f"{ENV_PREFIX}{self.section.upper().replace('.', '_')}_{self.key.upper()}"


def section_name(f: Any) -> str:
    """A Settings field's TOML table: its name, or the dotted name in its metadata."""
    name: str = f.metadata.get("section", f.name)
    return name


def _declared() -> list[SettingInfo]:
    table: list[SettingInfo] = []
    for section in fields(Settings):
        section_type = section.type if isinstance(section.type, type) else None
        section_cls = section_type or type(getattr(Settings(), section.name))
        defaults = section_cls()
        for f in fields(section_cls):
            default = getattr(defaults, f.name)
            table.append(SettingInfo(section_name(section), f.name, default, type(default),
                                     f.metadata["help"]))
    return table


SETTINGS: list[SettingInfo] = _declared()
_BY_NAME = {(s.section, s.key): s for s in SETTINGS}
# TOML table name -> Settings attribute ("auth.jwt" -> "auth_jwt").
_SECTION_ATTRS = {section_name(f): f.name for f in fields(Settings)}
_TABLE_OF_ATTR = {attr: table for table, attr in _SECTION_ATTRS.items()}


def _coerce(info: SettingInfo, value: Any, origin: str) -> Any:
    name = f"{info.section}.{info.key}"
    expected = info.type
    if isinstance(value, str) and origin == "env":
        if expected is bool:
            lowered = value.strip().lower()
            if lowered in ("1", "true", "yes", "on"):
                return True
            if lowered in ("0", "false", "no", "off"):
                return False
            raise ConfigError(
                f"{name} (from {info.env_var}): expected true or false, got {value!r}"
            )
        if expected in (int, float):
            try:
                value = expected(value)
            except ValueError:
                raise ConfigError(
                    f"{name} (from {info.env_var}): expected a number, got {value!r}"
                ) from None
        elif expected in (dict, list):
            try:
                value = json.loads(value)
            except json.JSONDecodeError:
                raise ConfigError(
                    f"{name} (from {info.env_var}): expected JSON, got {value!r}"
                ) from None
    if expected is float and isinstance(value, int) and not isinstance(value, bool):
        value = float(value)
    if expected is int and isinstance(value, bool):
        raise ConfigError(f"{name}: expected an integer, got {value!r}")
    if not isinstance(value, expected):
        raise ConfigError(f"{name}: expected {expected.__name__}, got {value!r}")
    checked: Any = value
    if expected is dict and not all(
        isinstance(k, str) and isinstance(v, str) for k, v in checked.items()
    ):
        raise ConfigError(f"{name}: expected a table of string values")
    if expected is list and not all(isinstance(v, str) for v in checked):
        raise ConfigError(f"{name}: expected a list of strings")
    if expected in (int, float) and checked < 0:
        raise ConfigError(f"{name}: must not be negative, got {value!r}")
    return value


def _tables(data: Mapping[str, Any], prefix: str = "") -> list[tuple[str, Mapping[str, Any]]]:
    """Each (table name, its keys) of a TOML document; `[auth.jwt]` is a table of its own."""
    tables: list[tuple[str, Mapping[str, Any]]] = []
    for name, values in data.items():
        table = f"{prefix}{name}"
        if table not in _SECTION_ATTRS or not isinstance(values, Mapping):
            raise ConfigError(f"unknown configuration section [{table}]")
        own = {key: value for key, value in values.items()
               if not (isinstance(value, Mapping) and f"{table}.{key}" in _SECTION_ATTRS)}
        tables.append((table, own))
        nested = {key: value for key, value in values.items() if key not in own}
        tables += _tables(nested, f"{table}.")
    return tables


def _apply(settings: Settings, data: Mapping[str, Any], origin: str) -> Settings:
    updates: dict[str, Any] = {}
    for table, values in _tables(data):
        attr = _SECTION_ATTRS[table]
        section = updates.get(attr, getattr(settings, attr))
        changes = {}
        for key, value in values.items():
            info = _BY_NAME.get((table, key))
            if info is None:
                raise ConfigError(f"unknown configuration key {table}.{key}")
            changes[key] = _coerce(info, value, origin)
        updates[attr] = replace(section, **changes)
    result = _under_root(_flavor_paths(replace(settings, **updates)))
    _validate(result)
    return result


# Each flavour's (add, search, flush) paths; "" = the engine has no flush (docs/engines.md).
FLAVOR_PATHS: dict[str, tuple[str, str, str]] = {
    "everos": ("/api/v2/memory/add", "/api/v2/memory/search", "/api/v2/memory/flush"),
    "everos-cloud": ("/api/v2/memory/add", "/api/v2/memory/search", "/api/v2/memory/flush"),
    "everos-cloud-v1": ("/api/v1/memories", "/api/v1/memories/search", "/api/v1/memories/flush"),
    "mem0": ("/memories", "/search", ""),
    "memos": ("/product/add", "/product/search", ""),
}
_PATH_KEYS = ("add_path", "search_path", "flush_path")


def _flavor_paths(settings: Settings) -> Settings:
    """Paths still at some flavour's default follow the current flavour; explicit ones stay."""
    upstream = settings.upstream
    own = FLAVOR_PATHS.get(upstream.flavor)
    if own is None:
        return settings  # _validate names the bad flavour
    changes: dict[str, Any] = {}
    for index, key in enumerate(_PATH_KEYS):
        defaults = {paths[index] for paths in FLAVOR_PATHS.values()}
        if getattr(upstream, key) in defaults and getattr(upstream, key) != own[index]:
            changes[key] = own[index]
    return replace(settings, upstream=replace(upstream, **changes)) if changes else settings


def _under_root(settings: Settings) -> Settings:
    """Database files still at their default follow `storage.root`; explicit ones stay."""
    root = settings.storage.root
    if root == StorageSettings.root:
        return settings
    storage, dev = settings.storage, settings.dev_engine
    if storage.database == StorageSettings.database:
        storage = replace(storage, database=str(Path(root) / "_gateway.db"))
    if dev.database == DevEngineSettings.database:
        dev = replace(dev, database=str(Path(root) / "_dev_engine.db"))
    return replace(settings, storage=storage, dev_engine=dev)


def check_dev_engine_flavor(settings: Settings) -> None:
    """`serve` without upstream.base_url runs the dev engine, which speaks EverOS v2 only."""
    flavor = settings.upstream.flavor
    if not settings.upstream.base_url and flavor not in ("everos", "everos-cloud"):
        raise ConfigError(f"upstream.flavor: {flavor} needs upstream.base_url (the built-in dev "
                          "engine speaks EverOS v2 only)")


def _validate(settings: Settings) -> None:
    base_url = settings.upstream.base_url
    if base_url and not base_url.startswith(("http://", "https://")):
        raise ConfigError(f"upstream.base_url: expected an http(s) URL, got {base_url!r}")
    if base_url:
        try:
            UpstreamOrigin.parse(base_url)
        except ValueError as exc:
            raise ConfigError(f"upstream.base_url: {exc}") from None
    jobs_url = settings.jobs.base_url
    if jobs_url and not jobs_url.startswith(("http://", "https://")):
        raise ConfigError(f"jobs.base_url: expected an http(s) URL, got {jobs_url!r}")
    flavor = settings.upstream.flavor
    if flavor not in FLAVOR_PATHS:
        raise ConfigError(
            f"upstream.flavor: expected one of {', '.join(FLAVOR_PATHS)}, got {flavor!r}"
        )
    for key in _PATH_KEYS:
        path = getattr(settings.upstream, key)
        if not path.startswith("/") and not (key == "flush_path" and path == ""):
            raise ConfigError(f"upstream.{key}: must start with '/'")
        if path and not is_origin_form(path):
            raise ConfigError(f"upstream.{key}: not a plain path (RFC 3986, no dot segments)")
    if settings.server.log_level.lower() not in ("debug", "info", "warning", "error"):
        raise ConfigError(f"server.log_level: unknown level {settings.server.log_level!r}")
    if settings.server.log_format not in ("json", "text"):
        raise ConfigError(f"server.log_format: expected json or text, got "
                          f"{settings.server.log_format!r}")
    if not 0 < settings.server.port < 65536:
        raise ConfigError(f"server.port: out of range: {settings.server.port}")
    if settings.upstream.client not in ("native", "httpx"):
        client = settings.upstream.client
        raise ConfigError(f"upstream.client: expected native or httpx, got {client!r}")
    if settings.upstream.max_connections < 1:
        raise ConfigError("upstream.max_connections: must be at least 1")
    if settings.server.workers < 1:
        raise ConfigError("server.workers: must be at least 1")
    if settings.console.session_ttl_s < 1:
        raise ConfigError("console.session_ttl_s: must be at least 1")
    if settings.server.header_timeout_s <= 0:
        raise ConfigError("server.header_timeout_s: must be more than 0")
    if settings.server.body_timeout_s <= 0:
        raise ConfigError("server.body_timeout_s: must be more than 0")
    if settings.server.min_body_rate < 0:
        raise ConfigError("server.min_body_rate: must be 0 (no floor) or more")
    if settings.server.max_head_bytes != 0 and settings.server.max_head_bytes < MIN_HEAD_BYTES:
        raise ConfigError(f"server.max_head_bytes: must be 0 (no cap) or at least "
                          f"{MIN_HEAD_BYTES}")
    limits = settings.limits
    if limits.max_parsing_bytes < limits.max_body_bytes:
        raise ConfigError("limits.max_parsing_bytes: must be at least limits.max_body_bytes "
                          f"({limits.max_body_bytes})")
    for entry in settings.upstream.allow_paths:
        try:
            parse_allowed(entry)
        except ValueError as exc:
            raise ConfigError(f"upstream.allow_paths: {exc}") from None
    if settings.auth.erased_users not in ERASED_USERS:
        raise ConfigError(f"auth.erased_users: expected refuse or fresh, got "
                          f"{settings.auth.erased_users!r}")
    _validate_files(settings)
    _validate_jwt(settings.auth_jwt)
    _validate_mcp(settings.mcp)


HMAC_ALGORITHMS = ("HS256", "HS384", "HS512")
KEY_ALGORITHMS = ("RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384",
                  "ES512", "EdDSA")
DEFAULT_KEY_ALGORITHMS = ["RS256", "PS256", "ES256", "EdDSA"]


def _validate_jwt(jwt: JwtSettings) -> None:
    if not jwt.enabled:
        return
    sources = [name for name in ("jwks_url", "public_key", "secret") if getattr(jwt, name)]
    if len(sources) > 1:
        raise ConfigError(f"auth.jwt: set one key source, not {' and '.join(sources)}")
    for name in ("issuer", "jwks_url"):
        url = getattr(jwt, name)
        if url and not url.startswith(("http://", "https://")):
            raise ConfigError(f"auth.jwt.{name}: expected an http(s) URL, got {url!r}")
    if not jwt.audience:
        raise ConfigError("auth.jwt.audience: required (tokens your provider issues for other "
                          "applications would be accepted otherwise)")
    if jwt.secret and len(jwt.secret.encode()) < 32:
        raise ConfigError("auth.jwt.secret: must be at least 32 bytes")
    allowed = HMAC_ALGORITHMS if jwt.secret else KEY_ALGORITHMS
    for alg in jwt.algorithms:
        if alg not in allowed:
            kind = "a shared secret" if jwt.secret else "public keys"
            raise ConfigError(f"auth.jwt.algorithms: {alg!r} cannot be used with {kind} "
                              f"(allowed: {', '.join(allowed)})")
    if jwt.user_id_map not in ("strict", "encode"):
        raise ConfigError(f"auth.jwt.user_id_map: expected strict or encode, got "
                          f"{jwt.user_id_map!r}")
    if not jwt.user_claim:
        raise ConfigError("auth.jwt.user_claim: must name a claim")
    if jwt.max_token_bytes < 64 or jwt.max_document_bytes < 64:
        raise ConfigError("auth.jwt: max_token_bytes and max_document_bytes must be at least 64")


def jwt_algorithms(jwt: JwtSettings) -> list[str]:
    """The `alg` values tokens may carry: the configured list, or the key source's defaults."""
    if jwt.algorithms:
        return list(jwt.algorithms)
    return ["HS256"] if jwt.secret else list(DEFAULT_KEY_ALGORITHMS)


ERASED_USERS = ("refuse", "fresh")


def _validate_mcp(mcp: McpSettings) -> None:
    if not re.fullmatch(r"/[A-Za-z0-9._~-]+(/[A-Za-z0-9._~-]+)*", mcp.path):
        raise ConfigError(f"mcp.path: expected an absolute path such as /mcp, got {mcp.path!r}")
    if mcp.max_read_bytes < 1:
        raise ConfigError("mcp.max_read_bytes: must be at least 1")


def _validate_files(settings: Settings) -> None:
    files = settings.storage.files
    if files and not re.fullmatch(r"s3://[a-z0-9][a-z0-9.-]{1,61}[a-z0-9](/[^\s]*)?", files):
        raise ConfigError(f"storage.files: expected empty or s3://bucket/prefix, got {files!r}")
    endpoint = settings.storage.s3_endpoint_url
    if endpoint and not endpoint.startswith(("http://", "https://")):
        raise ConfigError(f"storage.s3_endpoint_url: expected an http(s) URL, got {endpoint!r}")
    public = settings.server.public_url
    if public and not public.startswith(("http://", "https://")):
        raise ConfigError(f"server.public_url: expected an http(s) URL, got {public!r}")
    if settings.upstream.file_access not in FILE_ACCESS:
        raise ConfigError(f"upstream.file_access: expected one of {', '.join(FILE_ACCESS)}, "
                          f"got {settings.upstream.file_access!r}")


FILE_ACCESS = ("auto", "path", "url")


CONFIG_ENV = f"{ENV_PREFIX}CONFIG"  # names the configuration file when --config does not
LOCAL_CONFIG = "config.toml"  # read from the current folder when neither names one


def config_file(given: str | None, environ: Mapping[str, str] | None = None,
                folder: Path | None = None) -> tuple[str | None, str]:
    """The configuration file a command reads, and why: `--config FILE`, else
    `MEMORY_GATEWAY_CONFIG`, else `./config.toml` when there is one; else none (defaults)."""
    environ = os.environ if environ is None else environ
    if given:
        return given, "--config"
    if environ.get(CONFIG_ENV):
        return environ[CONFIG_ENV], CONFIG_ENV
    local = (folder or Path.cwd()) / LOCAL_CONFIG
    if local.is_file():
        return str(local), f"{LOCAL_CONFIG} in the current folder"
    return None, "none found"


def load_settings(
    path: str | Path | None = None, environ: Mapping[str, str] | None = None
) -> Settings:
    """Defaults, then the TOML file (if any), then `MEMORY_GATEWAY_*` environment variables."""
    environ = os.environ if environ is None else environ
    settings = Settings()
    if path is not None:
        try:
            with open(path, "rb") as fh:
                data = tomllib.load(fh)
        except FileNotFoundError:
            raise ConfigError(f"configuration file not found: {path}") from None
        except tomllib.TOMLDecodeError as exc:
            raise ConfigError(f"configuration file {path} is not valid TOML: {exc}") from None
        settings = _apply(settings, data, "file")
    env_data: dict[str, Any] = {}
    known_env = {info.env_var: info for info in SETTINGS}
    for name, value in environ.items():
        if not name.startswith(ENV_PREFIX) or name == CONFIG_ENV:
            continue
        info = known_env.get(name)
        if info is None:
            raise ConfigError(f"unknown configuration variable {name}")
        table = env_data
        for part in info.section.split("."):
            table = table.setdefault(part, {})
        table[info.key] = value
    if env_data:
        settings = _apply(settings, env_data, "env")
    return settings


def render_example() -> str:
    """The text of `config.example.toml`: every key with its default and help."""
    lines = [
        "# memory-gateway configuration. Every key is shown with its default.",
        "# Each key can be overridden by MEMORY_GATEWAY_<SECTION>_<KEY> (tables, lists as JSON).",
    ]
    current = None
    for info in SETTINGS:
        if info.section != current:
            current = info.section
            lines += ["", f"[{current}]"]
        lines.append(f"# {info.help} ({info.env_var})")
        lines.append(f"{info.key} = {_toml_value(info.default)}")
    return "\n".join(lines) + "\n"


def _toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, list):
        return json.dumps(value)
    if isinstance(value, dict):
        inner = ", ".join(f"{json.dumps(k)} = {json.dumps(v)}" for k, v in value.items())
        return "{" + (f" {inner} " if inner else "") + "}"
    return repr(value)
