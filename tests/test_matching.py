"""Raw walking and filename matching: pure functions, checked against the naive definitions."""

from __future__ import annotations

import json
import platform
import random
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gateway.search import page_scan
from gateway.search.answers import scanned_answer
from gateway.search.index import _build
from gateway.search.matching import (
    FilenameMatcher,
    matched_string,
    searchable_text,
    walk_strings,
)
from gateway.serving import jsonio

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=20),
    lambda children: st.lists(children, max_size=4)
    | st.dictionaries(st.sampled_from(["a", "base64", "text", "name", "b"]), children,
                      max_size=4),
    max_leaves=30,
)


def naive_strings(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for k, v in value.items() if k != "base64" for s in naive_strings(v)]
    if isinstance(value, list):
        return [s for v in value for s in naive_strings(v)]
    return []


@settings(max_examples=1000)
@given(json_values)
def test_walk_reads_every_string_except_under_base64(value: Any) -> None:
    assert sorted(walk_strings(value)) == sorted(naive_strings(value))


def test_walk_skips_base64_at_any_depth_but_not_other_keys() -> None:
    raw = {"base64": "hidden.png", "x": [{"base64": "also.png", "name": "shown.png"}],
           "base64_like": "kept.png"}
    assert sorted(walk_strings(raw)) == ["kept.png", "shown.png"]


filenames = st.builds(
    lambda stem, ext: f"{stem}.{ext}" if ext else stem,
    st.text(alphabet="abcXYZ-_ .1é图", min_size=1, max_size=8),
    st.sampled_from(["png", "PNG", "jpg", "tar.gz", "", "p"]),
)


@settings(max_examples=1000)
@given(st.lists(filenames, min_size=1, max_size=8),
       st.lists(st.text(alphabet="abcXYZ-_ .1é图pngjPG", max_size=30) | filenames, max_size=6))
def test_matcher_finds_exactly_the_names_that_occur(names: list[str], pieces: list[str]) -> None:
    text = searchable_text(pieces)
    expected = {n.lower() for n in names if n.lower() in text}
    assert FilenameMatcher(names).find(text) == expected


def test_matching_is_case_insensitive_and_needs_the_full_name() -> None:
    matcher = FilenameMatcher(["Photo.PNG", "notes.txt", "README"])
    assert matcher.find(searchable_text(["see photo.png and readme"])) == {"photo.png", "readme"}
    assert matcher.find(searchable_text(["photo.pn", "hoto.png"])) == set()
    assert matcher.find(searchable_text(["a photo.pngx"])) == {"photo.png"}


def test_a_match_never_spans_two_strings() -> None:
    assert FilenameMatcher(["a.png"]).find(searchable_text(["a", ".png"])) == set()


def test_matching_cost_grows_linearly_with_the_text() -> None:
    names = [f"image-{i}.png" for i in range(200)]
    matcher = FilenameMatcher(names)
    text = searchable_text(["lorem ipsum. " * 2000 + "image-7.png"])
    assert matcher.find(text) == {"image-7.png"}


def test_a_name_holding_nul_never_matches() -> None:
    # The walk joins strings with NUL: such a name could only "occur" across two strings.
    matcher = FilenameMatcher(["a\x00b.png", "c.png"])
    assert matcher.find(searchable_text(["a", "b.png c.png"])) == {"c.png"}
    assert matcher.find(searchable_text(["a\x00b.png"])) == set()


# --- the automaton: the Python matcher, the C matcher and the naive definition agree ----------

# Few letters, so names overlap, nest and share prefixes and suffixes; dots, so names have
# one extension, several or none; non-ASCII, whose lower case differs in length ("İ").
tight = "abAB.-é图İ"
tight_names = st.text(alphabet=tight + "\x00", min_size=0, max_size=12)


