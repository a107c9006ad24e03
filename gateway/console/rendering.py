"""Pages from the package's Jinja2 templates, escaped by default (SPEC §20)."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from jinja2 import Environment, FileSystemLoader, StrictUndefined, select_autoescape
from starlette.requests import Request
from starlette.responses import HTMLResponse

from gateway.console.guard import CSRF_FIELD, Operator

TEMPLATES = Path(__file__).parent / "templates"
STATIC = Path(__file__).parent / "static"

# The security headers of every console answer, pages, redirects and files alike.
SECURITY_HEADERS = (
    (b"content-security-policy",
     b"default-src 'self'; script-src 'self'; object-src 'none'; frame-ancestors 'none'; "
     b"base-uri 'none'; form-action 'self'"),
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"no-referrer"),
    (b"cache-control", b"no-store"),
)


def when(ms: int | None) -> str:
    """A time in ms since the epoch as UTC, to the second; '' for none."""
    if ms is None:
        return ""
    return time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(ms / 1000))


def pretty_json(value: Any) -> str:
    return json.dumps(value, indent=2, ensure_ascii=False, sort_keys=True, default=str)


environment = Environment(
    loader=FileSystemLoader(TEMPLATES),
    autoescape=select_autoescape(default=True, default_for_string=True),
    undefined=StrictUndefined,
    trim_blocks=True,
    lstrip_blocks=True,
)
environment.filters["when"] = when
environment.filters["pretty_json"] = pretty_json
environment.globals["csrf_field"] = CSRF_FIELD


def page(request: Request, template: str, who: Operator | None, status: int = 200,
         **context: Any) -> HTMLResponse:
    """`template` rendered for the operator `who` (None on the login form)."""
    html = environment.get_template(template).render(
        who=who, path=request.url.path, **context)
    return HTMLResponse(html, status_code=status)


def next_url(request: Request, cursor: str | None) -> str | None:
    """This page's URL with `cursor` for the "Next" link; None on the last page."""
    if not cursor:
        return None
    url = request.url.include_query_params(cursor=cursor)
    return f"{url.path}?{url.query}"
