"""A resolver with a fixed table, for the fetch guard (gateway/attachments/fetch_guard.py).

The names tests use for files on the web (`cdn.example`, `example.com`, …) resolve to one public
address, as their real counterparts would; `localhost` and the names below resolve as listed;
names under `.invalid` (RFC 6761) resolve to nothing, like a name no server knows.
"""

from __future__ import annotations

import socket
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

PUBLIC_ADDRESS = "93.184.215.14"
PUBLIC_V6 = "2606:2800:21f:cb07:6820:80da:af6b:8b2c"


@dataclass
class FakeDns:
    table: Mapping[str, Sequence[str]]
    asked: list[str] = field(default_factory=list)

    async def resolve(self, name: str, port: int) -> list[str]:
        self.asked.append(name)
        if name.endswith(".invalid"):
            raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")
        return list(self.table.get(name, [PUBLIC_ADDRESS]))


SUITE_DNS = FakeDns({
    "localhost": ["127.0.0.1", "::1"],
    "loopback.test": ["127.0.0.1"],
    "intranet.test": ["10.0.0.7"],
    "metadata.test": ["169.254.169.254"],
    "dual.test": [PUBLIC_ADDRESS, PUBLIC_V6],
    "half-internal.test": [PUBLIC_ADDRESS, "192.168.1.20"],
    "mapped.test": ["::ffff:127.0.0.1"],
})
