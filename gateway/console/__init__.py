"""The operator console (SPEC §20): server-rendered pages under /console for admin keys.

A front door like the MCP tools: each page turns a form into calls of the admin API and the
user routes (`Gateway.call_as`), so scopes, validation and the audit apply once, below it.
"""

from __future__ import annotations

from gateway.console.app import CONSOLE_PREFIX, Console

__all__ = ["CONSOLE_PREFIX", "Console"]
