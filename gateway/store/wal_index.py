"""Whether any connection of any process committed to a WAL database, read without a system call.

In WAL mode every commit rewrites the header of the wal-index, the `-shm` file that all
connections to the database map into memory (https://www.sqlite.org/walformat.html, "The
WAL-Index Header": `iChange` counts transactions, `mxFrame` is the last valid frame, and a WAL
restart changes the salts). The header is written before the commit becomes visible to any
reader, since readers find the commit through it. So the header's bytes, read from a shared
mapping of the file, change whenever the database does: comparing them tells a cache whether
to look again, at the cost of a 96-byte copy. `PRAGMA data_version` answers the same question
with three system calls (two locks and a stat), on every request of the pass-through
(docs/decisions.md, "The pass-through's own work").

The header is read as SQLite writes it, without its locks: a read that overlaps a commit can
see a mix of the two headers, which differs from the old one and only makes the caller look
again. The `-shm` file lives as long as any connection to the database is open; the adapter
holding this watch keeps its own open for as long.
"""

from __future__ import annotations

import mmap
import os
import sqlite3

# Both copies of the 48-byte header (SQLite writes the second, then the first).
HEADER_BYTES = 96


class WalIndexWatch:
    """The bytes of a WAL database's wal-index header, mapped read-only."""

    __slots__ = ("_map",)

    def __init__(self, mapped: mmap.mmap) -> None:
        self._map = mapped

    @classmethod
    def open(cls, conn: sqlite3.Connection, path: str) -> WalIndexWatch | None:
        """The watch of `path`'s wal-index, or None when there is none to map: not in WAL mode
        (an in-memory database), or the index is not a shared file (exclusive locking)."""
        mode = conn.execute("PRAGMA journal_mode").fetchone()[0]
        locking = conn.execute("PRAGMA locking_mode").fetchone()[0]
        if str(mode).lower() != "wal" or str(locking).lower() != "normal":
            return None
        conn.execute("SELECT 1 FROM sqlite_master LIMIT 1").fetchall()  # maps the index
        try:
            fd = os.open(f"{path}-shm", os.O_RDONLY)
        except OSError:
            return None
        try:
            if os.fstat(fd).st_size < HEADER_BYTES:
                return None
            return cls(mmap.mmap(fd, HEADER_BYTES, mmap.MAP_SHARED, mmap.PROT_READ))
        finally:
            os.close(fd)  # the mapping keeps the file's pages

    def stamp(self) -> bytes:
        """The header now: different bytes after any commit since an earlier stamp."""
        return self._map[:HEADER_BYTES]

    def close(self) -> None:
        self._map.close()
