import tomllib
from pathlib import Path

import pytest

from gateway.config import SETTINGS, ConfigError, Settings, load_settings, render_example

ROOT = Path(__file__).resolve().parent.parent


def _keys(table: dict, section: str = "") -> dict:
    """(dotted table name, key) -> value; a nested table (`[rate_limits.upload]`) is its own."""
    found = {}
    for key, value in table.items():
        if isinstance(value, dict) and f"{section}.{key}".strip(".") in SECTIONS:
            found.update(_keys(value, f"{section}.{key}".strip(".")))
        else:
            found[(section, key)] = value
    return found


SECTIONS = {s.section for s in SETTINGS}


def test_example_config_lists_every_setting_with_its_default() -> None:
    example = tomllib.loads((ROOT / "config.example.toml").read_text())
    listed: dict[tuple[str, str], object] = {}

    def walk(section: str, table: dict[str, object]) -> None:  # [auth.jwt] nests in [auth]
        for key, value in table.items():
            if isinstance(value, dict) and any(s.section == f"{section}.{key}" for s in SETTINGS):
                walk(f"{section}.{key}", value)
            else:
                listed[(section, key)] = value

    for section, table in example.items():
        walk(section, table)
    declared = {(s.section, s.key): s.default for s in SETTINGS}
    assert listed == declared


def test_example_config_is_the_rendered_table() -> None:
    assert (ROOT / "config.example.toml").read_text() == render_example()


def test_spec_keys_and_defaults() -> None:
    s = Settings()
    assert (s.server.host, s.server.port) == ("127.0.0.1", 8080)
    assert s.upstream.base_url == ""
    assert (s.upstream.timeout_s, s.upstream.connect_timeout_s) == (60, 5)
    assert s.upstream.user_header == "X-Memory-User-Id"
    assert s.upstream.add_path == "/api/v2/memory/add"
    assert s.upstream.search_path == "/api/v2/memory/search"
    assert s.upstream.flush_path == "/api/v2/memory/flush"
    assert s.resources.flush_after_ingest is True
    assert (s.storage.root, s.storage.database) == ("storage", "storage/_gateway.db")
    assert s.limits.max_body_bytes == 64 * 1024 * 1024
    assert s.limits.max_upload_bytes == 512 * 1024 * 1024
    assert s.limits.max_inline_file_bytes == 25 * 1024 * 1024


def test_database_files_at_their_default_follow_storage_root() -> None:
    moved = load_settings(None, environ={"MEMORY_GATEWAY_STORAGE_ROOT": "/srv/mg"})
    assert moved.storage.database == "/srv/mg/_gateway.db"
    assert moved.dev_engine.database == "/srv/mg/_dev_engine.db"
    kept = load_settings(None, environ={"MEMORY_GATEWAY_STORAGE_ROOT": "/srv/mg",
                                        "MEMORY_GATEWAY_STORAGE_DATABASE": "/db/gw.db",
                                        "MEMORY_GATEWAY_DEV_ENGINE_DATABASE": ":memory:"})
    assert (kept.storage.database, kept.dev_engine.database) == ("/db/gw.db", ":memory:")


def test_file_values_then_environment_override(tmp_path: Path) -> None:
    path = tmp_path / "c.toml"
    path.write_text('[server]\nport = 9000\n[upstream]\nbase_url = "http://a:1"\n'
                    'headers = { "X-Api-Key" = "k" }\n')
    s = load_settings(path, environ={"MEMORY_GATEWAY_UPSTREAM_BASE_URL": "http://b:2",
                                     "MEMORY_GATEWAY_RESOURCES_FLUSH_AFTER_INGEST": "false",
                                     "MEMORY_GATEWAY_UPSTREAM_TIMEOUT_S": "7.5"})
    assert s.server.port == 9000
    assert s.upstream.base_url == "http://b:2"
    assert s.upstream.headers == {"X-Api-Key": "k"}
    assert s.resources.flush_after_ingest is False
    assert s.upstream.timeout_s == 7.5


@pytest.mark.parametrize(
    ("toml", "env", "named"),
    [
        ("[server]\nprot = 1\n", {}, "server.prot"),
        ("[serverz]\nport = 1\n", {}, "serverz"),
        ('[server]\nport = "x"\n', {}, "server.port"),
        ("[upstream]\ntimeout_s = -1\n", {}, "upstream.timeout_s"),
        ('[upstream]\nbase_url = "ftp://x"\n', {}, "upstream.base_url"),
        ('[jobs]\nbase_url = "jobs.internal"\n', {}, "jobs.base_url"),
        ("", {"MEMORY_GATEWAY_JOBS_DEV_DELAY_S": "-1"}, "jobs.dev_delay_s"),
        ("", {"MEMORY_GATEWAY_SERVER_PORT": "eighty"}, "server.port"),
        ("", {"MEMORY_GATEWAY_SERVER_NOPE": "1"}, "MEMORY_GATEWAY_SERVER_NOPE"),
        ("", {"MEMORY_GATEWAY_RESOURCES_FLUSH_AFTER_INGEST": "maybe"}, "flush_after_ingest"),
        ("[server]\nmax_head_bytes = 100\n", {}, "server.max_head_bytes"),
        ("", {"MEMORY_GATEWAY_SERVER_MAX_HEAD_BYTES": "-1"}, "server.max_head_bytes"),
        ("[console]\nsession_ttl_s = 0\n", {}, "console.session_ttl_s"),
    ],
)
def test_bad_value_or_unknown_key_names_the_key(
    tmp_path: Path, toml: str, env: dict[str, str], named: str
) -> None:
    path = tmp_path / "c.toml"
    path.write_text(toml)
    with pytest.raises(ConfigError, match=named):
        load_settings(path, environ=env)


def test_missing_config_file_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="not found"):
        load_settings(tmp_path / "absent.toml", environ={})
