"""Safe names and the file store: client names never escape their folder."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gateway.attachments.files import DiskFileStore, last_segment, safe_name


@settings(max_examples=2000)
@given(st.text(max_size=400))
def test_safe_name_never_escapes_is_never_empty_and_is_short(name: str) -> None:
    safe = safe_name(name)
    assert safe and safe not in (".", "..")
    assert "/" not in safe and "\\" not in safe and "\x00" not in safe
    assert len(safe.encode()) <= 255
    folder = Path("/srv/x")
    assert (folder / safe).resolve().parent == folder


@settings(max_examples=1000)
@given(st.text(alphabet=st.characters(blacklist_characters="/\\\x00.",
                                      blacklist_categories=("Cc",)), min_size=1, max_size=30),
       st.sampled_from(["png", "jpg", "pdf", "tar.gz"]))
def test_safe_name_keeps_the_extension(stem: str, ext: str) -> None:
    assert safe_name(f"{stem}.{ext}").endswith("." + ext.split(".")[-1])


@pytest.mark.parametrize(
    ("name", "expected"),
    [("../x/photo.png", "photo.png"), ("C:\\a\\photo.png", "photo.png"), ("", "file"),
     ("..", "file"), ("a\x00b.png", "a_b.png"), ("con.txt", "file_con.txt"),
     ("0..0.", "0.0"), ("photo.png. ", "photo.png")],
)
def test_hostile_names(name: str, expected: str) -> None:
    assert safe_name(name) == expected


def test_last_segment_handles_both_separators() -> None:
    assert last_segment("a/b\\c.png") == "c.png"


async def test_atomic_write_leaves_no_temp_file_and_limit_cleans_up(tmp_path: Path) -> None:
    store = DiskFileStore(tmp_path)
    folder = store.folder("alice", "resources", "res_1")
    stored = await store.write_bytes(folder, "a.png", b"abc")
    assert (Path(folder) / "a.png").read_bytes() == b"abc" and stored.size == 3
    assert stored.uri == (Path(folder) / "a.png").as_uri()
    assert [p.name for p in Path(folder).iterdir()] == ["a.png"]

    async def too_much():
        yield b"x" * 10
        yield b"x" * 10

    other = store.folder("alice", "resources", "res_2")
    with pytest.raises(Exception, match="limit"):
        await store.write_stream(other, "b.bin", too_much(), 15)
    assert not Path(other).exists()


@pytest.mark.parametrize(("user", "obj"), [("../x", "r1"), ("alice", "../r"), ("_sys", "r")])
def test_folders_refuse_unsafe_ids(tmp_path: Path, user: str, obj: str) -> None:
    with pytest.raises(Exception):  # noqa: B017 - any refusal will do, as long as it refuses
        DiskFileStore(tmp_path).folder(user, "resources", obj)


def test_only_files_of_object_folders_are_the_stores(tmp_path: Path) -> None:
    store = DiskFileStore(tmp_path)
    root = tmp_path.resolve()
    inside = (root / "alice" / "resources" / "res_1" / "a.png").as_uri()
    assert store.location(inside) == str(root / "alice" / "resources" / "res_1" / "a.png")
    assert store.folder_of(inside) == str(root / "alice" / "resources" / "res_1")
    for outside in (f"file://{root}/alice/resources/../x", f"file://{root}/alice/notes.txt",
                    f"file://{root}/_other/resources/r/x.png", "file:///etc/passwd",
                    f"file://{root}/alice/secrets/res_1/a.png", "https://cdn.example/a.png",
                    f"file://{root}/alice/resources/res_1/../../../../etc/passwd"):
        assert store.location(outside) is None, outside
