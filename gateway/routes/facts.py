"""`/memory-facts`: user preference facts and their write rule (SPEC §11, gateway/store/facts.py).

`POST /memory-facts` is one observation: it creates the fact (201) or counts towards it (200).
Times (`expiresAt`, `lastConfirmedAt`) are epoch milliseconds; `expiresAt` also takes ISO 8601.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated, Any, Literal

from pydantic import BeforeValidator, Field
from starlette.requests import Request
from starlette.responses import Response

from gateway.errors import ValidationFailed
from gateway.routes.common import (
    api,
    item_routes,
    json_body,
    json_response,
    mine,
    no_content,
    query_params,
)
from gateway.routes.schema import (
    CamelModel,
    CamelPatch,
    CamelRequest,
    JsonValue,
    NonBlankText,
    PageQuery,
    Text,
    cursor_param,
    refuse_null,
)
from gateway.services import services, user_id
from gateway.store import facts

Scope = Literal["global", "image", "video", "canvas", "detail"]
FactType = Literal["preference", "constraint", "style", "workflow", "domain"]
SourceType = Literal["inferred", "manual", "imported"]
LATEST_MS = 253_402_300_799_999  # 9999-12-31T23:59:59.999Z


def _epoch_ms(value: Any) -> Any:
    """Epoch milliseconds, or an ISO 8601 time (UTC when it names no offset) turned into them."""
    if isinstance(value, str):
        try:
            moment = datetime.fromisoformat(value)
        except ValueError:
            raise ValueError("expected epoch milliseconds or an ISO 8601 time") from None
        if moment.tzinfo is None:
            moment = moment.replace(tzinfo=UTC)
        return int(moment.timestamp() * 1000)
    return value


EpochMs = Annotated[int, BeforeValidator(_epoch_ms), Field(ge=0, le=LATEST_MS)]


FactOut = facts.Fact  # the stored record is the answer (gateway/store/records.py)


class FactList(CamelModel):
    facts: list[FactOut]
    next_cursor: str | None


class FactQuery(PageQuery):
    """`?active=true|false`, `?scope=`, `?factType=` narrow the list."""

    active: bool | None = None
    scope: Scope | None = None
    fact_type: FactType | None = None


# facts.Observation with the request's checks; `expiresAt` takes an ISO time too, and `oneOff`
# (a one-off instruction, refused: it is not a fact) is never stored.
class FactObservation(CamelRequest):
    scope: Scope
    fact_type: FactType
    key: NonBlankText = Field(max_length=128)
    value: JsonValue
    confidence: int | None = Field(default=None, ge=0, le=100)
    source_type: SourceType = "inferred"
    source_conversation_id: str | None = Field(default=None, max_length=128)
    source_message_id: str | None = Field(default=None, max_length=128)
    pinned: bool | None = None
    expires_at: EpochMs | None = None
    explicit: bool = False
    text: Text | None = Field(default=None, max_length=2000)
    one_off: bool = False


class FactPatch(CamelPatch):
    """A user's edit; setting `value` makes the fact manual. `expiresAt: null` clears expiry."""

    value: JsonValue = None
    confidence: int | None = Field(default=None, ge=0, le=100)
    pinned: bool | None = None
    expires_at: EpochMs | None = None


@api(summary="Observe a fact (creates it, or counts one more observation)",
     request=FactObservation, response=FactOut, status=201, also=(200,), tag="memory facts")
async def observe_fact(request: Request) -> Response:
    body = await json_body(request, FactObservation)
    if body.one_off:
        raise ValidationFailed("oneOff: a one-off task instruction is not a fact", field="oneOff")
    if body.value is None:
        raise ValidationFailed("value: must not be null", field="value")
    fact, created = await facts.observe(
        services(request).db, user_id(request),
        facts.Observation(
            scope=body.scope,
            fact_type=body.fact_type,
            key=body.key.strip(),
            value=body.value,
            source_type=body.source_type,
            confidence=body.confidence,
            explicit=body.explicit,
            text=body.text,
            source_conversation_id=body.source_conversation_id,
            source_message_id=body.source_message_id,
            pinned=body.pinned,
            expires_at_ms=body.expires_at,
        ),
    )
    return json_response(fact, 201 if created else 200)


@api(summary="List facts, newest first", query=FactQuery, response=FactList, tag="memory facts")
async def list_facts(request: Request) -> Response:
    query = query_params(request, FactQuery)
    found, next_cursor = await facts.list_page(
        services(request).db, user_id(request), active=query.active, scope=query.scope,
        fact_type=query.fact_type, limit=query.limit, after=cursor_param(query.cursor, "cursor"),
    )
    return json_response(FactList(facts=found, next_cursor=next_cursor))


@api(summary="Read a fact", response=FactOut, tag="memory facts")
async def get_fact(request: Request) -> Response:
    return json_response(await facts.get(*mine(request, "fact_id")))


@api(summary="Edit a fact's value, confidence, pin or expiry", request=FactPatch,
     response=FactOut, tag="memory facts")
async def update_fact(request: Request) -> Response:
    body = await json_body(request, FactPatch)
    refuse_null(body, "value", "confidence", "pinned")
    changes = {name: getattr(body, name) for name in body.model_fields_set}
    if "expires_at" in changes:
        changes["expires_at_ms"] = changes.pop("expires_at")
    return json_response(await facts.update(*mine(request, "fact_id"), **changes))


@api(summary="Delete a fact", status=204, tag="memory facts")
async def delete_fact(request: Request) -> Response:
    await facts.delete(*mine(request, "fact_id"))
    return no_content()


routes = item_routes("/memory-facts", "/memory-facts/{fact_id}", create=observe_fact,
                     listing=list_facts, get=get_fact, update=update_fact, delete=delete_fact)
