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
again.

Two rules keep SQLite's own locking intact:
- No file descriptor of the `-shm` file is ever opened or closed here. POSIX record locks
  belong to the process, and closing *any* descriptor of a file drops all of them: SQLite's
  "dead-man switch" lock on the index would go, the next process to open the database would
  take it for the first one and truncate the index under every mapping (SIGBUS). So the file
  is mapped through the descriptor SQLite itself holds (found in `/proc/self/fd`), with libc's
  `mmap` (Python's `mmap` duplicates the descriptor, and closes the duplicate).
- The header is read only while a connection of the adapter that owns the watch is open (that
  connection keeps SQLite's lock), and the mapping is removed before those connections close.
Where either is not possible (not Linux, no WAL, exclusive locking), there is no watch and the
adapter asks `PRAGMA data_version`.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import sqlite3
import sys

# Both copies of the 48-byte header (SQLite writes the second, then the first).
HEADER_BYTES = 96
_PROT_READ = 0x1
_MAP_SHARED = 0x01
_MAP_FAILED = ctypes.c_void_p(-1).value


def _libc() -> ctypes.CDLL | None:
    if not sys.platform.startswith("linux"):
        return None
    try:  # glibc's soname first: find_library runs ldconfig in a subprocess
        libc = ctypes.CDLL("libc.so.6", use_errno=True)
    except OSError:
        try:
            libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
        except OSError:
            return None
    libc.mmap.restype = ctypes.c_void_p
    libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int,
                          ctypes.c_int, ctypes.c_long]
    libc.munmap.restype = ctypes.c_int
    libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
    return libc


_LIBC = _libc()


def _descriptor_of(path: str) -> int | None:
    """A descriptor this process already holds open on `path` (SQLite's), or None."""
    try:
        wanted = os.stat(path)
        held = os.listdir("/proc/self/fd")
    except OSError:
        return None
    for name in held:
        try:
            found = os.stat(f"/proc/self/fd/{name}")
        except OSError:  # closed meanwhile, or the listing's own descriptor
            continue
        if (found.st_dev, found.st_ino) == (wanted.st_dev, wanted.st_ino):
            return int(name)
    return None


class WalIndexWatch:
    """The bytes of a WAL database's wal-index header, mapped read-only."""

    __slots__ = ("_address", "_header")

    def __init__(self, address: int) -> None:
        self._address: int | None = address
        # A view of the mapped header: copying it out is one call (libc's mapping, not
        # Python's, so the view is over memory Python does not own: dropped before munmap).
        self._header: memoryview | None = memoryview(
            (ctypes.c_char * HEADER_BYTES).from_address(address)).cast("B")

    @classmethod
    def open(cls, conn: sqlite3.Connection, path: str) -> WalIndexWatch | None:
        """The watch of `path`'s wal-index while `conn` (which must stay open as long as the
        watch) holds it, or None when there is none to map (see the module's docstring)."""
        if _LIBC is None:
            return None
        mode = conn.execute("PRAGMA journal_mode").fetchone()[0]
        locking = conn.execute("PRAGMA locking_mode").fetchone()[0]
        if str(mode).lower() != "wal" or str(locking).lower() != "normal":
            return None
        conn.execute("SELECT 1 FROM sqlite_master LIMIT 1").fetchall()  # SQLite maps the index
        fd = _descriptor_of(f"{path}-shm")
        if fd is None or os.fstat(fd).st_size < HEADER_BYTES:
            return None
        address = _LIBC.mmap(None, HEADER_BYTES, _PROT_READ, _MAP_SHARED, fd, 0)
        if address is None or address == _MAP_FAILED:
            return None
        return cls(address)

    def stamp(self) -> bytes:
        """The header now: different bytes after any commit since an earlier stamp."""
        header = self._header
        if header is None:
            raise RuntimeError("the wal-index watch is closed")
        return header.tobytes()

    def close(self) -> None:
        """Remove the mapping (no descriptor is closed: SQLite's stays SQLite's)."""
        header, self._header = self._header, None
        if header is not None:
            header.release()
        address, self._address = self._address, None
        if address is not None and _LIBC is not None:
            _LIBC.munmap(address, HEADER_BYTES)
