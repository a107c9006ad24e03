"""The base of the records the store hands out: snake_case attributes, camelCase JSON.

A record is also the API's answer for that resource (SPEC §10–§11): the routes answer with the
store's records, so each contract shape is written once. Fields a caller never sees (the owner,
sort keys) are marked `exclude=True` and stay out of the answer and the OpenAPI document.
"""

from __future__ import annotations

import sqlite3
from typing import Any, Self

from pydantic import BaseModel, ConfigDict
from pydantic.alias_generators import to_camel


class CamelModel(BaseModel):
    """Responses: snake_case attributes, camelCase JSON."""

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, from_attributes=True)


class Record(CamelModel):
    """A stored row as read: immutable."""

    # frozen: read, never changed; defaults-required: an answer always carries every field
    model_config = ConfigDict(frozen=True, json_schema_serialization_defaults_required=True)

    @classmethod
    def from_row(cls, row: sqlite3.Row, **columns: Any) -> Self:
        """The record of a row whose columns are named as the fields (others are ignored);
        `columns` gives those read otherwise: JSON text, a renamed or a computed value."""
        return cls.model_validate({**dict(row), **columns})
