"""Small helpers shared by the reliability tests: keys, the gateway's database and files."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

import httpx

PNG = b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 4


def auth(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


def database(tmp: Path) -> Path:
    """The database of a gateway started by tests.processes.gateway(tmp, ...)."""
    return tmp / "storage" / "_gateway.db"


def db_rows(tmp: Path, sql: str, *params: Any) -> list[dict[str, Any]]:
    conn = sqlite3.connect(database(tmp))
    conn.row_factory = sqlite3.Row
    try:
        return [dict(row) for row in conn.execute(sql, params).fetchall()]
    finally:
        conn.close()


def count(tmp: Path, table: str) -> int:
    return int(db_rows(tmp, f"SELECT COUNT(*) AS n FROM {table}")[0]["n"])


def path_of(uri: str) -> Path:
    return Path(unquote(urlsplit(uri).path))


def user_files(tmp: Path, user: str) -> list[Path]:
    """Every file (temp files included) under storage/{user}/."""
    base = tmp / "storage" / user
    return sorted(p for p in base.rglob("*") if p.is_file()) if base.exists() else []


def assert_error_shape(response: httpx.Response, status: int, code: str) -> dict[str, Any]:
    """The one error shape of SPEC §4, with the X-Request-Id header repeated inside."""
    assert response.status_code == status, response.text
    body = response.json()
    assert set(body) == {"error"}
    error = body["error"]
    assert {"code", "message", "status", "request_id"} <= set(error) <= {
        "code", "message", "status", "request_id", "field", "upstream_status"}
    assert error["code"] == code and error["status"] == status
    assert isinstance(error["message"], str) and error["message"]
    assert error["request_id"] == response.headers["x-request-id"]
    return dict(error)
