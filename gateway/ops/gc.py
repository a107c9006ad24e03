"""`memory-gateway gc` (SPEC §13): files with no row, and rows whose file vanished.

Planning is pure: a `Snapshot` of the store's object folders, the live rows and the pending
intents goes in, a `Plan` comes out. Only what is older than the grace period is touched, since
younger work may be in flight (an upload streams its file before its row exists), and never
anything a pending intent names. Files are looked for only where the gateway writes them:
`{user}/resources|memory_attachments/{id}/` under the disk root or the S3 prefix; rows are marked
only when the file they name belongs there, so a moved storage root is never taken for vanished
files. Locations are the store's: disk paths, or `s3://bucket/key`.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from gateway.attachments.files import Entry, FileStore, Folder
from gateway.store import Database, file_rows, resources
from gateway.store import attachments as attachment_store
from gateway.store import objects as object_store
from gateway.store.file_rows import FileRow

# Mappings whose file the gateway wrote (the others name the client's URIs or ride a resource).
OWN_FILE_SOURCES = frozenset({"memory_add_base64", "memory_add_object"})
__all__ = ["Entry", "Folder", "Plan", "RowState", "Snapshot", "collect", "plan", "report"]


@dataclass(frozen=True)
class RowState:
    row: FileRow
    location: str | None  # where the row's file lives, when it is one of the store's files
    file_exists: bool


@dataclass(frozen=True)
class Snapshot:
    now_s: float
    folders: tuple[Folder, ...]
    rows: tuple[RowState, ...]
    protected: frozenset[str]  # folders and files named by pending intents or live objects
    # Signed objects (SPEC §18) past their lifetime: their keys go; their files stay only
    # where a mapping names them.
    expired_objects: tuple[str, ...] = ()


@dataclass
class Plan:
    orphan_files: list[str] = field(default_factory=list)
    empty_folders: list[str] = field(default_factory=list)
    vanished_resources: list[RowState] = field(default_factory=list)
    vanished_mappings: list[RowState] = field(default_factory=list)
    expired_objects: list[str] = field(default_factory=list)

    @property
    def empty(self) -> bool:
        return not (self.orphan_files or self.empty_folders or self.vanished_resources
                    or self.vanished_mappings or self.expired_objects)


def _protected(location: str, protected: frozenset[str]) -> bool:
    return location in protected or location.rpartition("/")[0] in protected


def plan(snapshot: Snapshot, grace_s: float) -> Plan:
    """What gc would do: pure, from the snapshot alone."""
    out = Plan(expired_objects=list(snapshot.expired_objects))
    old_before_s = snapshot.now_s - grace_s
    referenced = {state.location for state in snapshot.rows if state.location is not None}
    for folder in snapshot.folders:
        if folder.location in snapshot.protected:
            continue
        kept = 0
        for entry in folder.files:
            if entry.location in referenced or entry.modified_s > old_before_s:
                kept += 1
            else:
                out.orphan_files.append(entry.location)
        if not kept and not folder.other_entries and folder.modified_s <= old_before_s:
            out.empty_folders.append(folder.location)
    old_before_ms = old_before_s * 1000
    for state in snapshot.rows:
        row, location = state.row, state.location
        if (state.file_exists or location is None or row.created_at > old_before_ms
                or _protected(location, snapshot.protected)):
            continue
        if row.kind == "resource":
            out.vanished_resources.append(state)
        elif row.source in OWN_FILE_SOURCES:
            out.vanished_mappings.append(state)
    return out


# --- reading and applying (I/O) -----------------------------------------------------------------


async def take_snapshot(db: Database, files: FileStore, now_s: float | None = None) -> Snapshot:
    protected: set[str] = set()
    for intent in await attachment_store.leftover_intents(db):
        protected.update(intent.folders)
        for mapping in intent.mappings:
            location = files.location(mapping.internal_uri)
            if location is not None:
                protected.add(location)
    now = time.time() if now_s is None else now_s
    for uri in await object_store.live_uris(db, int(now * 1000)):
        location = files.location(uri)
        if location is not None:  # its whole folder: an upload may be streaming into it
            protected.update((location, location.rpartition("/")[0]))
    expired = tuple(obj.id for obj in await object_store.expired(db, int(now * 1000)))
    folders = tuple(await files.object_folders())
    stored = {entry.location for folder in folders for entry in folder.files}
    states = []
    for row in await file_rows.live_file_rows(db):
        location = files.location(row.internal_uri)
        exists = location is not None and (location in stored
                                           or await files.exists(row.internal_uri))
        states.append(RowState(row, location, exists))
    return Snapshot(now, folders, tuple(states), frozenset(protected), expired)


async def apply(db: Database, files: FileStore, todo: Plan) -> None:
    await object_store.delete(db, todo.expired_objects)
    for location in todo.orphan_files:
        await files.remove_file(location)
    for folder in todo.empty_folders:
        await files.remove_empty_folder(folder)
    for state in todo.vanished_resources:
        await resources.mark_deleted(db, state.row.user_id, state.row.id)
    await file_rows.mark_mappings_deleted(db, [s.row.id for s in todo.vanished_mappings])


def report(todo: Plan, grace_s: float, dry_run: bool) -> list[str]:
    """The summary line, then one line per thing done (or that would be done)."""
    remove, mark = ("would remove", "would mark") if dry_run else ("removed", "marked")
    lines = [
        f"gc{' (dry run)' if dry_run else ''}: {remove} {len(todo.orphan_files)} orphan file(s) "
        f"and {len(todo.empty_folders)} empty folder(s); {mark} "
        f"{len(todo.vanished_resources)} resource(s) and {len(todo.vanished_mappings)} "
        f"mapping(s) whose file vanished (grace {grace_s:g} s)"
    ]
    lines += [f"{remove} file {location}" for location in todo.orphan_files]
    lines += [f"{remove} folder {location}" for location in todo.empty_folders]
    lines += [f"{mark} resource {s.row.id} of {s.row.user_id}: {s.location} is missing"
              for s in todo.vanished_resources]
    lines += [f"{mark} mapping {s.row.id} of {s.row.user_id}: {s.location} is missing"
              for s in todo.vanished_mappings]
    lines += [f"{remove} expired object {object_id}" for object_id in todo.expired_objects]
    return lines


async def collect(db: Database, files: FileStore, grace_s: float, *, dry_run: bool) -> Plan:
    """Plan against the current state and, unless `dry_run`, carry the plan out."""
    todo = plan(await take_snapshot(db, files), grace_s)
    if not dry_run:
        await apply(db, files, todo)
    return todo
