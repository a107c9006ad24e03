"""Who holds an intent (SPEC §15): this process's owner token, the lease it renews while alive,
and whether another owner is gone.

A token names the host and process: `<boot id>.<pid namespace>/<pid>/<process start>/<nonce>`.
A process on the same kernel and pid namespace can tell at once that the owner is gone (no such
process, or one started at another time: the pid was reused), which is how a restarted gateway
settles what its killed predecessor left. Any other owner is gone when its lease has expired.
"""

from __future__ import annotations

import os
import secrets
from dataclasses import dataclass, field
from pathlib import Path

from gateway.store.ids import now_ms

# How much longer than the upstream timeout a lease runs: an intent outlives its call.
LEASE_MARGIN_S = 15.0
DEFAULT_LEASE_S = 60.0 + LEASE_MARGIN_S


def _read(path: str) -> str | None:
    try:
        return Path(path).read_text().strip()
    except OSError:
        return None


def _started(pid: int) -> str | None:
    """The process's start time in clock ticks since boot (field 22 of /proc/PID/stat)."""
    stat = _read(f"/proc/{pid}/stat")
    if stat is None:
        return None
    return stat.rsplit(")", 1)[-1].split()[19]


def _host() -> str | None:
    boot = _read("/proc/sys/kernel/random/boot_id")
    try:
        namespace = os.stat("/proc/self/ns/pid").st_ino
    except OSError:
        return None
    return None if boot is None else f"{boot}.{namespace}"


def this_process() -> str:
    host, pid = _host(), os.getpid()
    started = _started(pid)
    nonce = secrets.token_hex(4)
    if host is None or started is None:
        return f"-/{pid}/-/{nonce}"
    return f"{host}/{pid}/{started}/{nonce}"


def gone_here(owner: str) -> bool:
    """True when `owner` ran on this kernel and pid namespace and is no longer running."""
    parts = owner.split("/")
    if len(parts) != 4 or parts[0] == "-" or not parts[1].isdigit() or parts[0] != _host():
        return False
    return _started(int(parts[1])) != parts[2]


@dataclass
class Lease:
    """This process's hold on the intents it records."""

    seconds: float
    owner: str = field(default_factory=this_process)

    @classmethod
    def for_timeout(cls, upstream_timeout_s: float) -> Lease:
        return cls(upstream_timeout_s + LEASE_MARGIN_S)

    def until(self) -> int:
        """The lease's end (ms) for an intent recorded or renewed now."""
        return now_ms() + int(self.seconds * 1000)

    def hold(self) -> tuple[str, int]:
        return self.owner, self.until()

    def renew_every_s(self) -> float:
        return self.seconds / 4

    def lost_by(self, owner: str, lease_until: int, now: int) -> bool:
        """Whether an intent held by `owner` until `lease_until` may be settled by us now."""
        if owner == self.owner:
            return False
        return lease_until < now or gone_here(owner)