def _scanned_names(names: list[str], strings: list[str], ensure_ascii: bool) -> set[str] | None:
    """The names the C page scanner attaches to one item holding `strings`: the same whether
    its matcher probes the names' hash table (where the names allow it) or walks the
    automaton alone."""
    rows = [{"id": f"att_{n}", "name": name, "content_type": "image/png",
             "internal_uri": f"file:///{n}", "source": "memory_add_uri"}
            for n, name in enumerate(names)]
    body = json.dumps({"results": [{"session_id": "s1", "text": strings[:1], "more": strings[1:]}]},
                      ensure_ascii=ensure_ascii).encode()
    page = page_scan.scan(body, False)
    if page is None:
        return None
    found = []
    for probe in (True, False):
        out, _ = scanned_answer(page, set(), {"s1": _build(1, rows, probe=probe)})
        found.append({a["name"].lower() for a in jsonio.loads(out)["results"][0]["attachments"]})
    assert found[0] == found[1], "probing and the automaton found different names"
    return found[0]


def _naive(names: list[str], strings: list[str]) -> set[str]:
    lowered = [s.lower() for s in strings]
    return {n.lower() for n in names
            if n.lower() and "\x00" not in n.lower() and any(n.lower() in s for s in lowered)}


@settings(max_examples=600, deadline=None)
@given(st.lists(tight_names, max_size=10),
       st.lists(st.text(alphabet=tight, max_size=60) | tight_names, min_size=1, max_size=5),
       st.booleans(), st.data())
def test_python_and_c_matchers_agree_with_the_naive_definition(
    names: list[str], strings: list[str], ensure_ascii: bool, data: st.DataObject
) -> None:
    # texts that hold some of the names, glued to each other and to stray characters
    if names:
        glued = data.draw(st.lists(st.sampled_from(names) | st.text(alphabet=tight, max_size=3),
                                   max_size=8))
        strings = [*strings, "".join(glued)]
    walked = [*strings, "s1"]  # the item's session id is one of its strings too
    expected = _naive(names, walked)
    assert FilenameMatcher(names).find(searchable_text(walked)) == expected
    if page_scan.AVAILABLE:
        distinct = sorted({n.lower() for n in names})  # what a session's matcher is built from
        assert _scanned_names(distinct, strings, ensure_ascii) == expected


# The C matcher skips ordinary text sixteen bytes at a time to where a name's first three bytes
# may be (eight buckets of first bytes, read through nibble tables): many distinct first bytes
# share buckets and let through positions no name starts at; names sit at every offset of a
# block, at a string's end, one byte long, upper-cased.
wide = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789 .-_é"


@settings(max_examples=400, deadline=None)
@given(st.lists(st.text(alphabet=wide, min_size=1, max_size=10), min_size=1, max_size=40),
       st.data())
def test_text_skipped_to_where_names_may_start_agrees_with_the_naive_definition(
    names: list[str], data: st.DataObject
) -> None:
    piece = st.one_of(
        st.builds(lambda name, upper: name.upper() if upper else name,
                  st.sampled_from(names), st.booleans()),
        st.text(alphabet=wide, max_size=40))
    strings = ["".join(data.draw(st.lists(piece, max_size=8)))
               for _ in range(data.draw(st.integers(1, 3)))]
    walked = [*strings, "s1"]
    expected = _naive(names, walked)
    if page_scan.AVAILABLE:
        distinct = sorted({n.lower() for n in names})
        assert _scanned_names(distinct, strings, True) == expected


def test_a_name_is_found_at_every_offset_of_the_skipped_blocks() -> None:
    names = ["q", "zx", "report.pdf", "IMG_0001.JPG"]
    filler = "the user shared some files and talked at length about them "
    for name in names:
        for offset in range(0, 40):
            for tail in ("", "!", filler[:20]):
                text = filler[:offset] + name + tail
                found = _scanned_names(sorted(n.lower() for n in names), [text], True)
                assert found is None or found == _naive(names, [text, "s1"]), (name, offset)
                assert found is None or name.lower() in found


