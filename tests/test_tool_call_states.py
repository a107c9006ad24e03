"""The tool-call state machine as tables: every transition, and every pair it refuses."""

from __future__ import annotations

import itertools

import pytest

from gateway.toolcalls.states import (
    TRANSITIONS,
    Event,
    Refused,
    State,
    current,
    event_for_job_status,
    status_of,
    step,
)

S, E = State, Event

ALLOWED = [
    (S.PROPOSED, E.CONFIRM, S.CONFIRMING),
    (S.PROPOSED, E.CANCEL, S.CANCELLED),
    (S.CONFIRMING, E.CONFIRM, S.CONFIRMING),
    (S.CONFIRMING, E.JOB_SUBMITTED, S.RUNNING),
    (S.RUNNING, E.CONFIRM, S.RUNNING),
    (S.RUNNING, E.JOB_PENDING, S.RUNNING),
    (S.RUNNING, E.JOB_COMPLETED, S.COMPLETED),
    (S.RUNNING, E.JOB_FAILED, S.FAILED),
    (S.RUNNING, E.JOB_UNREADABLE, S.FAILED),
    (S.COMPLETED, E.CONFIRM, S.COMPLETED),
    (S.FAILED, E.CONFIRM, S.FAILED),
    (S.CANCELLED, E.CANCEL, S.CANCELLED),
]

# The refusals a client can cause, with the code it sees (409).
CLIENT_REFUSALS = {
    (S.CANCELLED, E.CONFIRM): "tool_call_cancelled",
    (S.CONFIRMING, E.CANCEL): "tool_call_confirmed",
    (S.RUNNING, E.CANCEL): "tool_call_confirmed",
    (S.COMPLETED, E.CANCEL): "tool_call_confirmed",
    (S.FAILED, E.CANCEL): "tool_call_confirmed",
}

REFUSED = [
    (state, event) for state, event in itertools.product(State, Event)
    if (state, event) not in {(s, e) for s, e, _ in ALLOWED}
]


def test_the_table_is_exactly_the_listed_transitions() -> None:
    assert {(s, e): after for s, e, after in ALLOWED} == TRANSITIONS


@pytest.mark.parametrize(("state", "event", "after"), ALLOWED,
                         ids=[f"{s}-{e}" for s, e, _ in ALLOWED])
def test_allowed_transition(state: State, event: Event, after: State) -> None:
    assert step(state, event) is after


@pytest.mark.parametrize(("state", "event"), REFUSED, ids=[f"{s}-{e}" for s, e in REFUSED])
def test_refused_transition(state: State, event: Event) -> None:
    with pytest.raises(Refused) as refused:
        step(state, event)
    assert refused.value.code == CLIENT_REFUSALS.get((state, event), "invalid_transition")
    assert (refused.value.state, refused.value.event) == (state, event)


def test_every_state_and_event_is_either_allowed_or_refused() -> None:
    assert len(ALLOWED) + len(REFUSED) == len(State) * len(Event)
    assert set(CLIENT_REFUSALS) <= set(REFUSED)


@pytest.mark.parametrize(
    ("status", "confirmed", "has_job", "state"),
    [
        ("not_completed", False, False, S.PROPOSED),
        ("not_completed", True, False, S.CONFIRMING),
        ("not_completed", True, True, S.RUNNING),
        ("completed", True, True, S.COMPLETED),
        ("failed", True, True, S.FAILED),
        ("cancelled", False, False, S.CANCELLED),
    ],
)
def test_stored_columns_give_the_state(
    status: str, confirmed: bool, has_job: bool, state: State
) -> None:
    assert current(status, confirmed, has_job) is state
    assert status_of(state) == status


@pytest.mark.parametrize(
    ("job_status", "event"),
    [("queued", E.JOB_PENDING), ("running", E.JOB_PENDING), ("completed", E.JOB_COMPLETED),
     ("failed", E.JOB_FAILED)],
)
def test_job_statuses_map_to_events(job_status: str, event: Event) -> None:
    assert event_for_job_status(job_status) is event
