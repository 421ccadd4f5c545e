"""Snapshots of stored inputs, taken when a plan is made and checked by every block read.

A plan reads its inputs block by block, by path, while it runs. If an input is replaced or
rewritten meanwhile (another process saves over the ``.npy`` file, an overwrite swaps the zarr
directory), some blocks would come from the old data and some from the new. Every reader
task therefore carries an :class:`InputSnapshot` of what was planned (the file's or
directory's identity, size and modification time, the metadata document of a zarr array, the
shape and dtype) and compares it with what it opens, before and after reading: a changed
input is an :class:`InputChangedError` naming the file, never a mixed result.

A snapshot of a zarr array covers its directory and metadata document, not the chunk files
that a rewrite of its values replaces; a memory map's file may be written through the map
itself. Their readers also keep a :class:`ReadLedger`: the fingerprint (inode, size and
modification time) of each part (a chunk file and its directory, a sparse block's files, the
mapped file) as the first read saw it (at that read, every part of an array of at most
``BASELINE_CHUNKS`` chunks, :mod:`tilegraph.io.zarr_common`), compared at every later read
(a block made again after it was dropped under memory pressure, a second array over the same
input) and before and after each read. A part read in another state is an
:class:`InputChangedError`: the run never mixes what a source held at two moments.

Limits, stated where they apply: the ledger lives in each process that reads (MPI ranks and
serverless workers each keep their own); a larger zarr array is fingerprinted part by part
as it is read, with its directories from the start, so a chunk rewritten in place (not by
zarr, which renames a new file in) before its first read goes unseen; a write through a
shared memory map to a page already written since its last write-back does not change the
file's modification time; a file system whose timestamps are coarser than the time between
two writes of the same size can hide the second. A block made again after it was dropped is
also compared with the dropped one (a checksum, :mod:`tilegraph.runtime.memory`), which
catches these for every remade block.
"""

from __future__ import annotations

import hashlib
import os
import secrets
import socket
import threading
import weakref
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

__all__ = ["InputChangedError", "InputSnapshot", "ReadLedger", "on_host", "shared_ledger",
           "snapshot_of"]

# the metadata documents of a zarr array or group (format 3, then format 2)
_ZARR_METADATA = ("zarr.json", ".zarray", ".zgroup")


class InputChangedError(RuntimeError):
    """A stored input changed after the plan reading it was made."""


@dataclass(frozen=True)
class InputSnapshot:
    """What a plan saw of one stored input: ``path``; ``identity``, the device, inode, size
    and modification time (ns) of the file (``.npy``) or of the directory and its metadata
    document (zarr); ``metadata``, a digest of the zarr metadata document (``""`` for a
    file); ``shape`` and ``dtype`` (``None`` when not known, e.g. a sparse group)."""

    path: str
    identity: tuple[int, ...]
    metadata: str
    shape: tuple[int, ...] | None
    dtype: str | None

    def check(self, identity: tuple[int, ...], metadata: str = "",
              shape: tuple[int, ...] | None = None, dtype: object = None) -> None:
        """Raise :class:`InputChangedError` if what was opened is not what was planned."""
        what = []
        if identity != self.identity:
            what.append(_identity_change(self.identity, identity))
        if metadata != self.metadata:
            what.append("its metadata changed")
        if shape is not None and self.shape is not None and tuple(shape) != self.shape:
            what.append(f"shape {self.shape} is now {tuple(shape)}")
        if dtype is not None and self.dtype is not None and str(dtype) != self.dtype:
            what.append(f"dtype {self.dtype} is now {dtype}")
        if what:
            raise InputChangedError(
                f"input {self.path!r} changed after the plan reading it was made "
                f"({'; '.join(what)}, {on_host()}): blocks read now would mix old and new "
                "data. Build the array again (from_npy/from_zarr) to read the new contents, "
                "and do not modify inputs while a computation reads them; a run on several "
                "hosts needs its inputs on a filesystem they all share")


def on_host() -> str:
    """``"on host <name>"``: where an input was looked for, for error messages (a run on
    several hosts reads its inputs where its tasks run, not where it was planned)."""
    return f"on host {socket.gethostname()}"


