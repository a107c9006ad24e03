"""Which attachment URIs an add may carry (gateway/attachments/uris.py), as tables and properties:
an `s3://` key and a `file://` path are judged as decoded whole, and no other reading of an
allowed URI (decoded never or twice, `\\` taken for `/`, dot segments normalised) leaves the
caller's own prefix or folder."""

from __future__ import annotations

import posixpath
from pathlib import Path
from urllib.parse import unquote, urlparse
from urllib.request import url2pathname

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gateway.attachments.uris import uri_allowed
from gateway.config import StorageSettings

STORE = StorageSettings(files="s3://bucket/prefix")
OWN = "s3://bucket/prefix/bob/resources/res_1/photo.png"

S3_REFUSED = [
    # the finding: the key split first, each piece decoded after
    "s3://bucket/prefix/bob/x%2F..%2F..%2Falice/resources/res_1/secret.png",
    "s3://bucket/prefix/bob/x%2f..%2f..%2falice/resources/res_1/secret.png",
    "s3://bucket/prefix/bob/x%252F..%252F..%252Falice/resources/res_1/secret.png",
    "s3://bucket/prefix/bob/x%5C..%5C..%5Calice/resources/res_1/secret.png",
    "s3://bucket/prefix/bob/x\\..\\..\\alice/resources/res_1/secret.png",
    "s3://bucket/prefix/bob/%2e%2e/alice/resources/res_1/secret.png",
    "s3://bucket/prefix/bob/%2E%2E/alice/resources/res_1/secret.png",
    "s3://bucket/prefix/bob/.%2e/alice/resources/res_1/secret.png",
    "s3://bucket/prefix/bob/%252e%252e/alice/resources/res_1/secret.png",
    "s3://bucket/prefix/bob/..%2Falice/resources/res_1/secret.png",
    "s3://bucket/prefix/bob/../alice/resources/res_1/secret.png",
    "s3://bucket/prefix/bob/./resources/res_1/photo.png",
    "s3://bucket/prefix/bob/resources/res_1/photo.png%00.txt",
    "s3://bucket/prefix/bob%2Fresources/res_1/photo.png",
    "s3://bucket/prefix%2Fbob/resources/res_1/photo.png",
    "s3://bucket/prefix/%61lice/resources/res_1/secret.png",
    "s3://bucket/prefix/bob",
    "s3://bucket/prefix/bob/",
    # the gateway's bucket in other spellings
    "s3://BUCKET/prefix/bob/x%2F..%2F..%2Falice/secret.png",
    "s3://%62ucket/prefix/alice/resources/res_1/secret.png",
    "s3://user@bucket/prefix/alice/resources/res_1/secret.png",
    "s3://bucket:443/prefix/alice/resources/res_1/secret.png",
    "s3:///prefix/bob/resources/res_1/photo.png",
]


@pytest.mark.parametrize("uri", S3_REFUSED)
def test_s3_keys_are_decoded_before_the_owner_is_checked(uri: str) -> None:
    assert not uri_allowed(uri, "bob", STORE), uri


@pytest.mark.parametrize("uri", [
    OWN, "s3://bucket/prefix/bob/resources/res_1/ph%6Fto.png",
    "s3://Bucket/prefix/bob/memory_attachments/att_1/a%20b.png",
    "s3://another-bucket/alice/x%2F..%2Fy.png",  # not the gateway's: the client's to name
])
def test_the_callers_own_objects_and_other_buckets_pass(uri: str) -> None:
    assert uri_allowed(uri, "bob", STORE), uri


# Pieces of a path an attacker strings together: names, separators and dots in every spelling.
PIECES = ["alice", "bob", "x", "/", "..", ".", "%2e", "%2E", "%2F", "%2f", "%252F", "%252e",
          "%25", "%5C", "%5c", "\\", "%00", "%41"]


def readings(path: str) -> set[str]:
    """What a store, a client or a proxy between them may take a key or a path for."""
    found = set()
    for decodings in range(3):
        text = path
        for _ in range(decodings):
            text = unquote(text)
        for separators in (text, text.replace("\\", "/")):
            found.add(posixpath.normpath("/" + separators.lstrip("/")))
    return found


def inside(reading: str, folder: str) -> bool:
    return (reading + "/").startswith(folder + "/")


@given(st.lists(st.sampled_from(PIECES), min_size=1, max_size=12))
def test_no_reading_of_an_allowed_s3_key_leaves_the_callers_prefix(pieces: list[str]) -> None:
    key = "prefix/bob/" + "".join(pieces)
    if uri_allowed(f"s3://bucket/{key}", "bob", STORE):
        for reading in readings(key):
            assert inside(reading, "/prefix/bob"), (key, reading)


@given(st.lists(st.sampled_from(PIECES), min_size=1, max_size=12))
def test_no_reading_of_an_allowed_file_uri_leaves_the_callers_folder(pieces: list[str]) -> None:
    root = "/srv/gateway/storage"
    path = f"{root}/bob/" + "".join(pieces)
    uri = "file://" + path
    if uri_allowed(uri, "bob", StorageSettings(root=root)):
        # EverOS's own reading (urlparse, url2pathname, resolve), and every other one
        assert inside(posixpath.normpath(url2pathname(urlparse(uri).path)), f"{root}/bob")
        for reading in readings(path):
            assert inside(reading, f"{root}/bob"), (path, reading)


def test_file_uris_are_judged_decoded_and_resolved(tmp_path: Path) -> None:
    storage = StorageSettings(root=str(tmp_path))
    own = (tmp_path / "bob" / "resources" / "res_1").resolve()
    own.mkdir(parents=True)
    (own / "photo.png").write_bytes(b"png")
    assert uri_allowed((own / "photo.png").as_uri(), "bob", storage)
    assert uri_allowed((own / "50%off;v2.png").as_uri(), "bob", storage)  # escaped by as_uri
    base = f"file://{tmp_path.resolve()}/bob"
    for uri in (f"{base}/x%2F..%2F..%2Falice/secret.png", f"{base}/x%2f..%2f..%2falice/s.png",
                f"{base}/x%252F..%252F..%252Falice/secret.png", f"{base}/%2e%2e/alice/s.png",
                f"{base}/x%5C..%5C..%5Calice/s.png", f"{base}/x\\..\\..\\alice/s.png",
                f"{base}/photo.png%00.txt", f"{base}/resources/res_1/photo.png?/../../../alice",
                f"{base}/resources/res_1/photo.png#/../../../alice", f"{base}/../alice/s.png"):
        assert not uri_allowed(uri, "bob", storage), uri


def test_resource_uris_are_the_ids_the_gateway_issues() -> None:
    assert uri_allowed("resource://res_0123abcd", "bob", STORE)
    for uri in ("resource://res_1/../x", "resource://res_%2e%2e", "resource://a@res_1",
                "resource://res_1?x=1", "resource://res_1#x", "resource://", "resource:///x"):
        assert not uri_allowed(uri, "bob", STORE), uri
