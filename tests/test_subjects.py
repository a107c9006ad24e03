"""`user_id_map = "encode"` (gateway/identity/subjects.py): every subject becomes a valid user id,
deterministically, and no two subjects become the same one."""

from __future__ import annotations

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from gateway.identity.subjects import decode_subject, encode_subject, is_user_id

# What providers send and what an attacker would try: their separators, the escape character
# itself, lookalikes of an encoded form, non-ASCII, control characters and very long subjects.
ALPHABET = st.sampled_from(list("aZ09._@-|:/ x%~+=\\\0\n") + ["é", "ü", "\u202e", "😀", "_",
                                                               "_7C", "x_", "h_"])
SUBJECTS = st.one_of(
    st.text(),
    st.lists(ALPHABET, max_size=60).map("".join),
    st.text(alphabet="ab_", min_size=100, max_size=200),
)


@pytest.mark.parametrize(("subject", "user_id"), [
    ("bob", "bob"),
    ("alice@example.com", "alice@example.com"),
    ("auth0|abc", "x_auth0_7Cabc"),
    ("google-oauth2|123", "x_google-oauth2_7C123"),
    ("a_b", "x_a_5Fb"),
    ("x_auth0_7Cabc", "x_x_5Fauth0_5F7Cabc"),
    ("-leading-dash", "x_-leading-dash"),
    ("é", "x__C3_A9"),
])
def test_documented_examples(subject: str, user_id: str) -> None:
    assert encode_subject(subject) == user_id


@given(SUBJECTS)
@example("")
@example("a" * 128)
@example("a" * 129)
@example("|" * 42)
def test_every_subject_becomes_a_valid_user_id(subject: str) -> None:
    assert is_user_id(encode_subject(subject))


@given(SUBJECTS)
def test_encoding_is_undone_unless_it_is_a_digest(subject: str) -> None:
    encoded = encode_subject(subject)
    decoded = decode_subject(encoded)
    if encoded.startswith("h_"):
        assert decoded is None and len(encoded) == 66
    else:
        assert decoded == subject


@given(SUBJECTS, SUBJECTS)
def test_distinct_subjects_never_share_a_user_id(first: str, second: str) -> None:
    if first != second:
        assert encode_subject(first) != encode_subject(second)


@given(st.from_regex(r"[A-Za-z0-9][A-Za-z0-9.@-]{0,127}", fullmatch=True))
def test_valid_user_ids_without_underscore_are_kept(subject: str) -> None:
    assert encode_subject(subject) == subject


@given(SUBJECTS)
def test_a_subject_spelled_as_anothers_encoding_gets_another_id(subject: str) -> None:
    encoded = encode_subject(subject)
    if encoded != subject:  # an attacker registering the encoded form as their own subject
        assert encode_subject(encoded) != encoded
