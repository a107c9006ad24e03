"""Identifiers and clocks shared by the store modules."""

from __future__ import annotations

import secrets
import time


def new_id(prefix: str) -> str:
    """A random id such as `res_3f9c0a1b2c3d4e5f6a7b8c9d` (prefix names the kind of object)."""
    return f"{prefix}_{secrets.token_hex(12)}"


def now_ms() -> int:
    return int(time.time() * 1000)
