"""`memory-gateway gc` (SPEC §13): files with no row, and rows whose file vanished.

Planning is pure: a `Snapshot` of the object folders on disk, the live rows and the pending
intents goes in, a `Plan` comes out. Only what is older than the grace period is touched, since
younger work may be in flight (an upload streams its file before its row exists), and never
anything a pending intent names. Files are looked for only where the gateway writes them:
`{root}/{user}/resources|memory_attachments/{id}/`; rows are marked only when the file they name
belongs there, so a moved storage root is never taken for vanished files.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from pathlib import Path

from gateway.attachments.files import path_from_uri
from gateway.identity.auth import USER_ID
from gateway.store import Database, file_rows, resources
from gateway.store import attachments as attachment_store
from gateway.store.file_rows import FileRow

OBJECT_KINDS = ("resources", "memory_attachments")
# Mappings whose file the gateway wrote (the others name the client's URIs or ride a resource).
OWN_FILE_SOURCES = frozenset({"memory_add_base64"})


@dataclass(frozen=True)
class DiskEntry:
    path: Path
    mtime_s: float


@dataclass(frozen=True)
class Folder:
    path: Path
    mtime_s: float
    files: tuple[DiskEntry, ...]
    other_entries: bool = False  # sub-folders or odd entries: the folder is never removed


@dataclass(frozen=True)
class RowState:
    row: FileRow
    path: Path | None  # the file the row names, when it is a file:// URI
    file_exists: bool


@dataclass(frozen=True)
class Snapshot:
    root: Path
    now_s: float
    folders: tuple[Folder, ...]
    rows: tuple[RowState, ...]
    protected: frozenset[Path]  # folders and files named by pending intents


@dataclass
class Plan:
    orphan_files: list[Path] = field(default_factory=list)
    empty_folders: list[Path] = field(default_factory=list)
    vanished_resources: list[RowState] = field(default_factory=list)
    vanished_mappings: list[RowState] = field(default_factory=list)

    @property
    def empty(self) -> bool:
        return not (self.orphan_files or self.empty_folders or self.vanished_resources
                    or self.vanished_mappings)


def _inside(path: Path, root: Path) -> bool:
    return root in path.parents


def _protected(path: Path, protected: frozenset[Path]) -> bool:
    return path in protected or any(parent in protected for parent in path.parents)


def plan(snapshot: Snapshot, grace_s: float) -> Plan:
    """What gc would do: pure, from the snapshot alone."""
    out = Plan()
    old_before_s = snapshot.now_s - grace_s
    referenced = {state.path for state in snapshot.rows if state.path is not None}
    for folder in snapshot.folders:
        if _protected(folder.path, snapshot.protected):
            continue
        kept = 0
        for entry in folder.files:
            if entry.path in referenced or entry.mtime_s > old_before_s:
                kept += 1
            else:
                out.orphan_files.append(entry.path)
        if not kept and not folder.other_entries and folder.mtime_s <= old_before_s:
            out.empty_folders.append(folder.path)
    old_before_ms = old_before_s * 1000
    for state in snapshot.rows:
        row, path = state.row, state.path
        if (state.file_exists or path is None or not _inside(path, snapshot.root)
                or row.created_at > old_before_ms or _protected(path, snapshot.protected)):
            continue
        if row.kind == "resource":
            out.vanished_resources.append(state)
        elif row.source in OWN_FILE_SOURCES:
            out.vanished_mappings.append(state)
    return out


# --- reading and applying (I/O) -----------------------------------------------------------------


def _entries(folder: Path) -> Folder:
    files: list[DiskEntry] = []
    other = False
    with os.scandir(folder) as scan:
        for entry in scan:
            if entry.is_file(follow_symlinks=False) or entry.is_symlink():
                mtime_s = entry.stat(follow_symlinks=False).st_mtime
                files.append(DiskEntry(Path(entry.path), mtime_s))
            else:
                other = True
    return Folder(folder, folder.stat().st_mtime, tuple(files), other)


def object_folders(root: Path) -> list[Folder]:
    """Every `{root}/{user}/{kind}/{id}/` folder with its files; nothing else under the root."""
    found: list[Folder] = []
    if not root.is_dir():
        return found
    for user_dir in sorted(root.iterdir()):
        if USER_ID.fullmatch(user_dir.name) is None or not user_dir.is_dir() \
                or user_dir.is_symlink():
            continue
        for kind in OBJECT_KINDS:
            kind_dir = user_dir / kind
            if not kind_dir.is_dir() or kind_dir.is_symlink():
                continue
            for folder in sorted(kind_dir.iterdir()):
                if folder.is_dir() and not folder.is_symlink():
                    found.append(_entries(folder))
    return found


async def take_snapshot(db: Database, root: Path, now_s: float | None = None) -> Snapshot:
    root = root.resolve()
    protected: set[Path] = set()
    for intent in await attachment_store.leftover_intents(db):
        protected.update(Path(folder) for folder in intent.folders)
        for mapping in intent.mappings:
            path = path_from_uri(mapping.internal_uri)
            if path is not None:
                protected.add(path)
    states = []
    for row in await file_rows.live_file_rows(db):
        path = path_from_uri(row.internal_uri)
        states.append(RowState(row, path, path is not None and os.path.lexists(path)))
    return Snapshot(root, time.time() if now_s is None else now_s,
                    tuple(object_folders(root)), tuple(states), frozenset(protected))


async def apply(db: Database, todo: Plan) -> None:
    for path in todo.orphan_files:
        path.unlink(missing_ok=True)
    for folder in todo.empty_folders:
        try:
            folder.rmdir()
        except FileNotFoundError:
            pass
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
    lines += [f"{remove} file {path}" for path in todo.orphan_files]
    lines += [f"{remove} folder {path}" for path in todo.empty_folders]
    lines += [f"{mark} resource {s.row.id} of {s.row.user_id}: {s.path} is missing"
              for s in todo.vanished_resources]
    lines += [f"{mark} mapping {s.row.id} of {s.row.user_id}: {s.path} is missing"
              for s in todo.vanished_mappings]
    return lines


async def collect(db: Database, root: Path, grace_s: float, *, dry_run: bool) -> Plan:
    """Plan against the current state and, unless `dry_run`, carry the plan out."""
    todo = plan(await take_snapshot(db, root), grace_s)
    if not dry_run:
        await apply(db, todo)
    return todo
