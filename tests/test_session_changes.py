"""Which sessions the moves of the "sessions" generation were about
(gateway/store/session_changes.py)."""

from gateway.store.session_changes import SessionChanges


def test_nothing_is_known_before_the_first_generation() -> None:
    changes = SessionChanges()
    assert changes.since(0, 0) is None
    changes.start(10)
    assert changes.since(10, 10) == frozenset()
    assert changes.since(9, 10) is None  # before what was seen first


def test_the_sessions_moved_after_a_generation_are_named() -> None:
    changes = SessionChanges()
    changes.start(10)
    changes.moved(11, "a")
    changes.moved(12, "b")
    changes.moved(13, "a")
    assert changes.since(10, 13) == {"a", "b"}
    assert changes.since(12, 13) == {"a"}
    assert changes.since(13, 13) == frozenset()
    assert changes.since(14, 13) is None  # a number not yet seen says nothing
    assert changes.since(10, 12) is None  # nor up to one that is not the latest
    assert changes.since(10, -3) is None  # (an unknown one, while the log could not be read)


def test_a_move_not_known_one_by_one_makes_everything_before_it_unknown() -> None:
    changes = SessionChanges()
    changes.start(10)
    changes.moved(11, "a")
    changes.start(20)  # e.g. a lost notification, log rows read too late
    assert changes.since(11, 20) is None
    changes.moved(21, "b")
    assert changes.since(20, 21) == {"b"}


def test_moves_past_the_kept_ones_are_unknown() -> None:
    changes = SessionChanges(keep=3)
    changes.start(0)
    for generation in range(1, 6):
        changes.moved(generation, f"s{generation}")
    assert changes.since(1, 5) is None  # s2 is forgotten
    assert changes.since(2, 5) == {"s3", "s4", "s5"}


def test_numbers_from_below_again_start_a_new_history() -> None:
    changes = SessionChanges()
    changes.start(10)
    changes.moved(11, "a")
    changes.moved(5, "b")  # the database was replaced
    assert changes.since(10, 5) is None
    assert changes.since(5, 5) == frozenset()
