"""The one form of an id the gateway owns or checks, and the ids engines derive for a user (§5).

Engines read ids in forms of their own: mem0 strips whitespace around `user_id`, `agent_id` and
`run_id` (mem0/memory/main.py `_validate_and_trim_entity_id`), EverMemOS strips request strings
and splits `group_ids` on commas; and some values are no id at all but a wildcard or "no filter"
(mem0's `*`, EverMemOS's `__all__`, an empty string). Rather than guess each engine's folding,
an id is accepted only when it is already in the one form every engine reads as itself: the
user-id grammar of SPEC §3 (sessions, groups and cubes may also hold `:`, the separator of the
gateway's own `resource:{user_id}:{resource_id}` sessions and of MemOS cubes `<user_id>:<name>`).
Anything else — padded, unicode, fullwidth, a wildcard, empty — is a 422 before any owner lookup,
so no spelling of another user's id can reach the engine as theirs. Checked in `Named.add`
(gateway/identity/named.py), through which every route model's ids pass. Pure.
"""

from __future__ import annotations

import hashlib
import re

from gateway.errors import ValidationFailed

# SPEC §3: a user id, an agent id.
PERSON_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._@-]{0,127}")
# A session, group or cube: the same, with `:` (the gateway's resource sessions, MemOS cubes).
OWNED_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._@:-]{0,255}")

# Values engines read as "every one" or "no filter" (docs/engines.md cites each).
MAGIC_VALUES = frozenset({"", "*", "__all__"})

# EverMemOS v0 (and the Cloud's v0): an add without `group_id` goes into the sender's own group,
# `md5(sender)[:16] + "_group"` (request_converter.py `generate_single_user_group_id`); EverCore
# names it `gen_solo_` + `md5(user_id)[:12]` (api_specs/id_generator.py).
_SENDER_GROUP = re.compile(r"[0-9a-f]{16}_group", re.IGNORECASE)
_SOLO_GROUP = re.compile(r"gen_solo_[0-9a-f]{12}", re.IGNORECASE)
# A MemOS cube beyond a user's default one: `<user_id>:<name>`; a user id holds no `:`.
CUBE_SEPARATOR = ":"


def check_id(value: str, where: str, *, owned: bool) -> None:
    """422 unless `value` is an id in its canonical form (`owned`: a session, group or cube)."""
    if (OWNED_ID if owned else PERSON_ID).fullmatch(value) is not None:
        return
    if value.strip() in MAGIC_VALUES or value.strip().casefold() == "__all__":
        raise ValidationFailed(f"{where}: {value!r} is read by engines as every id or no "
                               "filter, never as an id", field=where)
    grammar = OWNED_ID.pattern if owned else PERSON_ID.pattern
    raise ValidationFailed(f"{where} must be an id in canonical form ({grammar}): no "
                           "padding, no other spelling", field=where)


def _md5(text: str) -> str:
    return hashlib.md5(text.encode("utf-8"), usedforsecurity=False).hexdigest()


def sender_groups(user_id: str) -> tuple[str, str]:
    """The groups an engine makes of a user who names none (EverMemOS v0 / Cloud, EverCore)."""
    digest = _md5(user_id)
    return f"{digest[:16]}_group", f"gen_solo_{digest[:12]}"


def derived_group(group_id: str) -> bool:
    """A group id in the form an engine derives for some user: it is that user's alone, and
    who that is cannot be told from the id (so every such id is reserved)."""
    return _SENDER_GROUP.fullmatch(group_id) is not None \
        or _SOLO_GROUP.fullmatch(group_id) is not None


def group_is_derived_for(group_id: str, user_id: str) -> bool:
    return group_id in sender_groups(user_id)


def cube_owner(cube_id: str) -> str:
    """Whose a MemOS cube is, by its name alone: `<user_id>` is that user's default cube (the
    one MemOS reads and writes when a request names none), `<user_id>:<name>` one of theirs."""
    return cube_id.partition(CUBE_SEPARATOR)[0]
