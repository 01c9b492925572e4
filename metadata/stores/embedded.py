"""The embedded single-node metadata store: the node tree in one SQLite file.

SQLite commits are durable (fsync) and atomic, which is what topic creation, ledger
lists and id counters need; metadata writes are rare next to data writes, so doing
them on the event loop thread costs little. Ephemeral nodes belong to a session: the
running process's own, or one of the sessions a store server holds for other processes
(metadata/stores/shared_server.py), each ended with its nodes by :meth:`end_session`;
all are removed when the store is opened again. Only this process writes the file while
it runs, so watches fire from the writes themselves.
"""
import asyncio
import posixpath
import sqlite3
from collections import defaultdict
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from ..store import BadVersion, MetadataStore, Node, NodeExists, NoNode

# The ``ephemeral`` column holds the owning session: 0 for a persistent node, 1 for this process.
PERSISTENT, OWN_SESSION = 0, 1


def _parent(path: str) -> str:
    return posixpath.dirname(path.rstrip("/")) or "/"


class EmbeddedMetadataStore(MetadataStore):
    def __init__(self, db_path: str, serving: bool = True):
        """``serving``: this process serves the store (a broker, a ``--workers`` supervisor), so the
        sessions of its last run are over and their ephemeral nodes go. A command opening the
        file beside a running broker (``kgate users``) passes False and leaves the claims be."""
        self._db = sqlite3.connect(db_path, isolation_level=None)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=FULL")
        self._db.execute(
            "CREATE TABLE IF NOT EXISTS nodes (path TEXT PRIMARY KEY, parent TEXT NOT NULL,"
            " data BLOB NOT NULL, version INTEGER NOT NULL, ephemeral INTEGER NOT NULL)")
        self._db.execute("CREATE INDEX IF NOT EXISTS nodes_parent ON nodes(parent)")
        if serving:
            self._db.execute("DELETE FROM nodes WHERE ephemeral != 0")
        self._watches: dict[tuple[str, bool], list[Callable[[], None]]] = defaultdict(list)
        self._grouped: list[str] | None = None  # inside group_commit(): the paths changed so far

    @contextmanager
    def group_commit(self) -> Iterator[None]:
        """Writes made inside share one transaction, so one fsync, and their watches fire once it
        has committed; each write still succeeds or fails alone. A server answering many
        processes' writes at once (metadata/stores/shared_server.py) pays one commit per batch,
        not per write; nothing is answered before the commit, so nothing is seen before it is
        durable. If the commit fails, every write of the batch is undone and it raises."""
        with self._db:
            self._db.execute("BEGIN IMMEDIATE")
            self._grouped = []
            try:
                yield
            finally:
                changed, self._grouped = self._grouped, None
        self._changed(changed)

    @contextmanager
    def _writing(self, changed: list[str]) -> Iterator[None]:
        """One write: its own transaction, or a savepoint of the group commit it is part of."""
        if self._grouped is None:
            with self._db:
                self._db.execute("BEGIN IMMEDIATE")
                yield
            self._changed(changed)
            return
        self._db.execute("SAVEPOINT write")
        try:
            yield
        except BaseException:
            self._db.execute("ROLLBACK TO write")
            raise
        finally:
            self._db.execute("RELEASE write")
        self._grouped.extend(changed)

    def watch(self, path: str, callback: Callable[[], None], children: bool = False) -> None:
        self._watches[(path, children)].append(callback)

    def _changed(self, paths) -> None:
        """Schedule the watches of nodes created, set or deleted, and of their parents' children."""
        fired = set()
        for path in paths:
            for key in ((path, False), (_parent(path), True)):
                for callback in self._watches.get(key, ()):
                    if callback not in fired:
                        fired.add(callback)
                        asyncio.get_running_loop().call_soon(callback)

    async def get(self, path: str) -> Node | None:
        row = self._db.execute("SELECT data, version FROM nodes WHERE path = ?", (path,)).fetchone()
        return Node(bytes(row[0]), row[1]) if row else None

    async def create(self, path: str, data: bytes, ephemeral: bool = False, make_parents: bool = True) -> None:
        self.create_in(OWN_SESSION if ephemeral else PERSISTENT, path, data, make_parents)

    def create_in(self, session: int, path: str, data: bytes, make_parents: bool = True) -> None:
        """Create ``path``, ephemeral in ``session`` (PERSISTENT: not ephemeral)."""
        changed: list[str] = []
        with self._writing(changed):
            parent = _parent(path)
            missing = []
            while parent != "/" and not self._exists(parent):
                missing.append(parent)
                parent = _parent(parent)
            if missing and not make_parents:
                raise NoNode(missing[-1])
            for ancestor in reversed(missing):
                self._insert(ancestor, b"", PERSISTENT)
            if self._exists(path):
                raise NodeExists(path)
            self._insert(path, data, session)
            changed += [*missing, path]

    def _exists(self, path: str) -> bool:
        return self._db.execute("SELECT 1 FROM nodes WHERE path = ?", (path,)).fetchone() is not None

    def _insert(self, path: str, data: bytes, session: int) -> None:
        self._db.execute("INSERT INTO nodes VALUES (?, ?, ?, 0, ?)", (path, _parent(path), data, session))

    def end_session(self, session: int) -> None:
        """Delete the ephemeral nodes of ``session``, as ZooKeeper does when one expires."""
        gone: list[str] = []
        with self._writing(gone):
            gone += [row[0] for row in self._db.execute("SELECT path FROM nodes WHERE ephemeral = ?", (session,))]
            self._db.execute("DELETE FROM nodes WHERE ephemeral = ?", (session,))

    def _locked_version(self, path: str, expected: int) -> int:
        """Check, in a write, that ``path`` is at ``expected`` (-1: any)."""
        row = self._db.execute("SELECT version FROM nodes WHERE path = ?", (path,)).fetchone()
        if row is None:
            raise NoNode(path)
        if expected != -1 and row[0] != expected:
            raise BadVersion(f"{path} is at version {row[0]}, not {expected}")
        return row[0]

    async def set(self, path: str, data: bytes, version: int) -> int:
        with self._writing([path]):
            current = self._locked_version(path, version)
            self._db.execute("UPDATE nodes SET data = ?, version = ? WHERE path = ?", (data, current + 1, path))
        return current + 1

    async def delete(self, path: str, version: int = -1, recursive: bool = False) -> None:
        changed: list[str] = []
        with self._writing(changed):
            self._locked_version(path, version)
            prefix = path.rstrip("/") + "/"
            below = [row[0] for row in self._db.execute(
                "SELECT path FROM nodes WHERE substr(path, 1, ?) = ?", (len(prefix), prefix))]
            if below and not recursive:
                raise NodeExists(f"{path} has children")
            self._db.execute("DELETE FROM nodes WHERE substr(path, 1, ?) = ?", (len(prefix), prefix))
            self._db.execute("DELETE FROM nodes WHERE path = ?", (path,))
            changed += [*below, path]

    async def children(self, path: str) -> list[str]:
        rows = self._db.execute("SELECT path FROM nodes WHERE parent = ? ORDER BY path", (path,)).fetchall()
        return [posixpath.basename(row[0]) for row in rows]

    async def close(self) -> None:
        self._db.close()