def _identity_change(old: tuple[int, ...], new: tuple[int, ...]) -> str:
    if not new:
        return "it was removed"
    if old[:2] != new[:2]:
        return "it was replaced by another file"
    if old[2] != new[2]:
        return f"its size changed from {old[2]} to {new[2]} bytes"
    return "it was modified"


def _stat_identity(st: os.stat_result) -> tuple[int, ...]:
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)


def file_identity(fd_or_path: int | str) -> tuple[int, ...]:
    """Device, inode, size and modification time of an open file or a path (``()``: gone)."""
    try:
        st = os.fstat(fd_or_path) if isinstance(fd_or_path, int) else os.stat(fd_or_path)
    except FileNotFoundError:
        return ()
    return _stat_identity(st)


def store_identity(path: str) -> tuple[tuple[int, ...], str]:
    """The identity of a zarr directory (the directory's and its metadata document's) and a
    digest of that document (``((), "")``: gone)."""
    try:
        top = os.stat(path)
    except FileNotFoundError:
        return (), ""
    for name in _ZARR_METADATA:
        meta = os.path.join(path, name)
        try:
            with open(meta, "rb") as f:
                st = os.fstat(f.fileno())
                digest = hashlib.sha1(f.read(), usedforsecurity=False).hexdigest()
        except (FileNotFoundError, NotADirectoryError):
            continue
        return (top.st_dev, top.st_ino, *_stat_identity(st)), digest
    return (top.st_dev, top.st_ino), ""


def snapshot_of(path: str, shape: tuple[int, ...] | None = None, dtype: object = None
                ) -> InputSnapshot:
    """The snapshot of the input at ``path`` now: a file (``.npy``) or a zarr directory."""
    path = os.path.abspath(path)
    if os.path.isdir(path):
        identity, metadata = store_identity(path)
    else:
        identity, metadata = file_identity(path), ""
    return InputSnapshot(path, identity, metadata,
                         None if shape is None else tuple(int(s) for s in shape),
                         None if dtype is None else str(dtype))


class ReadLedger:
    """The fingerprints of the parts of one stored input as a plan first read them.

    A part is named by a string (a zarr chunk key, a directory as its path with a trailing
    ``"/"``, ``""`` for a whole file); its fingerprint is what :func:`file_identity` (or
    :func:`tree_identity`) gives for it. :meth:`check` records a part the first time it is
    read and compares every later read with that record, raising :class:`InputChangedError`
    naming the input and the part when it differs; :meth:`settle` records, at the first
    read, the parts that later reads will check (every chunk file of a zarr array and the
    directories they are renamed into), so that a part changed after the first read is an
    error even at its own first read. Thread-safe; pickled by its name only: each process
    that unpickles tasks reading through it keeps one record of its own, shared by them.

    >>> ledger = ReadLedger("/data/a.zarr")
    >>> ledger.check({"c/0": (1, 2, 100, 5)})   # first read: recorded
    >>> ledger.check({"c/0": (1, 2, 100, 5)})   # read again, unchanged
    >>> ledger.check({"c/0": (1, 3, 100, 9)})  # doctest: +ELLIPSIS, +NORMALIZE_WHITESPACE
    Traceback (most recent call last):
    ...
    tilegraph.io.snapshot.InputChangedError: input '/data/a.zarr' changed while a plan read
    it: part 'c/0' was replaced by another file since the plan first read it, so ...
    """

    def __init__(self, path: str, trees: bool = False, uid: str | None = None):
        self.path = path
        self.trees = trees
        self.uid = uid if uid is not None else secrets.token_hex(8)
        self._seen: dict[str, tuple] = {}
        self._settled = False
        self._lock = threading.Lock()
        with _UID_LOCK:
            _BY_UID.setdefault(self.uid, self)

    def fingerprint(self, part: str) -> tuple:
        """The fingerprint of ``part`` now: :func:`file_identity` of the file or directory
        at that path under the input's (``""``: the input itself), or with ``trees``,
        :func:`tree_identity` of the directory there."""
        where = os.path.join(self.path, part) if part else self.path
        return tree_identity(where) if self.trees else file_identity(where)

    def current(self) -> bool:
        """Whether every part recorded so far is as it was recorded (stats each of them)."""
        with self._lock:
            return all(self.fingerprint(p) == f for p, f in self._seen.items())

    def __len__(self) -> int:
        return len(self._seen)

    def settle(self, parts: Callable[[], dict[str, tuple]]) -> None:
        """At the first call only: record the fingerprints ``parts()`` gives (computed
        then, under the ledger's lock), as if each had been read."""
        if self._settled:
            return
        with self._lock:
            if not self._settled:
                for part, fingerprint in parts().items():
                    self._seen.setdefault(part, fingerprint)
                self._settled = True

    def check(self, parts: dict[str, tuple]) -> None:
        """Record the parts read for the first time; raise if another differs from its
        record."""
        with self._lock:
            for part, fingerprint in parts.items():
                first = self._seen.setdefault(part, fingerprint)
                if first != fingerprint:
                    self._changed(part, first, fingerprint, "since the plan first read it")

    def same(self, before: dict[str, tuple], after: dict[str, tuple]) -> None:
        """Raise if a part changed between the fingerprints taken before and after one
        read (rewritten while it was being read)."""
        for part, fingerprint in before.items():
            if after.get(part) != fingerprint:
                self._changed(part, fingerprint, after.get(part, ()),
                              "while a block was being read from it")

    def _changed(self, part: str, old: tuple, new: tuple, when: str) -> None:
        if not new:
            what = "was removed"
        elif not old:
            what = "was created"
        elif isinstance(old[0], int) and old[:2] != new[:2]:
            what = "was replaced by another file"
        elif isinstance(old[0], int) and old[2:3] != new[2:3]:
            what = f"changed size from {old[2]} to {new[2]} bytes"
        elif part.endswith("/"):
            what = "had an entry added, removed or replaced (a chunk written)"
        elif isinstance(old[0], int):
            what = "was modified"
        else:  # the identities of the files of a directory
            what = "had a file replaced, rewritten, added or removed"
        name = (f"directory {part[:-1]!r}" if part.endswith("/")
                else f"part {part!r}" if part else "the file")
        raise InputChangedError(
            f"input {self.path!r} changed while a plan read it: {name} {what} {when}, so "
            "a block read now would mix old and new data. Build the array again to read the "
            "new contents, and do not modify inputs while a computation reads them")

    def __reduce__(self) -> tuple[Any, tuple[str, bool, str]]:
        # pickled as its name alone (tasks sent to other processes carry a few bytes, not
        # the records): every copy unpickled in one process is that process's one ledger
        return _ledger_in_process, (self.path, self.trees, self.uid)

    def __repr__(self) -> str:
        return f"ReadLedger({self.path!r}, {len(self._seen)} parts read)"