def test_names_without_an_extension_long_and_nested_are_all_found() -> None:
    names = ["a" * k for k in range(1, 60)] + ["b" * 200, "ab" * 50, "a.b.c.d", "c.d", "d"]
    text = "x" + "a" * 70 + "y" + "ab" * 60 + "a.b.c.d"
    expected = _naive(names, [text, "s1"])
    assert FilenameMatcher(names).find(searchable_text([text, "s1"])) == expected
    assert _scanned_names(names, [text], True) in (None, expected)
    assert "b" * 200 not in expected and "a" * 59 in expected and "c.d" in expected


# Long names sharing long prefixes: the C matcher compares text that follows a name with the
# name's bytes eight at a time (runs, at most 255 states each), and puts that off while the text
# keeps leaving the name; the answer is still the naive one.
@settings(max_examples=300, deadline=None)
@given(st.text(alphabet="abAB.é@[", max_size=300), st.data())
def test_long_names_sharing_prefixes_agree_with_the_naive_definition(
    stem: str, data: st.DataObject
) -> None:
    names = data.draw(st.lists(
        st.builds(lambda cut, tail: stem[:cut] + tail, st.integers(0, len(stem)),
                  st.text(alphabet="ab.", max_size=12)),
        min_size=1, max_size=6))
    piece = st.one_of(
        st.builds(lambda name, cut, upper: (name.upper() if upper else name)[:cut],
                  st.sampled_from(names), st.integers(0, 320), st.booleans()),
        # a name with one character changed: the text leaves it there and comes back
        st.builds(lambda name, at, char: name[:at] + char + name[at + 1:],
                  st.sampled_from(names), st.integers(0, 320), st.sampled_from("abB@[")),
        st.text(alphabet="abAB.@[", max_size=40))
    strings = [
        "".join(data.draw(st.lists(piece, max_size=6)))
        for _ in range(data.draw(st.integers(1, 3)))]
    walked = [*strings, "s1"]
    expected = _naive(names, walked)
    assert FilenameMatcher(names).find(searchable_text(walked)) == expected
    if page_scan.AVAILABLE:
        distinct = sorted({n.lower() for n in names})
        for ensure_ascii in (True, False):
            assert _scanned_names(distinct, strings, ensure_ascii) == expected


def test_a_name_is_found_after_text_that_keeps_leaving_it() -> None:
    name = "ab" * 150 + "x"
    rng = random.Random(7)
    noise = "".join(rng.choice("ab") for _ in range(5000))
    for text in (noise + "AB" * 150 + "X", noise + name + noise, noise[:1001] + name):
        expected = _naive([name, "b" * 9], [text, "s1"])
        assert name in expected
        assert _scanned_names([name, "b" * 9], [text], True) in (None, expected)


# Text that keeps coming back to the root right where a name may start again is stepped through
# densely by the C matcher, for stretches of 256 to 8,192 bytes, before the lead filter skips
# again: names sit across every change between the two, at a stretch's end, inside runs that are
# put off, upper-cased; the answer is still the naive one.
@settings(max_examples=150, deadline=None)
@given(st.integers(0, 2**32 - 1))
def test_text_changing_between_dense_and_sparse_agrees_with_the_naive_definition(
    seed: int,
) -> None:
    rng = random.Random(seed)

    def dotted(size: int) -> str:
        return ".".join(rng.choice("ab") for _ in range(size))

    names = [dotted(rng.randint(2, 60)) for _ in range(rng.randint(1, 12))]
    names += ["report.pdf", "img_0001.jpg", "a" * rng.randint(1, 4)][: rng.randint(0, 3)]

    def piece() -> str:
        kind = rng.randrange(5)
        if kind == 0:  # dense: back at the root every few bytes, a name may start anywhere
            return ".".join(rng.choice(["a", "b", "", "ab"]) for _ in range(rng.randint(1, 3000)))
        if kind == 1:  # sparse: nothing the lead filter lets through
            return "the user talked about the trip " * rng.randint(1, 80)
        name = rng.choice(names)
        if kind == 2:
            return name.upper() if rng.random() < 0.3 else name
        at = rng.randrange(len(name) + 1)
        return name[:at] if kind == 3 else name[:at] + rng.choice("ab.") + name[at + 1:]

    strings = ["".join(piece() for _ in range(rng.randint(1, 12)))
               for _ in range(rng.randint(1, 2))]
    walked = [*strings, "s1"]
    expected = _naive(names, walked)
    assert FilenameMatcher(names).find(searchable_text(walked)) == expected
    if page_scan.AVAILABLE:
        assert _scanned_names(sorted({n.lower() for n in names}), strings, True) == expected


