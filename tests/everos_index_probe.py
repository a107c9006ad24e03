"""Run by the real engine's own Python (`.venv-everos/bin/python`), not the suite's: which rows
the engine's BM25 index finds for each word before and after `optimize()` merges them.

argv[1]: a JSON object {row id: the row's `episode_tokens`}; argv[2:]: the words to look up.
The first row is written and merged into the index, the others are written after it, as the
engine's cascade worker writes (`merge_insert`) between two of its throttled `optimize()` runs.
The full-text index is the engine's own (`Episode.ensure_fts_indexes`). Prints
`{"before": {word: [row ids]}, "after": {...}}`.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import tempfile

import lancedb  # type: ignore[import-not-found]
import pyarrow as pa  # type: ignore[import-not-found]
from everos.infra.persistence.records.episode import Episode  # type: ignore[import-not-found]
from lancedb.query import MatchQuery  # type: ignore[import-not-found]


async def main(rows: dict[str, str], words: list[str]) -> dict[str, dict[str, list[str]]]:
    db = await lancedb.connect_async(tempfile.mkdtemp())
    table = await db.create_table("episode", schema=pa.schema(
        [("id", pa.string()), ("episode_tokens", pa.string())]))
    await Episode.ensure_fts_indexes(table)

    async def put(key: str) -> None:
        await (table.merge_insert("id").when_matched_update_all().when_not_matched_insert_all()
               .execute([{"id": key, "episode_tokens": rows[key]}]))

    async def found() -> dict[str, list[str]]:
        answers = {}
        for word in words:
            query = table.query().nearest_to_text(MatchQuery(word, column="episode_tokens"))
            answers[word] = sorted(row["id"] for row in await query.limit(100).to_list())
        return answers

    first, *later = rows
    await put(first)
    await table.optimize()
    for key in later:
        await put(key)
    before = await found()
    await table.optimize()
    return {"before": before, "after": await found()}


if __name__ == "__main__":
    print(json.dumps(asyncio.run(main(json.loads(sys.argv[1]), sys.argv[2:]))), flush=True)
    os._exit(0)  # LanceDB's native runtime can crash while the interpreter shuts down
