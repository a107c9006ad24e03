"""`memory-gateway doctor` run as a subprocess against temp configurations, good and broken."""

from __future__ import annotations

import os
import shutil
import socket
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from gateway.search import page_scan
from gateway.store.database import migrate
from tests.postgres_server import PostgresServer
from tests.processes import ROOT, dev_engine, free_port, running
from tests.s3_server import S3Server


def write_config(tmp: Path, base_url: str, **storage: str) -> Path:
    root = storage.get("root", str(tmp / "storage"))
    database = storage.get("database", str(tmp / "storage" / "_gateway.db"))
    path = tmp / "config.toml"
    path.write_text(
        f'[upstream]\nbase_url = "{base_url}"\n'
        f'[storage]\nroot = "{root}"\ndatabase = "{database}"\n'
        f"[dev_engine]\nport = {free_port()}\n"
    )
    return path


def doctor(config: Path) -> tuple[int, list[str]]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMORY_GATEWAY_")}
    done = subprocess.run(
        [sys.executable, "-m", "gateway", "doctor", "--config", str(config)],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=60,
    )
    return done.returncode, done.stdout.splitlines()


def line(lines: list[str], name: str) -> str:
    found = [text for text in lines if text[5:].startswith(name + " ")]
    assert found, f"no {name!r} check in {lines}"
    return found[0]


def fix_after(lines: list[str], name: str) -> str:
    index = lines.index(line(lines, name))
    return lines[index + 1].strip()


@pytest.fixture(scope="module")
def engine_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with dev_engine(tmp_path_factory.mktemp("engine")) as url:
        yield url


@pytest.mark.processes
def test_a_healthy_installation_passes(tmp_path: Path, engine_url: str) -> None:
    config = write_config(tmp_path, engine_url)
    migrate(str(tmp_path / "storage" / "_gateway.db"))
    code, lines = doctor(config)
    assert code == 0, lines
    for name in ("configuration", "database", "migrations", "storage", "upstream", "flavour"):
        assert line(lines, name).startswith("OK "), lines
    assert "memory-gateway dev engine" in line(lines, "upstream")
    assert lines[-1].startswith("doctor: ") and "0 failure(s)" in lines[-1]
    built = "OK   search        C page scanner built" if page_scan.AVAILABLE else "WARN search"
    assert line(lines, "search").startswith(built)


@pytest.mark.processes
def test_a_fresh_installation_warns_but_passes(tmp_path: Path) -> None:
    code, lines = doctor(write_config(tmp_path, ""))
    assert code == 0, lines
    assert line(lines, "database").startswith("WARN")
    assert "memory-gateway migrate --config" in fix_after(lines, "database")
    assert line(lines, "storage").startswith("WARN")
    assert line(lines, "upstream").startswith("WARN")
    assert "dev engine" in line(lines, "upstream")
    assert line(lines, "tools").startswith("OK   tools         3 from (built-in")
    assert line(lines, "jobs").startswith("WARN") and "dev job runner" in line(lines, "jobs")


@pytest.mark.processes
def test_fresh_erased_users_on_an_engine_that_cannot_erase_fails(tmp_path: Path) -> None:
    config = write_config(tmp_path, "")
    config.write_text(config.read_text() + '[auth]\nerased_users = "fresh"\n')
    code, lines = doctor(config)
    assert code == 1
    assert line(lines, "upstream").startswith("FAIL")
    assert "auth.erased_users: fresh needs an engine" in line(lines, "upstream")


@pytest.mark.processes
def test_a_broken_tool_registry_fails_naming_it(tmp_path: Path) -> None:
    registry = tmp_path / "tools.json"
    registry.write_text('[{"name": "x"}]')
    config = write_config(tmp_path, "")
    config.write_text(config.read_text() + f'\n[tools]\nregistry = "{registry}"\n'
                      '\n[jobs]\nbase_url = "http://jobs.internal"\n')
    code, lines = doctor(config)
    assert code == 1
    assert line(lines, "tools").startswith("FAIL") and str(registry) in line(lines, "tools")
    assert line(lines, "jobs").startswith("OK") and "http://jobs.internal" in line(lines, "jobs")


@pytest.mark.processes
def test_invalid_configuration_fails(tmp_path: Path) -> None:
    config = tmp_path / "config.toml"
    config.write_text("[upstream]\nbase_url = 'ftp://nowhere'\n")
    code, lines = doctor(config)
    assert code == 1
    assert line(lines, "configuration").startswith("FAIL")
    assert "upstream.base_url" in line(lines, "configuration")
    assert fix_after(lines, "configuration").startswith("fix: ")


@pytest.mark.processes
def test_unreachable_upstream_fails_with_a_fix(tmp_path: Path) -> None:
    code, lines = doctor(write_config(tmp_path, f"http://127.0.0.1:{free_port()}"))
    assert code == 1
    assert line(lines, "upstream").startswith("FAIL")
    assert "upstream.base_url" in fix_after(lines, "upstream")