def test_text_sharing_a_names_first_two_bytes_everywhere_is_skipped_yet_the_name_found() -> None:
    # the lead filter reads three bytes: "se" followed by anything but "s" starts no name here,
    # a name of two bytes starts wherever its two do, and one at a string's very end is found
    names = ["session0-photo-007.png", "sx"]
    for text in ("the user used several sets of seeds " * 40 + "session0-photo-007.png",
                 "SESSION0-PHOTO-007.PNG " + "use " * 100,
                 "se " * 200 + "sx",
                 "ses" * 100 + "sx!"):
        expected = _naive(names, [text, "s1"])
        assert expected, text[:40]
        assert _scanned_names(sorted(names), [text], True) in (None, expected)


def _has_avx2() -> bool:
    try:
        cpuinfo = Path("/proc/cpuinfo").read_text()
    except OSError:
        return False
    return platform.machine() in ("x86_64", "AMD64") and " avx2" in cpuinfo


def _native_matcher(names: list[str]) -> Any:
    rows = [{"id": f"att_{n}", "name": name, "content_type": "image/png",
             "internal_uri": f"file:///{n}", "source": "memory_add_uri"}
            for n, name in enumerate(names)]
    return _build(1, rows).native


# The C matcher probes a hash table of the names at each place the lead filter lets through,
# once per length of the names starting with that byte, where no first byte has names of more
# than six lengths; otherwise it walks the automaton alone.
def test_names_of_few_lengths_are_probed_and_names_of_many_lengths_are_not() -> None:
    if not page_scan.AVAILABLE:
        return
    photos = [f"session0-photo-{i:03d}.png" for i in range(200)]
    probing = _native_matcher(photos).probing
    assert probing is _has_avx2()  # probing needs AVX2 (its lead filter reads 32 bytes at once)
    assert _native_matcher(["a" * k for k in range(1, 7)]).probing is probing
    assert _native_matcher(["a" * k for k in range(1, 8)]).probing is False
    # seven lengths, but no first byte has more than six of them
    assert _native_matcher(["a" * k for k in range(1, 7)] + ["b" * 7]).probing is probing


def test_text_that_keeps_the_probes_busy_is_left_to_the_automaton_and_every_name_found() -> None:
    # six lengths of one letter: every place in a run of it is let through and matches up to six
    # names, so probing hands the rest of the text to the automaton early; names that start
    # before, at and after that point are all found
    names = ["a" * k for k in range(30, 36)] + ["ab", "ba" * 20]
    for text in ("a" * 3000, "a" * 3000 + "b", "b" + "a" * 40 + "ba" * 20 + "a" * 2000 + "ab",
                 "x" * 100 + "A" * 31 + "ba" * 20, "a" * 29 + "b" + "a" * 35 + "b"):
        expected = _naive(names, [text, "s1"])
        assert _scanned_names(sorted(names), [text], True) == expected, text[:50]


