"""Checkpoints: the finished blocks of a run kept in a directory, so that a rerun of the same
plan after a failure (a lost host, a killed job) computes only what was not finished.

A run given a checkpoint store (``compute(..., checkpoint=PATH)``, ``persist(...,
store=PATH)``) writes every block of its results to the store as soon as the task that
makes it has finished, on the process that ran the task. Before the next run of the same
plan computes anything, the process that returns the results (the driver; rank 0 of an MPI
run) reads the blocks the store holds for it, and the run computes only the others: the
work that only the finished blocks needed is culled from the plan.

**Trust nothing read back.** A block is used only when all of these hold, and is otherwise
computed again and rewritten:

- it was written whole under this store's key: every file ends with an HMAC-SHA256 of all
  it holds, keyed by the store's own random key (the file ``key``, made when the store is
  made), so a half-written, truncated, corrupted or foreign file (another store's, another
  user's) is never taken;
- its header names the plan key asked for: the digest of the block's whole history (what
  every task that leads to it reads, by :mod:`tilegraph.runtime.digest`: arrays by content,
  functions by their code, closures and the globals they read, the seeds of random arrays,
  files by their identity; and how the tasks connect), with its planned shape and dtype, so
  a changed plan, input or function never reuses a stale block, and a renamed file does not
  move a block to another place;
- its shape and dtype are the planned ones, and its length is what its header says.

The store's directory and key must be the user's own, not links, and the directory
writable by no one else (checked at every open: an error names what is wrong): another
local user who could write there could not forge a MAC without the key, but could remove
or replace it. A block that is not a NumPy array of a plain dtype (a sparse block, a Python
object) is pickled, and unpickled only once its MAC has been checked.

On several hosts the store must be a directory every process of the run sees at the same
path (a filesystem they share): each process writes the blocks it makes. A process that
does not see it fails the run with an error naming the store and its host. Blocks are
written without ``fsync``: a block a crash left half on disk fails its check and is made
again.

Known limits: the plan key digests every input the plan reads (a large ``from_numpy`` array
once per run); a plan whose tasks read something that differs from run to run (an unseeded
random array drawn anew, a value the digest cannot see: see
:mod:`tilegraph.runtime.digest`) gets new plan keys each run, and so resumes nothing.
Blocks of earlier plans stay in the store until it is removed.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import hmac
import json
import os
import pickle
import secrets
import socket
import stat
import struct
from collections.abc import Hashable, Sequence
from typing import Any

import numpy as np

from tilegraph.debris import remove_debris
from tilegraph.graph.taskgraph import MODE_DATA, TaskGraph
from tilegraph.io._atomic import temp_sibling
from tilegraph.runtime.digest import PlanValues

MAGIC = b"TGCKPT01"
KEY_FILE = "key"
KEY_BYTES = 32
SUFFIX = ".blk"
_HEADER_MAX = 1 << 16  # bytes of a block's header, at most
_MAC = hashlib.sha256().digest_size


class CheckpointError(RuntimeError):
    """A checkpoint store cannot be used: missing where a task runs, not the user's own,
    writable by others, or its key unreadable. The message names the store and the host."""


def _host() -> str:
    return socket.gethostname()


class CheckpointStore:
    """The store at ``path`` (see the module docstring). ``create``: make the directory
    (mode 0700, with its parents) and its key if missing; else a missing store is a
    :class:`CheckpointError` naming it and this host (a process of a run on a host that
    does not share the store). Pickles by its path alone: a process that unpickles it opens
    the store again (without making it) and reads the key there.

    >>> import tempfile, numpy as np
    >>> store = CheckpointStore(tempfile.mkdtemp() + "/ckpt", create=True)
    >>> store.write("ab" * 32, np.arange(3.0), (3,), np.float64)
    True
    >>> store.read("ab" * 32, (3,), np.float64)
    (array([0., 1., 2.]), '')
    >>> store.read("ab" * 32, (4,), np.float64)[1]
    'its header says shape (3,), dtype <f8, not the planned (4,), <f8'
    """

    def __init__(self, path: Any, *, create: bool = False):
        if isinstance(path, bool) or not isinstance(path, (str, os.PathLike)):
            raise TypeError(f"a checkpoint store is a directory path, got "
                            f"{type(path).__name__}")
        self.path = os.path.abspath(os.fspath(path))
        self._key: bytes | None = None
        if create:
            os.makedirs(self.path, mode=0o700, exist_ok=True)
        self._check_directory()
        self._key = self._read_key(create)
        if create:
            remove_debris(self.path)  # what writers killed on this host left

    def __reduce__(self) -> tuple:
        return _open_store, (self.path,)

    def __repr__(self) -> str:
        return f"CheckpointStore({self.path!r})"

    # -- opening ---------------------------------------------------------------------------

    def _check_directory(self) -> None:
        try:
            st = os.lstat(self.path)
        except FileNotFoundError:
            raise CheckpointError(
                f"checkpoint store {self.path} does not exist on host {_host()}: on several "
                "hosts the store must be a directory every process of the run sees at the "
                "same path (a filesystem they share)") from None
        if stat.S_ISLNK(st.st_mode) or not stat.S_ISDIR(st.st_mode):
            raise CheckpointError(f"checkpoint store {self.path} on host {_host()} is not a "
                                  "directory (a link or a file): give a directory of yours")
        if st.st_uid != os.geteuid():
            raise CheckpointError(f"checkpoint store {self.path} on host {_host()} belongs to "
                                  f"user {st.st_uid}, not to this user ({os.geteuid()})")
        if st.st_mode & 0o022:
            raise CheckpointError(
                f"checkpoint store {self.path} on host {_host()} is writable by others "
                f"(mode {stat.S_IMODE(st.st_mode):o}): chmod go-w it, or use a directory only "
                "you can write")

    def _read_key(self, create: bool) -> bytes:
        path = os.path.join(self.path, KEY_FILE)
        if create and not os.path.lexists(path):
            self._make_key(path)
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
        except FileNotFoundError:
            raise CheckpointError(f"checkpoint store {self.path} on host {_host()} has no key "
                                  f"file ({KEY_FILE}): it was not made by tilegraph, or its "
                                  "key was removed (remove the store to start anew)") from None
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                raise CheckpointError(f"the key of checkpoint store {self.path} is a link") \
                    from None
            raise
        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode) or st.st_uid != os.geteuid() or \
                    st.st_mode & 0o077:
                raise CheckpointError(
                    f"the key of checkpoint store {self.path} on host {_host()} is not a file "
                    f"of this user's that only they can read (mode "
                    f"{stat.S_IMODE(st.st_mode):o}, owner {st.st_uid})")
            key = os.read(fd, KEY_BYTES + 1)
        finally:
            os.close(fd)
        if len(key) != KEY_BYTES:
            raise CheckpointError(f"the key of checkpoint store {self.path} has {len(key)} "
                                  f"bytes, not {KEY_BYTES}")
        return key

    def _make_key(self, path: str) -> None:
        """A new random key, linked into place whole (of two processes making it at once,
        one wins and the other reads it)."""
        tmp = temp_sibling(path)
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        try:
            os.write(fd, secrets.token_bytes(KEY_BYTES))
            os.fsync(fd)
        finally:
            os.close(fd)
        try:
            os.link(tmp, path)
        except FileExistsError:
            pass
        finally:
            os.unlink(tmp)

    # -- blocks ----------------------------------------------------------------------------

    def block_path(self, plan_key: str) -> str:
        if len(plan_key) != 64 or any(c not in "0123456789abcdef" for c in plan_key):
            raise ValueError(f"a plan key is 64 hexadecimal digits, got {plan_key!r}")
        return os.path.join(self.path, plan_key + SUFFIX)

    def write(self, plan_key: str, value: Any, shape: tuple[int, ...], dtype: Any) -> bool:
        """Write ``value`` as the block of ``plan_key`` (planned ``shape`` and ``dtype``),
        whole or not at all (a hidden temporary file renamed into place). A value of
        another shape, or of a dtype of another kind, is not written (False): the run
        reports it where it assembles the result."""
        dtype = np.dtype(dtype)
        shape = tuple(int(n) for n in shape)
        if np.shape(value) != shape:
            return False
        if isinstance(value, (np.ndarray, np.generic)) and not _pickled(dtype):
            arr = np.asarray(value)
            if arr.dtype != dtype:
                if not np.can_cast(arr.dtype, dtype, casting="same_kind"):
                    return False
                arr = arr.astype(dtype)
            arr = np.ascontiguousarray(arr)
            payload: Any = memoryview(arr.reshape(-1)).cast("B") if arr.size else b""
            kind = "array"
        else:
            payload = pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)
            kind = "pickle"
        head = _header(plan_key, kind, shape, dtype, len(payload))
        mac = hmac.new(self._key, head, hashlib.sha256)
        mac.update(payload)
        final = self.block_path(plan_key)
        tmp = temp_sibling(final)  # (named after this process: removed if it dies)
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        try:
            with os.fdopen(fd, "wb", closefd=True) as f:
                f.write(head)
                f.write(payload)
                f.write(mac.digest())
            os.replace(tmp, final)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise
        return True

    def read(self, plan_key: str, shape: tuple[int, ...], dtype: Any
             ) -> tuple[Any, str]:
        """The block of ``plan_key`` and ``''``, or ``None`` and why it cannot be trusted
        (``'missing'``, or what failed: see the module docstring)."""
        dtype = np.dtype(dtype)
        shape = tuple(int(n) for n in shape)
        path = self.block_path(plan_key)
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
        except FileNotFoundError:
            return None, "missing"
        except OSError as exc:
            return None, f"it cannot be opened ({exc.strerror})"
        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode):
                return None, "it is not a regular file"
            limit = (_HEADER_MAX + _MAC + int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
                     if not _pickled(dtype) else None)
            if limit is not None and st.st_size > limit:
                return None, f"it is larger ({st.st_size} bytes) than such a block can be"
            data = bytearray(st.st_size)
            view = memoryview(data)
            got = 0
            while got < len(data):
                n = os.readv(fd, [view[got:]])
                if n == 0:
                    break
                got += n
        finally:
            os.close(fd)
        if got != len(data):
            return None, "it was cut short while being read"
        return self._check(data, plan_key, shape, dtype)

    def _check(self, data: bytearray, plan_key: str, shape: tuple[int, ...],
               dtype: np.dtype) -> tuple[Any, str]:
        if len(data) < len(MAGIC) + 4 + _MAC or data[:len(MAGIC)] != MAGIC:
            return None, "it is not a checkpoint block"
        (hlen,) = struct.unpack_from("<I", data, len(MAGIC))
        start = len(MAGIC) + 4 + hlen
        if hlen > _HEADER_MAX or start + _MAC > len(data):
            return None, "its header is damaged"
        body = memoryview(data)[:len(data) - _MAC]
        want = hmac.new(self._key, body, hashlib.sha256).digest()
        if not hmac.compare_digest(want, bytes(data[len(data) - _MAC:])):
            return None, ("its MAC does not match this store's key (written in part, "
                          "damaged, or not written by this store)")
        try:
            head = json.loads(bytes(data[len(MAGIC) + 4:start]))
        except ValueError:
            return None, "its header is damaged"
        if head.get("plan") != plan_key:
            return None, f"it holds the block of another plan key ({head.get('plan')})"
        if tuple(head.get("shape", ())) != shape or head.get("dtype") != dtype.str:
            return None, (f"its header says shape {tuple(head.get('shape', ()))}, dtype "
                          f"{head.get('dtype')}, not the planned {shape}, {dtype.str}")
        payload = memoryview(data)[start:len(data) - _MAC]
        if head.get("len") != len(payload):
            return None, "its length is not what its header says"
        if head.get("kind") == "array" and not _pickled(dtype):
            if len(payload) != int(np.prod(shape, dtype=np.int64)) * dtype.itemsize:
                return None, "its length does not fit its shape and dtype"
            return np.frombuffer(data, dtype=dtype, count=int(np.prod(shape)),
                                 offset=start).reshape(shape), ""
        if head.get("kind") == "pickle":
            value = pickle.loads(payload)  # (its MAC is this store's: written by this user)
            if np.shape(value) != shape:
                return None, f"it holds a value of shape {np.shape(value)}, not {shape}"
            return value, ""
        return None, "its header names no known kind of block"

    def discard(self, plan_key: str) -> None:
        """Remove the block of ``plan_key`` if there is one (e.g. one that failed its
        check)."""
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.block_path(plan_key))


def _pickled(dtype: np.dtype) -> bool:
    """Whether blocks of ``dtype`` are pickled (objects, structured records)."""
    return dtype.hasobject or dtype.fields is not None


def _header(plan_key: str, kind: str, shape: tuple[int, ...], dtype: np.dtype,
            length: int) -> bytes:
    text = json.dumps({"v": 1, "plan": plan_key, "kind": kind, "shape": list(shape),
                       "dtype": dtype.str, "len": length}, sort_keys=True).encode()
    return MAGIC + struct.pack("<I", len(text)) + text


_stores: dict[str, CheckpointStore] = {}


def _open_store(path: str) -> CheckpointStore:
    """The store at ``path`` in this process (opened once: a task unpickled with it on a
    worker does not read the key again for every block)."""
    store = _stores.get(path)
    if store is None:
        store = _stores[path] = CheckpointStore(path)
    return store


# -- plan keys ---------------------------------------------------------------------------------


class _RunValues(PlanValues):
    """The digest of :mod:`tilegraph.runtime.digest`, with the seeds drawn for unseeded
    random arrays included (each run draws its own: its blocks are not another run's)."""

    def _walk(self, h: Any, v: Any) -> None:
        tp = type(v)
        if tp.__name__ == "FreshSeed" and tp.__module__ == "tilegraph.array.random":
            h.update(b"seed:%d;" % int(v))
            return
        super()._walk(h, v)


def plan_keys(graph: TaskGraph, keys: Sequence[Hashable],
              shapes: Sequence[tuple[int, ...]], dtypes: Sequence[Any]) -> list[str]:
    """The plan key of the block each task of ``keys`` makes (with its planned shape and
    dtype): a digest of everything that leads to it (what each task on the way reads, its
    block coordinates, and the plan keys of its inputs in order), never of the tasks'
    names, which differ from run to run. Two runs of the same program on the same inputs
    give the same keys; anything that changes a block's history changes its key."""
    sub = graph.cull(keys)
    digests = _RunValues().digest(sub)
    coords = sub.meta.get("coords") or [None] * len(sub)
    kinds = sub.meta.get("kind") or [None] * len(sub)
    ptr, idx = sub.dep_ptr.tolist(), sub.dep_idx.tolist()
    done: list[bytes] = [b""] * len(sub)
    for i in sub.topological_order().tolist():
        h = hashlib.sha256(digests[i])
        h.update(repr((coords[i], kinds[i], int(sub.modes[i]))).encode())
        for d in idx[ptr[i]:ptr[i + 1]]:
            h.update(done[d])
        done[i] = h.digest()
    out = []
    for k, shape, dtype in zip(keys, shapes, dtypes, strict=True):
        h = hashlib.sha256(done[sub.index[k]])
        h.update(repr((tuple(int(n) for n in shape), np.dtype(dtype).str)).encode())
        out.append(h.hexdigest())
    return out


class Keep:
    """A task's function that also writes the block it returns to the checkpoint store at
    ``path`` (under its plan key, with its planned shape and dtype), opened where the task
    runs."""

    __slots__ = ("dtype", "func", "path", "plan_key", "shape")

    def __init__(self, func: Any, path: str, plan_key: str, shape: tuple[int, ...],
                 dtype: np.dtype):
        self.func, self.path, self.plan_key = func, path, plan_key
        self.shape, self.dtype = shape, dtype

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        value = self.func(*args, **kwargs)
        _open_store(self.path).write(self.plan_key, value, self.shape, self.dtype)
        return value

    def __reduce__(self) -> tuple:
        return Keep, (self.func, self.path, self.plan_key, self.shape, self.dtype)

    def __repr__(self) -> str:
        return f"Keep({self.func!r} -> {self.path})"


def keep_blocks(graph: TaskGraph, keys: Sequence[Hashable], plan_keys: Sequence[str],
                path: str, shapes: Sequence[tuple[int, ...]],
                dtypes: Sequence[Any]) -> TaskGraph:
    """``graph`` with the task of each of ``keys`` writing its block to the store at
    ``path`` when it finishes (its function wrapped in :class:`Keep`). A literal value (no
    task) is not written: nothing computes it."""
    funcs = list(graph.funcs)
    for k, pk, shape, dtype in zip(keys, plan_keys, shapes, dtypes, strict=True):
        i = graph.index[k]
        if graph.modes[i] == MODE_DATA or funcs[i] is None:
            continue
        funcs[i] = Keep(funcs[i], path, pk, tuple(shape), np.dtype(dtype))
    return graph.replace(funcs=funcs)


def read_block(path: str, plan_key: str, shape: tuple[int, ...], dtype: Any) -> Any:
    """The block of ``plan_key`` in the store at ``path``, checked (the task of a block of
    an array persisted to a store); an error naming the store, the host and what failed if
    it cannot be trusted."""
    value, why = _open_store(path).read(plan_key, shape, dtype)
    if value is None:
        raise CheckpointError(f"block {plan_key[:16]}... of an array persisted in {path} "
                              f"cannot be used on host {_host()}: {why}")
    return value


def finished_blocks(store: CheckpointStore, plan_keys: Sequence[str],
                    shapes: Sequence[tuple[int, ...]], dtypes: Sequence[Any]
                    ) -> tuple[dict[int, Any], dict[int, str]]:
    """The blocks the store holds and that pass every check, by position in
    ``plan_keys``, and why each other present block was refused (those files are
    removed, so that the run writes them again)."""
    found: dict[int, Any] = {}
    refused: dict[int, str] = {}
    for n, (pk, shape, dtype) in enumerate(zip(plan_keys, shapes, dtypes, strict=True)):
        value, why = store.read(pk, shape, dtype)
        if value is not None:
            found[n] = value
        elif why != "missing":
            refused[n] = why
            store.discard(pk)
    return found, refused


class Resumed:
    """What the last run with a checkpoint store in this process found there (on the
    process that returns the results; the others know only ``loaded``): ``store``,
    ``blocks`` (of the results), ``loaded`` (taken from the store, not computed),
    ``refused`` (plan key -> why a block found there was not trusted; computed again)."""

    __slots__ = ("blocks", "loaded", "refused", "store")

    def __init__(self, store: str, blocks: int, loaded: int, refused: dict[str, str]):
        self.store, self.blocks, self.loaded, self.refused = store, blocks, loaded, refused

    def __repr__(self) -> str:
        return (f"Resumed({self.store!r}: {self.loaded} of {self.blocks} blocks loaded, "
                f"{len(self.refused)} refused)")


_last: list[Resumed] = []


def remember(resumed: Resumed) -> None:
    _last[:] = [resumed]


def last_resumed() -> Resumed | None:
    """What the last run with a checkpoint store in this process found (:class:`Resumed`),
    ``None`` before any."""
    return _last[0] if _last else None