@pytest.mark.processes
def test_an_upstream_without_the_engine_paths_fails_the_flavour_check(
    tmp_path: Path, engine_url: str
) -> None:
    config = write_config(tmp_path, engine_url)
    text = config.read_text().replace("[upstream]\n", '[upstream]\nsearch_path = "/nowhere"\n')
    config.write_text(text)
    code, lines = doctor(config)
    assert code == 1
    assert line(lines, "flavour").startswith("FAIL")
    assert "/nowhere" in line(lines, "flavour")


@pytest.mark.processes
def test_a_corrupt_database_fails(tmp_path: Path) -> None:
    database = tmp_path / "storage" / "_gateway.db"
    database.parent.mkdir()
    database.write_bytes(b"this is not a database" * 100)
    code, lines = doctor(write_config(tmp_path, ""))
    assert code == 1
    assert line(lines, "database").startswith("FAIL")


@pytest.mark.processes
def test_pending_and_unknown_migrations_are_reported(tmp_path: Path) -> None:
    database = tmp_path / "storage" / "_gateway.db"
    migrate(str(database))
    conn = sqlite3.connect(database)
    conn.execute("DELETE FROM schema_migrations WHERE version = (SELECT MAX(version) "
                 "FROM schema_migrations)")
    conn.commit()
    code, lines = doctor(write_config(tmp_path, ""))
    assert code == 0
    assert line(lines, "migrations").startswith("WARN") and "1 pending" in line(lines, "migrations")
    conn.execute("INSERT INTO schema_migrations VALUES (9999, 'from_the_future', 0)")
    conn.commit()
    conn.close()
    code, lines = doctor(write_config(tmp_path, ""))
    assert code == 1
    assert line(lines, "migrations").startswith("FAIL") and "9999" in line(lines, "migrations")


@pytest.mark.processes
def test_a_storage_root_that_is_a_file_fails(tmp_path: Path) -> None:
    root = tmp_path / "not-a-folder"
    root.write_text("x")
    code, lines = doctor(write_config(tmp_path, "", root=str(root)))
    assert code == 1
    assert line(lines, "storage").startswith("FAIL")
    assert "not a folder" in line(lines, "storage")


