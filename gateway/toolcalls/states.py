"""The life of one tool call, as a pure table: (state, event) → next state, or refused.

    proposed ──confirm──▶ confirming ──job_submitted──▶ running ──job_completed──▶ completed
        │                    │  ▲                          │  ▲
        │                    └──┘ confirm (resubmit,       │  └─ job_pending, confirm
        │                         same idempotency key)    └──job_failed / job_unreadable──▶ failed
        └──cancel──▶ cancelled (cancel again: unchanged; confirm: refused, tool_call_cancelled)

`status` as clients see it is `not_completed` for proposed, confirming and running; the state
itself is derived from the stored row (`status`, `confirmed_at_ms`, `external_job_id`). No I/O:
the callers read the row, ask `step`, and write what it answers.
"""

from __future__ import annotations

from enum import StrEnum


class State(StrEnum):
    PROPOSED = "proposed"  # waiting for the user; nothing submitted
    CONFIRMING = "confirming"  # the user confirmed; a job may or may not exist yet
    RUNNING = "running"  # a job exists (externalJobId known); not settled
    COMPLETED = "completed"
    FAILED = "failed"
    CANCELLED = "cancelled"


class Event(StrEnum):
    CONFIRM = "confirm"
    CANCEL = "cancel"
    JOB_SUBMITTED = "job_submitted"
    JOB_PENDING = "job_pending"  # the job service says queued or running
    JOB_COMPLETED = "job_completed"
    JOB_FAILED = "job_failed"
    JOB_UNREADABLE = "job_unreadable"  # every read attempt failed or the result was unusable


class Refused(Exception):
    """The event does not apply in this state; `code` is the error code a client sees."""

    def __init__(self, state: State, event: Event, code: str, message: str) -> None:
        self.state, self.event, self.code, self.message = state, event, code, message
        super().__init__(message)


# Every allowed transition, in one place. A (state, event) pair not listed is refused.
TRANSITIONS: dict[tuple[State, Event], State] = {
    (State.PROPOSED, Event.CONFIRM): State.CONFIRMING,
    (State.PROPOSED, Event.CANCEL): State.CANCELLED,
    # A confirmation that did not get its job id back (job service down, crash) is confirmed
    # again with the same idempotency key: the job service answers with the same job.
    (State.CONFIRMING, Event.CONFIRM): State.CONFIRMING,
    (State.CONFIRMING, Event.JOB_SUBMITTED): State.RUNNING,
    # Retried confirmations of a call that already has its job change nothing.
    (State.RUNNING, Event.CONFIRM): State.RUNNING,
    (State.RUNNING, Event.JOB_PENDING): State.RUNNING,
    (State.RUNNING, Event.JOB_COMPLETED): State.COMPLETED,
    (State.RUNNING, Event.JOB_FAILED): State.FAILED,
    (State.RUNNING, Event.JOB_UNREADABLE): State.FAILED,
    (State.COMPLETED, Event.CONFIRM): State.COMPLETED,
    (State.FAILED, Event.CONFIRM): State.FAILED,
    (State.CANCELLED, Event.CANCEL): State.CANCELLED,
}

# Why a refused pair is refused, for the ones a client can cause (409 with this code).
_REFUSALS: dict[tuple[State, Event], tuple[str, str]] = {
    (State.CANCELLED, Event.CONFIRM): (
        "tool_call_cancelled", "this tool call was cancelled; it cannot be confirmed"
    ),
    **{
        (state, Event.CANCEL): (
            "tool_call_confirmed",
            "this tool call was already confirmed and its job may exist; it cannot be cancelled",
        )
        for state in (State.CONFIRMING, State.RUNNING, State.COMPLETED, State.FAILED)
    },
}


def step(state: State, event: Event) -> State:
    """The state after `event`; Refused when the table has no such transition."""
    found = TRANSITIONS.get((state, event))
    if found is not None:
        return found
    code, message = _REFUSALS.get(
        (state, event), ("invalid_transition", f"{event.value} does not apply to {state.value}")
    )
    raise Refused(state, event, code, message)


def current(status: str, confirmed: bool, has_job: bool) -> State:
    """The state of a stored call from its columns."""
    if status == "not_completed":
        if has_job:
            return State.RUNNING
        return State.CONFIRMING if confirmed else State.PROPOSED
    return State(status)


def status_of(state: State) -> str:
    """The `toolCall.status` clients see for a state."""
    if state in (State.PROPOSED, State.CONFIRMING, State.RUNNING):
        return "not_completed"
    return state.value


def event_for_job_status(job_status: str) -> Event:
    """The event a job service's status stands for (queued|running|completed|failed)."""
    return {
        "queued": Event.JOB_PENDING,
        "running": Event.JOB_PENDING,
        "completed": Event.JOB_COMPLETED,
        "failed": Event.JOB_FAILED,
    }[job_status]
