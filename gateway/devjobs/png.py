"""A small generated PNG (a gradient whose colours come from a seed), standard library only."""

from __future__ import annotations

import hashlib
import struct
import zlib

SIZE = 256


def _chunk(kind: bytes, data: bytes) -> bytes:
    return (struct.pack(">I", len(data)) + kind + data
            + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF))


def gradient_png(seed: str, width: int = SIZE, height: int = SIZE) -> bytes:
    """The same seed always gives the same bytes."""
    digest = hashlib.sha256(seed.encode()).digest()
    start, end = digest[:3], digest[3:6]
    rows = []
    for y in range(height):
        t = y / max(height - 1, 1)
        pixel = bytes(round(a + (b - a) * t) for a, b in zip(start, end, strict=True))
        rows.append(b"\x00" + pixel * width)
    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)  # 8-bit RGB
    return (b"\x89PNG\r\n\x1a\n" + _chunk(b"IHDR", header)
            + _chunk(b"IDAT", zlib.compress(b"".join(rows), 6)) + _chunk(b"IEND", b""))