_LEDGERS: weakref.WeakValueDictionary[tuple[str, bool], ReadLedger] = \
    weakref.WeakValueDictionary()
_LEDGERS_LOCK = threading.Lock()
_BY_UID: weakref.WeakValueDictionary[str, ReadLedger] = weakref.WeakValueDictionary()
_UID_LOCK = threading.Lock()


def _ledger_in_process(path: str, trees: bool, uid: str) -> ReadLedger:
    """The ledger named ``uid`` in this process (made, empty, the first time a task
    reading through it arrives here)."""
    made = ReadLedger(path, trees, uid)  # registered unless one of that name is alive
    with _UID_LOCK:
        return _BY_UID.get(uid, made)


def shared_ledger(path: str, trees: bool = False) -> ReadLedger:
    """The ledger of the input at ``path`` for a new array over it: the one the arrays
    over it that are alive in this process use, when every part it recorded is still as it
    was (so two arrays over one input, both read in a run, check each other's reads);
    otherwise a new one, and the older arrays keep theirs (an array made again after its
    input changed reads the new contents; an older one reading it fails)."""
    path = os.path.abspath(path)
    with _LEDGERS_LOCK:
        ledger = _LEDGERS.get((path, trees))
        if ledger is None or not ledger.current():
            ledger = _LEDGERS[(path, trees)] = ReadLedger(path, trees)
        return ledger


def tree_identity(path: str) -> tuple:
    """The identities (:func:`file_identity`) of every file under the directory ``path``,
    by relative path, sorted (``()``: no such directory): changes when any file in it is
    replaced, rewritten, added or removed."""
    out = []
    for root, dirs, files in os.walk(path):
        dirs.sort()
        for name in sorted(files):
            full = os.path.join(root, name)
            ident = file_identity(full)
            if ident:
                out.append((os.path.relpath(full, path), *ident))
    return tuple(out)