# A name found again in the same item (an episode's summary and its text both name the file)
# costs its probe the slots up to the name's own, when no other name has its hash and length.
# Probing used to look on to the next empty slot, and text naming a file again whose slot sits
# in a long run of held ones was left to the automaton (35 of these 200 items, each naming its
# file three times).
def test_a_name_found_again_costs_its_probe_one_slot_and_keeps_the_text_probed() -> None:
    if not page_scan.AVAILABLE or not _has_avx2():
        return
    names = [f"session6-photo-{i:03d}.png" for i in range(200)]
    rows = [{"id": f"att_{n}", "name": name, "content_type": "image/png",
             "internal_uri": f"file:///{n}", "source": "memory_add_uri"}
            for n, name in enumerate(names)]
    built = _build(1, rows)
    assert built.native.probing
    texts = [f"On day {n} they shared " + ", ".join([name.upper()] * 2) + " and left."
             for n, name in enumerate(names)]
    page = page_scan.scan(json.dumps({"results": [
        {"session_id": "s1", "summary": text[:60], "text": text} for text in texts]}).encode(),
        False)
    assert page is not None
    out, attached = scanned_answer(page, set(), {"s1": built})
    found = [[a["name"] for a in result["attachments"]] for result in jsonio.loads(out)["results"]]
    assert found == [[name] for name in names] and attached == len(names)
    assert built.native.handed_over == 0


# Text that keeps probing over its budget (names of one letter and a length, text made of
# their pieces) goes to the automaton without being probed first, but for about one string in
# four, still probed to see whether it has changed; the names found are the same.
def test_text_that_keeps_probing_over_its_budget_goes_to_the_automaton_first() -> None:
    if not page_scan.AVAILABLE or not _has_avx2():
        return
    names = ["a" * 60 + f"{n:03d}" for n in range(40)]
    rows = [{"id": f"att_{n}", "name": name, "content_type": "image/png",
             "internal_uri": f"file:///{n}", "source": "memory_add_uri"}
            for n, name in enumerate(names)]
    built = _build(1, rows)
    assert built.native.probing
    texts = ["a" * 500 + names[n % 40] + "a" * 30 for n in range(200)]
    page = page_scan.scan(json.dumps({"results": [
        {"session_id": "s1", "text": text} for text in texts]}).encode(), False)
    assert page is not None
    out, attached = scanned_answer(page, set(), {"s1": built})
    found = [[a["name"] for a in result["attachments"]] for result in jsonio.loads(out)["results"]]
    assert found == [[names[n % 40]] for n in range(200)] and attached == 200
    assert 30 <= built.native.handed_over <= 70  # of 200 strings (all of them, probed every time)


@settings(max_examples=400, deadline=None)
@given(st.lists(st.sampled_from(["ab", "abc", "a.b", "ba.ab", "b.b.b", "abab", "x"]),
                min_size=1, max_size=5),
       st.lists(st.text(alphabet="abABx.", max_size=6), min_size=1, max_size=4), st.data())
def test_probed_names_agree_with_the_naive_definition(
    stems: list[str], tails: list[str], data: st.DataObject
) -> None:
    names = sorted({(stem + tail).lower() for stem in stems for tail in tails})
    piece = st.one_of(
        st.builds(lambda name, upper: name.upper() if upper else name,
                  st.sampled_from(names), st.booleans()),
        st.builds(lambda name, cut: name[:cut], st.sampled_from(names), st.integers(0, 12)),
        st.text(alphabet="abABx. ", max_size=50))
    strings = ["".join(data.draw(st.lists(piece, max_size=10)))
               for _ in range(data.draw(st.integers(1, 3)))]
    expected = _naive(names, [*strings, "s1"])
    if page_scan.AVAILABLE:
        for ensure_ascii in (True, False):
            assert _scanned_names(names, strings, ensure_ascii) == expected