def test_low_free_space_warns(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from gateway.config import Settings
    from gateway.ops import doctor as checks

    root = tmp_path / "storage"
    root.mkdir()
    usage = shutil.disk_usage(tmp_path)._replace(free=100 * 1024 * 1024)
    monkeypatch.setattr(checks.shutil, "disk_usage", lambda path: usage)
    settings = Settings().with_values(
        storage={"root": str(root), "database": str(root / "_gateway.db")}
    )
    [writable, space] = list(checks.check_storage(settings))
    assert writable.level == "OK"
    assert (space.level, space.name) == ("WARN", "disk space")
    assert "100.0 MiB free" in space.detail and space.fix


@pytest.mark.processes
def test_a_flavour_the_dev_engine_cannot_speak_needs_a_base_url(tmp_path: Path) -> None:
    config = write_config(tmp_path, "")
    config.write_text(config.read_text().replace("[upstream]\n", '[upstream]\nflavor = "mem0"\n'))
    code, lines = doctor(config)
    assert code == 1
    assert line(lines, "upstream").startswith("FAIL") and "mem0" in line(lines, "upstream")


@pytest.mark.processes
def test_a_running_gateways_own_dev_engine_is_not_a_warning(tmp_path: Path) -> None:
    config = write_config(tmp_path, "")
    config.write_text(config.read_text() + f"[server]\nport = {free_port()}\n")
    port = int(config.read_text().split("[dev_engine]\nport = ")[1].split()[0])
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMORY_GATEWAY_")}
    with running(["serve", "--config", str(config)], env,
                 f"http://127.0.0.1:{port}/health"):
        code, lines = doctor(config)
    assert code == 0, lines
    assert line(lines, "dev engine").startswith(f"OK   dev engine    running on 127.0.0.1:{port}")
    assert not [text for text in lines if "already in use" in text], lines


@pytest.mark.processes
def test_a_dev_engine_port_held_by_something_else_warns(tmp_path: Path) -> None:
    config = write_config(tmp_path, "")
    port = int(config.read_text().split("[dev_engine]\nport = ")[1].split()[0])
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", port))
        holder.listen()
        code, lines = doctor(config)
    assert code == 0, lines
    assert line(lines, "dev engine").startswith("WARN") and "something else" in line(
        lines, "dev engine")
    assert "dev_engine.port" in fix_after(lines, "dev engine")


@pytest.mark.processes
def test_the_advice_for_an_unbuilt_page_scanner_rebuilds(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from gateway.config import Settings
    from gateway.ops import doctor as checks

    monkeypatch.setattr(page_scan, "AVAILABLE", False)
    check = checks._check_search(Settings())
    assert check.level == "WARN" and "scripts/setup-venv --force" in check.fix

    # `--force` reinstalls although the stamp says nothing changed; without it nothing runs.
    copy = tmp_path / "checkout"
    (copy / "scripts").mkdir(parents=True)
    for script in ("setup-venv", "progress"):  # pip's lines go through scripts/progress
        shutil.copy(ROOT / "scripts" / script, copy / "scripts")
    for name in ("pyproject.toml", "setup.py"):
        shutil.copy(ROOT / name, copy / name)
    calls = copy / "calls"
    stub = copy / ".venv" / "bin" / "python"
    stub.parent.mkdir(parents=True)
    stub.write_text(f'#!/bin/sh\necho "$@" >> {calls}\n')
    stub.chmod(0o755)
    os.utime(copy / "pyproject.toml", (0, 0))
    os.utime(copy / "setup.py", (0, 0))
    subprocess.run([copy / "scripts" / "setup-venv"], check=True, timeout=60)  # installs, stamps
    calls.unlink()

    subprocess.run([copy / "scripts" / "setup-venv"], check=True, timeout=60)
    assert not calls.exists()
    subprocess.run([copy / "scripts" / "setup-venv", "--force"], check=True, timeout=60)
    assert calls.read_text().split() == ["-m", "pip", "install", "--disable-pip-version-check",
                                         "--progress-bar", "off", "-e", "."]


def test_postgresql_reachability_and_migrations_are_checked(
    tmp_path: Path, engine_url: str, postgres: PostgresServer
) -> None:
    url = postgres.create_database()
    config = write_config(tmp_path, engine_url, database=url)
    code, lines = doctor(config)
    assert code == 0, lines
    assert line(lines, "database").startswith("OK ") and "reachable" in line(lines, "database")
    assert line(lines, "cache notifications").startswith("OK "), lines
    assert line(lines, "migrations").startswith("WARN") and "pending" in line(lines, "migrations")
    migrate(url)
    code, lines = doctor(config)
    assert line(lines, "migrations").startswith("OK "), lines

    secret = f"postgresql://gateway:s3cret@127.0.0.1:{free_port()}/nowhere"
    code, lines = doctor(write_config(tmp_path, engine_url, database=secret))
    assert code == 1
    assert line(lines, "database").startswith("FAIL") and "cannot reach" in line(lines, "database")
    assert "s3cret" not in "\n".join(lines)


def test_files_on_s3_are_probed_and_a_wrong_store_fails_with_a_fix(
    tmp_path: Path, engine_url: str, s3_server: S3Server, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name, value in s3_server.env().items():
        monkeypatch.setenv(name, value)
    config = write_config(tmp_path, engine_url)
    migrate(str(tmp_path / "storage" / "_gateway.db"))
    good = f'files = "s3://{s3_server.bucket}/doctor"\n' \
           f's3_endpoint_url = "{s3_server.endpoint_url}"\n'
    config.write_text(config.read_text().replace("[storage]\n", f"[storage]\n{good}"))
    code, lines = doctor(config)
    assert code == 0, lines
    assert line(lines, "file store").startswith("OK "), lines
    assert s3_server.client().list_objects_v2(
        Bucket=s3_server.bucket, Prefix="doctor/").get("KeyCount", 0) == 0  # probe removed
    config.write_text(config.read_text().replace(s3_server.endpoint_url,
                                                 f"http://127.0.0.1:{free_port()}"))
    code, lines = doctor(config)
    assert code == 1
    assert line(lines, "file store").startswith("FAIL "), lines
    assert "AWS_* credentials" in fix_after(lines, "file store")


@pytest.mark.processes
@pytest.mark.parametrize("named_by", ["--config", "MEMORY_GATEWAY_CONFIG", "current folder"])
def test_doctor_says_which_configuration_file_it_read(tmp_path: Path, named_by: str) -> None:
    """The rule: --config FILE, else MEMORY_GATEWAY_CONFIG, else ./config.toml."""
    config = write_config(tmp_path, f"http://127.0.0.1:{free_port()}")
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMORY_GATEWAY_")}
    args = [sys.executable, "-m", "gateway", "doctor"]
    if named_by == "--config":
        args += ["--config", str(config)]
    elif named_by == "MEMORY_GATEWAY_CONFIG":
        env["MEMORY_GATEWAY_CONFIG"] = str(config)
    cwd = tmp_path if named_by == "current folder" else ROOT
    env["PYTHONPATH"] = str(ROOT)
    done = subprocess.run(args, cwd=cwd, env=env, capture_output=True, text=True, timeout=60)
    lines = done.stdout.splitlines()
    origin = {"--config": "--config", "MEMORY_GATEWAY_CONFIG": "MEMORY_GATEWAY_CONFIG",
              "current folder": "config.toml in the current folder"}[named_by]
    assert line(lines, "config file").endswith(f"{config} ({origin})"), lines
    assert str(tmp_path / "storage" / "_gateway.db") in done.stdout  # its values were read


@pytest.mark.processes
def test_doctor_without_a_configuration_file_says_how_to_name_one(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMORY_GATEWAY_")}
    env["PYTHONPATH"] = str(ROOT)
    env["MEMORY_GATEWAY_STORAGE_ROOT"] = str(tmp_path / "storage")
    done = subprocess.run([sys.executable, "-m", "gateway", "doctor"], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=60)
    assert "MEMORY_GATEWAY_CONFIG or ./config.toml" in line(done.stdout.splitlines(),
                                                           "config file")
