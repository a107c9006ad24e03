"""Optional model calls: an OpenAI-compatible chat-completions client, used only with `[llm]`.

Nothing here runs unless `llm.base_url` and `llm.model` are configured. Callers get parsed JSON
objects or `None`; a timeout, transport failure or malformed answer is `None`, never an exception.
"""

from __future__ import annotations

import json
import logging
from typing import Any

import httpx

from gateway.config import LlmSettings

log = logging.getLogger("gateway.llm")


class LlmClient:
    def __init__(
        self, settings: LlmSettings, transport: httpx.AsyncBaseTransport | None = None
    ) -> None:
        self.settings = settings
        headers = {"Authorization": f"Bearer {settings.api_key}"} if settings.api_key else {}
        self._client = httpx.AsyncClient(
            base_url=settings.base_url.rstrip("/"),
            transport=transport,
            timeout=httpx.Timeout(settings.timeout_s),
            headers=headers,
        )

    async def chat(self, messages: list[dict[str, str]], *, json_mode: bool = False) -> str | None:
        """The first choice's text, or None when the call fails in any way."""
        payload: dict[str, Any] = {"model": self.settings.model, "messages": messages}
        if json_mode:
            payload["response_format"] = {"type": "json_object"}
        try:
            response = await self._client.post("/chat/completions", json=payload)
            response.raise_for_status()
            content = response.json()["choices"][0]["message"]["content"]
        except (httpx.HTTPError, ValueError, KeyError, IndexError, TypeError) as exc:
            log.warning("model call failed: %s", type(exc).__name__)
            return None
        return content if isinstance(content, str) else None

    async def chat_json(self, messages: list[dict[str, str]]) -> dict[str, Any] | None:
        """A JSON object answer, or None when the answer is missing or not a JSON object."""
        text = await self.chat(messages, json_mode=True)
        if text is None:
            return None
        text = text.strip()
        if text.startswith("```"):
            text = text.strip("`").removeprefix("json").strip()
        try:
            parsed = json.loads(text)
        except ValueError:
            log.warning("model answer is not JSON")
            return None
        return parsed if isinstance(parsed, dict) else None

    async def aclose(self) -> None:
        await self._client.aclose()