# Where the names use at most four distinct bytes (after lower-casing), the automaton steps
# text dense in them two bytes a load ("pair rows"), one at a time where a name ends, a walk
# may start or the state has no row; either way it finds what the naive definition finds.
# Dense: the text keeps coming back to the root (an "x" is in no name), which makes the
# automaton step it densely, where pair rows are read; names of one to three bytes end between
# two bytes. Sparse: long stretches of a byte in no name between the pieces, so the automaton
# steps the text outside its dense stretches, a byte a load.
@pytest.mark.parametrize("dense", [True, False])
@settings(max_examples=300, deadline=None)
@given(st.lists(st.text(alphabet="ab.", min_size=1, max_size=24), min_size=1, max_size=12),
       st.booleans(), st.data())
def test_names_of_few_bytes_agree_with_the_naive_definition(
    dense: bool, names: list[str], ensure_ascii: bool, data: st.DataObject
) -> None:
    if not page_scan.AVAILABLE:
        return
    names = sorted(set(names))
    assert _native_matcher(names).pair_rows > 0
    pieces = [st.sampled_from(names), st.sampled_from(names).map(str.upper),
              st.text(alphabet="ab.", max_size=4 if dense else 40)]
    piece = st.one_of(*pieces, st.just("x")) if dense else st.one_of(*pieces)
    joiner = "" if dense else " yyyyyyyyyyyy "
    strings = [joiner.join(data.draw(st.lists(piece, max_size=120 if dense else 30)))
               for _ in range(data.draw(st.integers(1, 3)))]
    assert _scanned_names(names, strings, ensure_ascii) == _naive(names, [*strings, "s1"])


def test_a_name_ending_between_the_two_bytes_of_a_pair_is_found_at_either_parity() -> None:
    # "x" (in no name) sends the automaton back to the root every three bytes, so it steps the
    # text densely; "ab" occurs once, ending on the first or the second byte of a pair
    if not page_scan.AVAILABLE:
        return
    names = ["a.a.a.a", "ab", "b.b.b"]
    assert _native_matcher(names).pair_rows > 0
    for offset in range(4):
        text = "xa." * 12 + "." * offset + "ab." + "a." * 12 + "x"
        expected = _naive(names, [text])
        assert "ab" in expected and _scanned_names(names, [text], True) == expected, offset


def test_pair_rows_are_built_only_for_names_of_few_bytes() -> None:
    if not page_scan.AVAILABLE:
        return
    assert _native_matcher(["a.b.a", "b.b"]).pair_rows > 0
    assert _native_matcher(["abcd", "dcba"]).pair_rows > 0  # four bytes
    assert _native_matcher(["abcde"]).pair_rows == 0  # five
    assert _native_matcher([f"session0-photo-{i:03d}.png" for i in range(20)]).pair_rows == 0


# Probing reads a string's places 32 at a time, its last block overlapping the one before (it
# ends at the string's end), and strings shorter than a block one place at a time: a name is
# found wherever it lies in a string of any length, as the ASCII text sent (the page's own
# bytes) and as text the scanner decodes and lower-cases first ("é" makes it do so).
def test_a_name_is_found_at_every_place_in_strings_of_every_length() -> None:
    if not page_scan.AVAILABLE:
        return
    for names in (["x"], ["ab", "zz"], ["photo.png"], ["session0-photo-001.png", "zzzz"],
                  ["a" * 40]):
        rows = [{"id": f"att_{n}", "name": name, "content_type": "image/png",
                 "internal_uri": f"file:///{n}", "source": "memory_add_uri"}
                for n, name in enumerate(names)]
        name = names[0]
        for lead in ("", "é"):
            texts = [lead + "q" * at + name.upper() + "q" * (length - at - len(name))
                     for length in range(len(name), 100) for at in range(length - len(name) + 1)]
            texts += [lead + "q" * length for length in range(100)]  # and nowhere
            page = page_scan.scan(json.dumps({"results": [
                {"session_id": "s1", "text": text} for text in texts]}).encode(), False)
            assert page is not None
            for probe in (True, False):
                out, _ = scanned_answer(page, set(), {"s1": _build(1, rows, probe=probe)})
                found = [[a["name"] for a in result["attachments"]]
                         for result in jsonio.loads(out)["results"]]
                assert found == [[name] if name.upper() in text else [] for text in texts], (
                    names, lead, probe)


