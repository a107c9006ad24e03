"""Why an engine route is not opened: the 404 `route_not_found` a route outside the flavour's
table answers (SPEC §5) names the route and says why, for the routes engine SDKs send that the
tables keep closed on purpose, and generally for any other."""

from __future__ import annotations

import re

# (flavours, method, path pattern, why). EverOS Cloud's routes that `everos-cloud` 1.1/1.2 added.
_WHY: list[tuple[frozenset[str], str, re.Pattern[str], str]] = [
    (frozenset({"everos-cloud"}), method, re.compile(pattern), why)
    for method, pattern, why in (
        ("*", r"/api/v2/knowledge_bases(/.*)?",
         "knowledge bases belong to the engine account, not to one user: no field names their "
         "owner, so the gateway cannot keep one user's from another's"),
        ("POST", r"/api/v2/memory/(update|delete_by_ids|feedback)",
         "it names memories by id alone, and the gateway does not yet check that those ids are "
         "the caller's"),
        ("POST", r"/api/v2/memory/tag/(bind|unbind|replace)",
         "it tags memories named by id alone, which the gateway does not yet check are the "
         "caller's"),
        ("GET", r"/api/v2/tasks(/stats)?",
         "the engine lists every user's tasks there, and the gateway does not filter that list"),
    )
]


def closed_route_message(flavor: str, method: str, path: str) -> str:
    """The 404's message: the route, that this gateway does not open it, and why."""
    route = f"{method} {path}"
    for flavors, wanted, pattern, why in _WHY:
        if flavor in flavors and wanted in ("*", method) and pattern.fullmatch(path):
            return (f"{route} is an engine route this gateway does not open: {why} "
                    "(docs/engines.md lists the routes it opens)")
    return (f"{route} is not an engine route this gateway opens: the {flavor} flavour's table "
            "lists only the routes whose user, session and agent ids it can check "
            "(docs/engines.md); an operator opens others with upstream.allow_paths")
