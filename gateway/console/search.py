"""`/console/search`: the recall debugger. The §9 search run as the chosen user shows, per
result, the engine's raw item, each attachment matched and the text it matched in."""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from gateway.console import guard
from gateway.console.calls import as_user, refused
from gateway.console.rendering import page
from gateway.errors import ValidationFailed
from gateway.identity.auth import validate_user_id
from gateway.search.matching import matched_string

SEARCH_PATH = "/memories/search"


def explained(result: dict[str, Any]) -> dict[str, Any]:
    """A search result with, per attachment, the string of the raw item its name matched in
    (None where that string is the name itself)."""
    raw = result.get("raw")
    shown = []
    for attachment in result.get("attachments", []):
        text = matched_string(raw, attachment.get("name", ""))
        differs = text is not None and text.strip().lower() != attachment["name"].lower()
        shown.append({**attachment, "matched": text if differs else None})
    return {**result, "attachments": shown}


async def recall(request: Request) -> Response:
    who = await guard.operator(request)
    form = {name: request.query_params.get(name, "").strip()
            for name in ("user", "query", "session")}
    results: list[dict[str, Any]] | None = None
    error = ""
    if form["user"]:
        try:
            validate_user_id(form["user"])
        except ValidationFailed:
            error = "User: not a valid user id."
        else:
            body: dict[str, Any] = {"query": form["query"], "user_id": form["user"]}
            if form["session"]:
                body["filters"] = {"session_id": form["session"]}
            answer = await as_user(request, who, form["user"], "POST", SEARCH_PATH, json=body)
            if answer.ok:
                results = [explained(result) for result in answer.json().get("results", [])]
            else:
                error = refused(answer).message
    return page(request, "search.html", who, form=form, results=results, error=error)


routes = [Route("/console/search", recall, methods=["GET"])]