# The probe hash reads each byte with its 0x20 bit set, so text hashes as the lower-cased name
# it spells without being lower-cased first; bytes that differ only in that bit are alike to the
# hash ("_" and DEL, "[" and "{", "@" and "`", ...) and told apart by comparing the bytes, in
# whatever case the text spells the letters. Names that hash alike share a slot or follow one
# another; either way each is found only where its own bytes are.
@pytest.mark.parametrize("ensure_ascii", [True, False])
def test_names_the_probe_hash_reads_alike_are_told_apart(ensure_ascii: bool) -> None:
    if not page_scan.AVAILABLE:
        return
    pairs = [("report[1].pdf", "report{1}.pdf"), ("a_b.png", "a\x7fb.png"),
             ("x@y.jpg", "x`y.jpg"), ("scan^2.png", "scan~2.png"),
             ("dir\\photo-01.png", "dir|photo-01.png"), ("[receipt].pdf", "{receipt}.pdf")]
    names = sorted(name for pair in pairs for name in pair)
    if _has_avx2():
        assert _native_matcher(names).probing
    for first, second in pairs:
        for text in (first, first.upper(), f"see {first.upper()} and not the other",
                     second, second.upper(), f"{first}, {second.upper()}"):
            expected = _naive(names, [text, "s1"])
            assert expected, text
            assert _scanned_names(names, [text], ensure_ascii) == expected, text


def _one_hash(count: int) -> list[str]:
    """`count` names of 48 bytes that differ only outside the bytes a name's probe hash reads
    (its first, middle and last eight): all of one hash and length."""
    return [f"pppppppp{n:012d}qqqqqqqq{n * 7919 % 10**12:012d}rrrr.png" for n in range(count)]


# Names of one hash and length share one slot of the probing table, chained from it: the table
# is built a slot a name, however the names were chosen (it used to walk every name of the same
# hash before each new one: 20,000 such names took 0.55 s, against 0.06 s for as many others).
def test_names_of_one_hash_and_length_are_built_a_slot_each() -> None:
    if not page_scan.AVAILABLE or not _has_avx2():
        return
    for count in (1000, 4000):
        matcher = _native_matcher(_one_hash(count))
        assert matcher.probing
        assert matcher.build_steps <= 2 * count
    ordinary = _native_matcher([f"session0-photo-{i:03d}.png" for i in range(4000)])
    assert ordinary.build_steps <= 2 * 4000  # a run of slots is short whatever the names
    # names of 40 bytes that differ only in the last byte of each word the hash reads (bytes
    # 7, 23 and 39): a multiplication moves only the top bits of its product for them, so they
    # share few slots, each name of one of them chained from it
    letters = "abcdefghijklmnopqrstuvwxyz0123456789"
    top_bytes = [f"ppppppp{x}qqqqqqqqrrrrrrr{y}sssssssstttttttttt"[:39] + z
                 for x in letters for y in letters for z in letters[:4]]
    assert len(top_bytes) == 5184 and all(len(name) == 40 for name in top_bytes)
    assert _native_matcher(top_bytes).build_steps <= 2 * len(top_bytes)


# Each of the names in one slot's chain is found, also when others of the chain were found
# before it in the item (their marks skipped, not compared), and text holding their shared
# bytes but none of them finds nothing; probing and the automaton agree (`_scanned_names`).
def test_names_of_one_hash_and_length_are_each_found() -> None:
    if not page_scan.AVAILABLE:
        return
    names = _one_hash(40)
    wanted = [names[n] for n in (0, 7, 8, 39)]
    near = names[5][:20] + "X" * 8 + names[5][28:]  # the chain's hash, not its bytes
    for strings in ([" ".join(wanted)], [" ".join([names[7].upper(), names[7], names[0]])],
                    [near, near.upper()], [names[3], names[3] + " and " + names[2]]):
        expected = _naive(names, [*strings, "s1"])
        assert _scanned_names(names, strings, True) == expected, strings
    assert _scanned_names(names, [near], True) == set()
    # a short chain after long text: probed to the end of the chain, not handed over
    if _has_avx2():
        few = _one_hash(3)
        built = _native_matcher(few)
        for name in few:
            body = json.dumps({"results": [{"session_id": "s1", "text": "x" * 400 + name}]})
            page = page_scan.scan(body.encode(), False)
            assert page is not None
            out, attached = page.render({"s1": built}, None)
            assert [a["name"] for a in jsonio.loads(out)["results"][0]["attachments"]] == [name]
        assert built.handed_over == 0


