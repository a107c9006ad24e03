"""The `memory-gateway` command as a user runs it (SPEC §2): `--config` in any position,
`--version`, which database the key commands used, `keys list` output, quiet ends on a closed
pipe, and exit codes when `serve` cannot start."""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import shutil
import sqlite3
import subprocess
import sys
from datetime import UTC, datetime
from importlib.metadata import version
from pathlib import Path

import pytest

from gateway.cli import build_parser
from gateway.store.database import migrate
from tests.processes import ROOT, free_port, running

TIME = re.compile(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC")


def clean_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMORY_GATEWAY_")}
    env["PYTHONPATH"] = str(ROOT)
    env.update(extra)
    return env


def cli(cwd: Path, *args: str, env: dict[str, str] | None = None,
        timeout: float = 60) -> subprocess.CompletedProcess[str]:
    """`python -m gateway ARGS` run from `cwd` (a folder that is not the checkout)."""
    return subprocess.run([sys.executable, "-m", "gateway", *args], cwd=cwd,
                          env=env or clean_env(), capture_output=True, text=True,
                          timeout=timeout)


def write_config(folder: Path, **sections: dict[str, object]) -> Path:
    lines = []
    for section, values in sections.items():
        lines.append(f"[{section}]")
        lines += [f"{key} = {json.dumps(value)}" for key, value in values.items()]
    path = folder / "gateway.toml"
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.fixture
def config(tmp_path: Path) -> Path:
    return write_config(tmp_path, storage={"root": str(tmp_path / "data"),
                                           "database": str(tmp_path / "data" / "gw.db")})


@pytest.mark.parametrize("order", [
    ["--config", "{c}", "keys", "create", "--user", "bob"],
    ["keys", "--config", "{c}", "create", "--user", "bob"],
    ["keys", "create", "--config", "{c}", "--user", "bob"],
    ["keys", "create", "--user", "bob", "--config", "{c}"],
])
@pytest.mark.processes
def test_config_is_taken_before_or_after_the_commands_arguments(
    tmp_path: Path, config: Path, order: list[str]
) -> None:
    created = cli(tmp_path, *[part.format(c=config) for part in order])

    assert created.returncode == 0, created.stderr
    token = created.stdout.splitlines()[-1]
    listed = cli(tmp_path, "keys", "list", "--user", "bob", "--config", str(config))
    assert token.split("_")[1] in listed.stdout
    assert not (tmp_path / "storage").exists()  # nothing made at the default path
    db = tmp_path / "data" / "gw.db"
    assert f"database {db} (from {config})" in created.stderr


def test_every_command_lists_config_in_its_help() -> None:
    checked = []

    def walk(parser: argparse.ArgumentParser, name: str) -> None:
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for sub_name, sub in action.choices.items():
                    full = f"{name} {sub_name}".strip()
                    assert "--config FILE" in sub.format_help(), f"{full} --help"
                    checked.append(full)
                    walk(sub, full)

    walk(build_parser(), "")
    assert {"serve", "keys", "keys create", "keys list", "keys revoke", "migrate", "doctor",
            "dev-upstream", "gc", "backfill"} <= set(checked)


@pytest.mark.processes
@pytest.mark.parametrize("verb", [["serve"], ["migrate"], ["gc"], ["doctor"], ["dev-upstream"]])
def test_config_after_any_verb_is_read(tmp_path: Path, verb: list[str]) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text("[server]\nno_such_key = 1\n")

    result = cli(tmp_path, *verb, "--config", str(bad))

    # Every command read the file: the unknown key stops it, named.
    assert result.returncode != 0
    assert "no_such_key" in result.stdout + result.stderr


@pytest.mark.processes
def test_version_is_printed() -> None:
    result = cli(ROOT, "--version")
    assert result.returncode == 0
    assert result.stdout.strip() == f"memory-gateway {version('memory-gateway')}"


@pytest.mark.processes
def test_keys_commands_say_which_default_database_they_used(tmp_path: Path) -> None:
    first = cli(tmp_path, "keys", "create", "--user", "alice")
    second = cli(tmp_path, "keys", "list")

    default = tmp_path / "storage" / "_gateway.db"
    assert first.stderr.startswith(f"created database {default} (the default; --config FILE")
    assert second.stderr.startswith(f"using database {default} (the default")
    assert default.exists()


@pytest.mark.processes
def test_keys_list_has_a_header_readable_times_and_json(tmp_path: Path, config: Path) -> None:
    alice = cli(tmp_path, "keys", "create", "--user", "alice", "--config", str(config))
    cli(tmp_path, "keys", "create", "--user", "bob", "--config", str(config))
    alice_id = alice.stdout.splitlines()[-1].split("_")[1]
    assert cli(tmp_path, "keys", "revoke", alice_id, "--config", str(config)).returncode == 0

    table = cli(tmp_path, "keys", "list", "--config", str(config)).stdout.splitlines()
    as_json = json.loads(cli(tmp_path, "keys", "list", "--json", "--config", str(config)).stdout)

    assert table[0].split() == ["KEY", "ID", "KIND", "USER", "ACTS", "FOR", "SCOPES", "STATE",
                                "CREATED", "EXPIRES", "LAST", "USED", "NAME"]
    rows = {line.split()[2]: line for line in table[1:]}
    assert set(rows) == {"alice", "bob"}
    assert " revoked " in rows["alice"] and len(TIME.findall(rows["alice"])) == 1
    assert " active " in rows["bob"] and " user " in rows["bob"] and " read,write " in rows["bob"]
    by_user = {key["userId"]: key for key in as_json}
    assert by_user["alice"]["id"] == alice_id and by_user["alice"]["state"] == "revoked"
    assert by_user["bob"]["revokedAtMs"] is None
    created = datetime.fromtimestamp(by_user["bob"]["createdAtMs"] / 1000, UTC)
    assert abs((datetime.now(UTC) - created).total_seconds()) < 3600
    # the admin API's shape, field for field (KeyOut, camelCase)
    from gateway.routes.admin import KeyOut
    assert set(by_user["bob"]) == {field.alias or name
                                   for name, field in KeyOut.model_fields.items()}


@pytest.mark.processes
def test_output_cut_by_a_closed_pipe_ends_without_a_traceback(
    tmp_path: Path, config: Path
) -> None:
    # An orphan folder with enough files that gc's report overflows the pipe's buffer.
    orphans = tmp_path / "data" / "alice" / "memory_attachments" / "att_lost"
    orphans.mkdir(parents=True)
    for n in range(3000):
        (orphans / f"file-with-a-long-enough-name-{n:05d}.bin").write_bytes(b"x")
    migrate(str(tmp_path / "data" / "gw.db"))
    proc = subprocess.Popen(
        [sys.executable, "-m", "gateway", "gc", "--dry-run", "--grace-seconds", "0",
         "--config", str(config)],
        cwd=tmp_path, env=clean_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert proc.stdout is not None and proc.stderr is not None
    first = proc.stdout.readline()  # like `| head -1`
    proc.stdout.close()
    errors = proc.stderr.read().decode()
    proc.stderr.close()

    assert proc.wait(timeout=60) == 141
    assert first.startswith(b"gc (dry run): would remove 3000 orphan file(s)")
    assert "Traceback" not in errors and "BrokenPipeError" not in errors, errors


@pytest.fixture
def without_schema(tmp_path: Path) -> Path:
    """A copy of the package with no migrations beside or inside it, as a broken install."""
    where = tmp_path / "site"
    shutil.copytree(ROOT / "gateway", where / "gateway",
                    ignore=shutil.ignore_patterns("__pycache__"))
    assert not (where / "gateway" / "migrations").exists()
    return where


@pytest.mark.processes
@pytest.mark.parametrize("args", [["migrate"], ["keys", "create", "--user", "bob"], ["serve"]])
def test_a_command_that_finds_no_migrations_fails_loudly(
    tmp_path: Path, without_schema: Path, args: list[str]
) -> None:
    env = clean_env(PYTHONPATH=str(without_schema),
                    MEMORY_GATEWAY_STORAGE_ROOT=str(tmp_path / "data"),
                    MEMORY_GATEWAY_STORAGE_DATABASE=str(tmp_path / "data" / "gw.db"),
                    MEMORY_GATEWAY_SERVER_PORT=str(free_port()),
                    MEMORY_GATEWAY_DEV_ENGINE_PORT=str(free_port()))

    result = cli(tmp_path, *args, env=env)

    assert result.returncode == 1
    assert result.stderr.strip().splitlines() == [
        f"error: no migrations found in {without_schema / 'migrations'}: this installation "
        "of memory-gateway is incomplete (reinstall it)"]


@pytest.mark.processes
def test_doctor_fails_when_it_finds_no_migrations(tmp_path: Path, without_schema: Path) -> None:
    db = tmp_path / "gw.db"
    sqlite3.connect(db).close()
    env = clean_env(PYTHONPATH=str(without_schema), MEMORY_GATEWAY_STORAGE_DATABASE=str(db),
                    MEMORY_GATEWAY_STORAGE_ROOT=str(tmp_path / "data"))

    result = cli(tmp_path, "doctor", env=env)

    assert result.returncode == 1
    assert re.search(r"^FAIL migrations +cannot read migrations: no migrations found",
                     result.stdout, re.MULTILINE), result.stdout


def serve_env(tmp_path: Path, gateway_port: int, engine_port: int, upstream: str = "",
              ) -> dict[str, str]:
    return clean_env(MEMORY_GATEWAY_SERVER_PORT=str(gateway_port),
                     MEMORY_GATEWAY_DEV_ENGINE_PORT=str(engine_port),
                     MEMORY_GATEWAY_UPSTREAM_BASE_URL=upstream,
                     MEMORY_GATEWAY_STORAGE_ROOT=str(tmp_path / "data"),
                     MEMORY_GATEWAY_STORAGE_DATABASE=str(tmp_path / "data" / "gw.db"),
                     MEMORY_GATEWAY_DEV_ENGINE_DATABASE=str(tmp_path / "engine.db"),
                     MEMORY_GATEWAY_SERVER_LOG_FORMAT="text")


@pytest.mark.processes
@pytest.mark.parametrize("busy", ["gateway", "dev engine"])
def test_serve_on_a_busy_port_says_so_in_one_line(tmp_path: Path, busy: str) -> None:
    gateway_port, engine_port = free_port(), free_port()
    holder_port = gateway_port if busy == "gateway" else engine_port
    holder_env = serve_env(tmp_path / "holder", free_port(), free_port())
    url = f"http://127.0.0.1:{holder_port}"
    with running(["dev-upstream", "--port", str(holder_port), "--database", ":memory:"],
                 holder_env, url + "/health"):
        result = cli(tmp_path, "serve", env=serve_env(tmp_path, gateway_port, engine_port))

    assert result.returncode == 1
    errors = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and f"cannot listen on 127.0.0.1:{holder_port}" in errors[0]
    assert "Traceback" not in result.stderr and "CancelledError" not in result.stderr
    assert "running the built-in dev engine" not in result.stderr  # it never ran


@pytest.mark.processes
def test_serve_says_once_which_uvicorn_lines_are_the_dev_engines(tmp_path: Path) -> None:
    gateway_port = free_port()
    log = tmp_path / "serve.log"
    env = serve_env(tmp_path, gateway_port, free_port())
    with running(["serve"], env, f"http://127.0.0.1:{gateway_port}/healthz", log=log):
        pass
    lines = log.read_text().splitlines()
    assert sum("Started server process" in line for line in lines) == 1, lines
    assert sum("Finished server process" in line for line in lines) == 1, lines
    startup = [line for line in lines if "Application startup complete." in line]
    assert sorted(line.rsplit(" server=", 1)[1] for line in startup) == ['"dev engine"',
                                                                         "gateway"]


@pytest.mark.processes
def test_serve_names_both_busy_ports(tmp_path: Path) -> None:
    gateway_port, engine_port = free_port(), free_port()
    holders = []
    with contextlib.ExitStack() as stack:
        for port in (gateway_port, engine_port):
            env = serve_env(tmp_path / f"holder{port}", free_port(), free_port())
            stack.enter_context(running(["dev-upstream", "--port", str(port), "--database",
                                         ":memory:"], env, f"http://127.0.0.1:{port}/health"))
            holders.append(port)
        result = cli(tmp_path, "serve", env=serve_env(tmp_path, gateway_port, engine_port))

    assert result.returncode == 1
    errors = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert [f"127.0.0.1:{port}" in line for line, port in zip(errors, [engine_port,
            gateway_port], strict=True)] == [True, True], result.stderr
    assert "dev_engine.port" in errors[0] and "server.port" in errors[1]


@pytest.mark.processes
@pytest.mark.parametrize("upstream", ["dev engine", "configured"])
def test_serve_exits_non_zero_when_start_up_fails_after_opening_the_database(
    tmp_path: Path, upstream: str
) -> None:
    db = tmp_path / "data" / "gw.db"
    db.parent.mkdir()
    migrate(str(db))
    with sqlite3.connect(db) as conn:
        conn.execute("DROP TABLE pending_intents")  # read by start-up's recovery
    conn.close()
    base_url = "" if upstream == "dev engine" else f"http://127.0.0.1:{free_port()}"

    # It must end by itself: a process kept alive by database threads times out here.
    result = cli(tmp_path, "serve", env=serve_env(tmp_path, free_port(), free_port(), base_url))

    assert result.returncode == 1
    assert "no such table: pending_intents" in result.stderr
    assert result.stderr.strip().splitlines()[-1] == (
        "error: start-up failed (the log above says why); stopped")


@pytest.mark.processes
def test_keys_create_prints_only_the_key_on_stdout(tmp_path: Path, config: Path) -> None:
    made = cli(tmp_path, "keys", "create", "--user", "alice", "--config", str(config))
    assert made.returncode == 0, made.stderr
    assert re.fullmatch(r"mgw_[0-9a-f]{16}_[A-Za-z0-9_-]+\n", made.stdout)
    assert "not shown again" in made.stderr


@pytest.mark.processes
def test_keys_create_json_and_every_kind(tmp_path: Path, config: Path) -> None:
    service = json.loads(cli(tmp_path, "keys", "create", "--service", "--users", "tenant-a.*",
                             "--scopes", "read", "--name", "backend", "--expires-in", "1d",
                             "--json", "--config", str(config)).stdout)
    admin = json.loads(cli(tmp_path, "keys", "create", "--admin", "--json",
                           "--config", str(config)).stdout)
    assert service["kind"] == "service" and service["users"] == "tenant-a.*"
    assert service["scopes"] == ["read"] and service["name"] == "backend"
    assert service["token"].startswith(f"mgw_{service['id']}_")
    expires = datetime.fromtimestamp(service["expiresAt"] / 1000, UTC)
    assert 23 * 3600 < (expires - datetime.now(UTC)).total_seconds() <= 24 * 3600
    assert admin["kind"] == "admin" and admin["scopes"] == ["read", "write"]
    shown = json.loads(cli(tmp_path, "keys", "show", service["id"], "--config",
                           str(config)).stdout)
    assert shown["id"] == service["id"] and "token" not in shown


@pytest.mark.parametrize("args, message", [
    (["--users", "a*", "--user", "bob"], "--users is for service keys"),
    (["--service", "--admin"], "exclude each other"),
    ([], "--user is required"),
    (["--user", "bob", "--scopes", "delete"], "--scopes"),
    (["--user", "bob", "--expires-in", "soon"], "--expires-in"),
    (["--user", "../etc"], "user id"),
])
@pytest.mark.processes
def test_keys_create_refuses_what_it_cannot_make(
    tmp_path: Path, config: Path, args: list[str], message: str
) -> None:
    made = cli(tmp_path, "keys", "create", *args, "--config", str(config))
    assert made.returncode == 2 and made.stdout == ""
    assert message in made.stderr


@pytest.mark.processes
def test_a_service_key_for_every_user_warns_and_keys_list_shows_each_glob(
    tmp_path: Path, config: Path,
) -> None:
    everyone = cli(tmp_path, "keys", "create", "--service", "--config", str(config))
    tenant = cli(tmp_path, "keys", "create", "--service", "--users", "tenant-a.*",
                 "--config", str(config))
    assert everyone.returncode == tenant.returncode == 0
    assert "may act for every user" in everyone.stderr
    assert "may act for every user" not in tenant.stderr
    table = cli(tmp_path, "keys", "list", "--config", str(config)).stdout.splitlines()
    globs = sorted(line.split()[3] for line in table[1:])
    assert globs == ["*", "tenant-a.*"]
    as_json = json.loads(cli(tmp_path, "keys", "list", "--json", "--config", str(config)).stdout)
    assert sorted(key["users"] for key in as_json) == ["", "tenant-a.*"]  # the admin API's


@pytest.mark.processes
def test_keys_create_for_an_erased_user_is_refused_and_creates_nothing(
    tmp_path: Path, config: Path,
) -> None:
    assert cli(tmp_path, "keys", "create", "--user", "bob", "--config", str(config)).returncode == 0
    erased = cli(tmp_path, "users", "erase", "bob", "--quiet", "--config", str(config))
    assert erased.returncode == 0, erased.stderr
    again = cli(tmp_path, "keys", "create", "--user", "bob", "--config", str(config))
    assert again.returncode == 1 and again.stdout == ""
    assert "erased" in again.stderr
    listed = json.loads(cli(tmp_path, "keys", "list", "--json", "--config", str(config)).stdout)
    assert listed == []


@pytest.mark.processes
def test_users_erase_and_export_of_an_id_never_seen_fail(tmp_path: Path, config: Path) -> None:
    erased = cli(tmp_path, "users", "erase", "nosuchuser", "--quiet", "--config", str(config))
    exported = cli(tmp_path, "users", "export", "nosuchuser", "-o", str(tmp_path / "x.zip"),
                   "--config", str(config))
    assert erased.returncode == exported.returncode == 1
    assert "no such user: nosuchuser" in erased.stderr
    assert "no such user: nosuchuser" in exported.stderr
    assert not (tmp_path / "x.zip").exists()
    again = cli(tmp_path, "users", "erase", "nosuchuser", "--quiet", "--config", str(config))
    assert again.returncode == 1  # nothing was recorded: the id is not blocked


@pytest.mark.processes
def test_fresh_on_an_engine_that_cannot_erase_is_a_one_line_configuration_error(
    tmp_path: Path,
) -> None:
    config = write_config(tmp_path, storage={"root": str(tmp_path / "data")},
                          auth={"erased_users": "fresh"})
    result = cli(tmp_path, "keys", "list", "--config", str(config))
    assert result.returncode == 2
    assert result.stderr.splitlines() == [
        "configuration error: auth.erased_users: fresh needs an engine that deletes a user's "
        "memories, and upstream.flavor everos serves no delete (a returning id would see the "
        "erased user's memories): use refuse"]


@pytest.mark.processes
def test_cli_key_actions_are_in_the_audit_log(tmp_path: Path, config: Path) -> None:
    token = cli(tmp_path, "keys", "create", "--user", "bob", "--config", str(config)).stdout
    key_id = token.split("_")[1]
    cli(tmp_path, "keys", "revoke", key_id, "--config", str(config))
    log = json.loads(cli(tmp_path, "audit", "--json", "--config", str(config)).stdout)
    assert [(e["action"], e["target"]) for e in log] == [("keys.create", key_id),
                                                         ("keys.revoke", key_id)]
    assert all(e["admin_key_id"].startswith("cli") for e in log)


@pytest.mark.processes
def test_config_example_prints_the_full_configuration(tmp_path: Path) -> None:
    from gateway.config import render_example

    shown = cli(tmp_path, "config", "example")
    assert shown.returncode == 0
    assert shown.stdout == render_example()
    assert (ROOT / "config.example.toml").read_text() == shown.stdout


def test_every_option_has_help_text() -> None:
    missing: list[str] = []

    def walk(parser: argparse.ArgumentParser, name: str) -> None:
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for sub_name, sub in action.choices.items():
                    walk(sub, f"{name} {sub_name}".strip())
            elif action.option_strings and not action.help and action.dest != "help":
                missing.append(f"{name} {action.option_strings[0]}")
            elif not action.option_strings and not action.help and action.dest not in (
                    "verb", "keys_verb", "config_verb"):
                missing.append(f"{name} {action.dest}")

    walk(build_parser(), "")
    assert missing == []


async def test_a_started_server_keeps_start_up_objects_out_of_the_collectors_walks() -> None:
    import asyncio
    import gc
    import socket

    from gateway.cli import _uvicorn_server

    async def app(scope: object, receive: object, send: object) -> None:
        if isinstance(scope, dict) and scope["type"] == "lifespan":
            message = await receive()  # type: ignore[operator]
            await send({"type": "lifespan.startup.complete"})  # type: ignore[operator]
            await receive()  # type: ignore[operator]
            await send({"type": "lifespan.shutdown.complete"})  # type: ignore[operator]
            del message

    gc.unfreeze()
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    server = _uvicorn_server(app, "127.0.0.1", sock.getsockname()[1], "warning")
    serving = asyncio.create_task(server.serve(sockets=[sock]))
    try:
        while not server.started:
            await asyncio.sleep(0.01)
        assert gc.get_freeze_count() > 10_000  # the modules, settings and tables made so far
    finally:
        server.should_exit = True
        await serving
        gc.unfreeze()  # the rest of this test process collects as before
        sock.close()
