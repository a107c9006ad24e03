"""`/console/tool-calls`: tool calls waiting for the user's confirmation, running, and failed
(§16), every user's, newest change first."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from gateway.console import guard
from gateway.console.calls import Refused
from gateway.console.rendering import next_url, page
from gateway.services import services
from gateway.store import tool_calls
from gateway.store.cursors import decode_cursor, encode_cursor

PAGE = 50


async def tool_call_page(request: Request) -> Response:
    who = await guard.operator(request)
    state = request.query_params.get("state", "pending")
    if state not in tool_calls.TOOL_CALL_STATES:
        raise Refused(404, "no such state: pending, running or failed")
    raw_cursor = request.query_params.get("cursor", "")
    before = decode_cursor(raw_cursor, "cursor") if raw_cursor else None
    found = await tool_calls.page_in_state(services(request).db, state, before, PAGE + 1)
    more = len(found) > PAGE
    found = found[:PAGE]
    cursor = (encode_cursor(found[-1][1].updated_at_ms, found[-1][1].message_id)
              if more and found else None)
    return page(request, "tool_calls.html", who, calls=found, state=state,
                states=list(tool_calls.TOOL_CALL_STATES), next_url=next_url(request, cursor))


routes = [Route("/console/tool-calls", tool_call_page, methods=["GET"])]