# A chain walked in vain costs probing its budget like any comparison: text that holds the
# shared bytes of 2,000 names of one hash at every turn goes to the automaton, and the names it
# holds are found.
def test_text_walking_a_long_chain_in_vain_goes_to_the_automaton() -> None:
    if not page_scan.AVAILABLE or not _has_avx2():
        return
    names = _one_hash(2000)
    near = names[5][:20] + "X" * 8 + names[5][28:]
    rows = [{"id": f"att_{n}", "name": name, "content_type": "image/png",
             "internal_uri": f"file:///{n}", "source": "memory_add_uri"}
            for n, name in enumerate(names)]
    built = _build(1, rows)
    text = " ".join([near] * 20 + [names[1234]])
    page = page_scan.scan(json.dumps({"results": [{"session_id": "s1", "text": text}]}).encode(),
                          False)
    assert page is not None
    out, attached = scanned_answer(page, set(), {"s1": built})
    found = [a["name"] for a in jsonio.loads(out)["results"][0]["attachments"]]
    assert found == [names[1234]] and attached == 1
    assert built.native.handed_over == 1


# Names given out of order or more than once (the gateway passes them sorted and distinct) are
# one name per bytes, the first given, as the automaton keeps them: its attachments are listed.
def test_a_name_given_twice_is_the_first_given() -> None:
    if not page_scan.AVAILABLE:
        return
    names = ["b.png", "a.png", "b.png", "a.png"]
    entries = [[(n, json.dumps({"name": name, "n": n}).encode())] for n, name in enumerate(names)]
    body = json.dumps({"results": [{"session_id": "s1", "text": "a.png and b.png"}]}).encode()
    listed = []
    for probe in (True, False):
        page = page_scan.scan(body, False)
        assert page is not None
        out, attached = page.render({"s1": page_scan.matcher(names, entries, probe)}, None)
        listed.append(jsonio.loads(out)["results"][0]["attachments"])
        assert attached == 2
    assert listed[0] == listed[1] == [{"name": "b.png", "n": 0}, {"name": "a.png", "n": 1}]


@pytest.mark.parametrize("raw, name, found", [
    ({"episode": "shared Sunset.PNG at the beach"}, "sunset.png", "shared Sunset.PNG at the beach"),
    ({"a": ["x", {"b": "see photo.png"}]}, "photo.png", "see photo.png"),
    ({"base64": "photo.png", "text": "nothing"}, "photo.png", None),
    ({"name": "photo.png"}, "photo.png", "photo.png"),
    ({"text": "photo.pn"}, "photo.png", None),
    ({"text": "photo.png"}, "", None),
])
def test_matched_string_is_the_string_a_name_matched_in(
    raw: Any, name: str, found: str | None
) -> None:
    assert matched_string(raw, name) == found


@given(json_values, st.text(min_size=1, max_size=6))
@settings(max_examples=300, deadline=None)
def test_matched_string_agrees_with_the_search_s_matching(raw: Any, name: str) -> None:
    found = matched_string(raw, name)
    matches = bool(FilenameMatcher([name]).find(searchable_text(raw)))
    assert (found is not None) == matches
    if found is not None:
        assert found in walk_strings(raw) and name.lower() in found.lower()
