"""How a JWT's subject becomes a user id (`auth.jwt.user_id_map`, docs/identity.md).

`strict`: the subject must already be a user id. `encode`: every subject maps to a valid user id,
deterministically and without collisions:

1. a valid user id with no `_` in it stays as it is (`bob`, `alice@example.com`);
2. anything else becomes `x_` + the subject with every character outside `[A-Za-z0-9.@-]`
   (`_` included) written as `_` and two upper-case hex digits per UTF-8 byte
   (`auth0|abc` → `x_auth0_7Cabc`, `a_b` → `x_a_5Fb`);
3. when that is longer than a user id may be, `h_` + the SHA-256 hex digest of the subject.

Rule 1's results hold no `_` and rule 2's and 3's all do, starting with different prefixes, so the
three cannot meet; rule 2 is undone by `decode_subject`, so it is injective; rule 3 is as
collision-free as SHA-256.
"""

from __future__ import annotations

import hashlib
import re

from gateway.identity.auth import USER_ID

_PLAIN = re.compile(r"[A-Za-z0-9.@-]")
_ESCAPED = re.compile(r"_([0-9A-F]{2})")
ESCAPE_PREFIX = "x_"
DIGEST_PREFIX = "h_"
_MAX_USER_ID = 128


def is_user_id(value: str) -> bool:
    return USER_ID.fullmatch(value) is not None


def encode_subject(subject: str) -> str:
    """The user id a subject maps to under `user_id_map = "encode"`."""
    if is_user_id(subject) and "_" not in subject:
        return subject
    escaped = ESCAPE_PREFIX + "".join(
        char if _PLAIN.fullmatch(char) else "".join(f"_{byte:02X}" for byte in char.encode())
        for char in subject
    )
    if len(escaped) <= _MAX_USER_ID:
        return escaped
    return DIGEST_PREFIX + hashlib.sha256(subject.encode()).hexdigest()


def decode_subject(user_id: str) -> str | None:
    """The subject an escaped (rule 1 or 2) user id came from; None for a digest (rule 3)."""
    if user_id.startswith(DIGEST_PREFIX):
        return None
    if not user_id.startswith(ESCAPE_PREFIX):
        return user_id
    raw = _ESCAPED.sub(lambda m: "\0" + m.group(1), user_id[len(ESCAPE_PREFIX):])
    out = bytearray()
    parts = raw.split("\0")
    out += parts[0].encode()
    for part in parts[1:]:
        out.append(int(part[:2], 16))
        out += part[2:].encode()
    return out.decode()
