"""The object store of the serverless engine: where blocks live between tasks.

The interface is an object store's (put, get, exists, delete by prefix), with
read-after-write consistency and atomic puts: a reader sees a whole object or none, never a
half-written one, so a task that writes its output twice (a duplicated delivery) leaves the
same whole object. Nothing assumes a shared file system: the default is a local directory
(each put is written under a hidden temporary name and renamed into place), and any fsspec
URL (``s3://bucket/prefix`` through s3fs, ``memory://``, ``file://``) is a store too.

Values are serialized by :func:`dumps`: a NumPy array as a ``.npy`` image (read back with one
copy, never with ``allow_pickle``), anything else pickled (cloudpickle when plain pickle
cannot, e.g. for closures). Every object carries a MAC under the pool's secret
(:mod:`tilegraph.runtime.serverless.auth`), bound to its key::

    b"TGS1" | kind (1 byte) | HMAC-SHA256 tag (32 bytes) | payload

``kind`` ``P``: a pickle, the tag covers it; ``N``: a ``.npy`` image, the tag covers its
header and its data; ``H``: a ``.npy`` image whose tag covers the header only (its shape,
dtype and order). A pickle is unpickled only after its tag is checked. ``.npy`` data is
covered by the tag on a store other users may be able to write (:attr:`ObjectStore.mac_data`:
any fsspec store); a :class:`LocalStore` is a directory only its user can write to (it
refuses any other), where the tag covers the header alone: hashing a block's data costs
about as much as moving it (HMAC-SHA256 about 0.55 ms per MB with the CPU's SHA
instructions, 1.1 ms for a 2 MB block, on each write and each read). A reader also checks a
block against the shape and dtype planned for it when the run knows them (``spec``).
"""

from __future__ import annotations

import errno
import io
import math
import os
import pickle
import shutil
import socket
import stat
import uuid
from abc import ABC, abstractmethod
from typing import Any

import numpy as np

from tilegraph.debris import owner_tag, remove_debris
from tilegraph.runtime.serverless.auth import TAG_BYTES, IntegrityError, Signer
from tilegraph.util import AST_LOCK

_MAGIC = b"TGS1"
PICKLE, NPY, NPY_HEAD = b"P", b"N", b"H"  # what an object's tag covers (see the docstring)
_PREFIX = len(_MAGIC) + 1 + TAG_BYTES
_HEADER_MAX = 10_100  # bytes of a .npy image's magic, version, length and header at most
_LABEL = b"tilegraph-object"


def _whole(value: np.ndarray) -> np.ndarray:
    """``value`` in one piece of memory: a block cut from a larger array (a view with
    strides) is copied first. NumPy's writer walks such a view in small buffered pieces,
    4-5x slower than copying it and writing the copy (2 MB blocks of an 8000-wide array:
    about 10 ms against 2-4 ms)."""
    flags = value.flags
    if flags.c_contiguous or flags.f_contiguous:
        return value
    return np.ascontiguousarray(value)


def is_block(value: Any) -> bool:
    """Whether ``value`` is stored as a ``.npy`` image (a NumPy array without objects)."""
    return type(value) is np.ndarray and not value.dtype.hasobject


def block_spec(value: Any) -> tuple | None:
    """``(shape, dtype)`` of a value stored as a block, else ``None``."""
    return (value.shape, value.dtype) if is_block(value) else None


def _npy_parts(value: np.ndarray) -> tuple[bytes, np.ndarray]:
    """The ``.npy`` header of ``value`` and its data as a flat array of bytes (no copy of
    a contiguous array)."""
    whole = _whole(value)
    fmt = np.lib.format
    d = fmt.header_data_from_array_1_0(whole)
    buf = io.BytesIO()
    try:
        fmt.write_array_header_1_0(buf, d)
    except ValueError:  # a header longer than version 1.0 allows
        buf = io.BytesIO()
        fmt.write_array_header_2_0(buf, d)
    data = whole.T if d["fortran_order"] else whole
    return buf.getvalue(), data.reshape(-1).view(np.uint8)


def _tag_of(signer: Signer, kind: bytes, name: str, *parts: Any) -> bytes:
    return signer.tag(_LABEL + kind, name, *parts)


def dumps(value: Any, name: str, signer: Signer, mac_data: bool = True) -> bytes:
    """The bytes of ``value`` stored under ``name``: a ``.npy`` image for a plain NumPy
    array, else a pickle, with the tag of the module docstring."""
    if is_block(value):
        header, data = _npy_parts(value)
        kind = NPY if mac_data else NPY_HEAD
        tag = _tag_of(signer, kind, name, header, data) if mac_data else \
            _tag_of(signer, kind, name, header)
        return b"".join((_MAGIC, kind, tag, header, data))
    payload = pickle_dumps(value)
    return b"".join((_MAGIC, PICKLE, _tag_of(signer, PICKLE, name, payload), payload))


def dumps_code(value: Any, name: str, signer: Signer) -> bytes:
    """``value`` (a task source: functions and their arguments) as :func:`dumps` stores a
    pickle, pickled with cloudpickle when it is installed, so that functions defined in a
    script's ``__main__``, lambdas and closures reach workers that cannot import them."""
    try:
        import cloudpickle
    except ImportError:
        payload = pickle_dumps(value)
    else:
        payload = cloudpickle.dumps(value, protocol=5)
    return b"".join((_MAGIC, PICKLE, _tag_of(signer, PICKLE, name, payload), payload))


def _where(name: str, url: str) -> str:
    return f"object {name!r} in the store {url}"


def _split(head: bytes | memoryview, name: str, url: str) -> tuple[bytes, bytes]:
    """The kind and the tag of a stored object, from its first bytes."""
    if len(head) < _PREFIX or bytes(head[:4]) != _MAGIC:
        raise IntegrityError(f"{_where(name, url)} carries no MAC: it was not written by "
                             "tilegraph with this pool's secret, and is not read")
    kind = bytes(head[4:5])
    if kind not in (PICKLE, NPY, NPY_HEAD):
        raise IntegrityError(f"{_where(name, url)} is of an unknown kind {kind!r}")
    return kind, bytes(head[5:_PREFIX])


def _parse_header(raw: bytes | memoryview, name: str, url: str
                  ) -> tuple[tuple[int, ...], bool, np.dtype, int]:
    """``(shape, fortran order, dtype, header length)`` of a ``.npy`` image's start."""
    fmt = np.lib.format
    f = io.BytesIO(raw)
    try:
        with AST_LOCK:   # NumPy parses the header as a Python literal
            version = fmt.read_magic(f)
            if version == (1, 0):
                shape, fortran, dtype = fmt.read_array_header_1_0(f)
            else:
                shape, fortran, dtype = fmt.read_array_header_2_0(f)
    except ValueError as exc:
        raise IntegrityError(f"{_where(name, url)} is not a readable .npy image: "
                             f"{exc}") from None
    if dtype.hasobject:
        raise IntegrityError(f"{_where(name, url)} holds Python objects, which are not read "
                             "from .npy images")
    return shape, fortran, dtype, f.tell()


def check_spec(shape: tuple, dtype: Any, spec: tuple | None, name: str, url: str) -> None:
    """Raise :class:`IntegrityError` naming the object if a block of ``shape`` and
    ``dtype`` is not what ``spec`` (``(shape, dtype)``; ``None``: not known) plans."""
    if spec is None:
        return
    want_shape, want_dtype = tuple(spec[0]), np.dtype(spec[1])
    if tuple(shape) != want_shape or dtype != want_dtype:
        raise IntegrityError(
            f"{_where(name, url)} has shape {tuple(shape)} and dtype {dtype}, but its task "
            f"was planned to make shape {want_shape} and dtype {want_dtype}; it is not used")


def _check_block(signer: Signer, kind: bytes, tag: bytes, name: str, url: str,
                 mac_data: bool, header: Any, data: Any) -> None:
    """Check the tag of a ``.npy`` block (``data``: its bytes, read when the tag covers
    them; ``None`` before they are read)."""
    where = _where(name, url)
    if kind == NPY_HEAD:
        if mac_data:
            raise IntegrityError(f"{where} has a MAC over its header only, but this store "
                                 "needs one over the data too; it is not used")
        signer.check(_LABEL + kind, name, tag, where, header)
    elif data is not None:
        signer.check(_LABEL + kind, name, tag, where, header, data)


def loads(data: bytes | memoryview, name: str, signer: Signer, mac_data: bool = True,
          url: str = "?", spec: tuple | None = None) -> Any:
    """The value :func:`dumps` wrote under ``name``, after its tag is checked (an object
    whose ``.npy`` data the tag does not cover is refused when ``mac_data``); else
    :class:`IntegrityError` naming the object and the store ``url``."""
    view = memoryview(data)
    kind, tag = _split(view, name, url)
    where = _where(name, url)
    if kind == PICKLE:
        payload = view[_PREFIX:]
        signer.check(_LABEL + kind, name, tag, where, payload)
        if spec is not None:
            raise IntegrityError(f"{where} is a pickle, but its task was planned to make a "
                                 f"block of shape {tuple(spec[0])}; it is not used")
        return pickle.loads(payload)
    shape, fortran, dtype, hlen = _parse_header(view[_PREFIX:_PREFIX + _HEADER_MAX], name,
                                                url)
    header = view[_PREFIX:_PREFIX + hlen]
    check_spec(shape, dtype, spec, name, url)
    nbytes = math.prod(shape) * dtype.itemsize
    body = view[_PREFIX + hlen:_PREFIX + hlen + nbytes]
    if len(body) != nbytes:
        raise IntegrityError(f"{where} is truncated")
    _check_block(signer, kind, tag, name, url, mac_data, header, body)
    flat = np.frombuffer(body, dtype=dtype).copy()  # writable, and the bytes' own
    return flat.reshape(shape[::-1]).transpose() if fortran else flat.reshape(shape)


def pickle_dumps(value: Any) -> bytes:
    """``value`` pickled, with cloudpickle for what plain pickle refuses (lambdas,
    closures, functions defined in ``__main__``)."""
    try:
        return pickle.dumps(value, protocol=5)
    except (pickle.PicklingError, AttributeError, TypeError) as first:
        try:
            import cloudpickle
        except ImportError:
            raise TypeError(
                f"cannot send {type(value).__name__} to serverless workers: {first}; "
                "install cloudpickle (pip install -e '.[serverless]') to send closures "
                "and lambdas") from first
        return cloudpickle.dumps(value, protocol=5)


class ObjectStore(ABC):
    """Objects by key (``/``-separated names). ``url`` names the store for other processes;
    ``signer`` (set by :meth:`authenticate`) makes and checks the objects' MACs;
    ``mac_data``: whether the MAC of a ``.npy`` block covers its data (see the module
    docstring)."""

    url: str
    signer: Signer | None = None
    mac_data: bool = True

    @abstractmethod
    def put(self, key: str, data: bytes) -> None:
        """Write ``data`` under ``key`` atomically (a reader sees all of it or nothing)."""

    @abstractmethod
    def get(self, key: str) -> bytes:
        """The object ``key``; ``KeyError`` naming the key if it does not exist."""

    @abstractmethod
    def exists(self, key: str) -> bool:
        """Whether ``key`` holds an object."""

    @abstractmethod
    def delete_prefix(self, prefix: str) -> None:
        """Remove the object ``prefix`` and every object whose key starts with
        ``prefix + "/"``."""

    def authenticate(self, secret: bytes) -> ObjectStore:
        """Make and check the MACs of this store's values under ``secret``; returns the
        store."""
        self.signer = Signer(secret)
        return self

    def _signer(self) -> Signer:
        if self.signer is None:
            raise ValueError(f"object store {self.url} has no secret to make and check the "
                             "MACs of its values: open it with open_store(url, secret=...)")
        return self.signer

    def put_value(self, key: str, value: Any) -> int:
        """Store ``value`` (see :func:`dumps`); returns the bytes written."""
        data = dumps(value, key, self._signer(), self.mac_data)
        self.put(key, data)
        return len(data)

    def put_code(self, key: str, value: Any) -> int:
        """Store a task source (see :func:`dumps_code`); returns the bytes written."""
        data = dumps_code(value, key, self._signer())
        self.put(key, data)
        return len(data)

    def get_value(self, key: str, spec: tuple | None = None) -> Any:
        """The value stored under ``key``, its MAC checked (and a block's shape and dtype
        against ``spec``, ``(shape, dtype)``, when given): :class:`IntegrityError` naming
        the key and the store otherwise."""
        return loads(self.get(key), key, self._signer(), self.mac_data, self.url, spec)

    def get_shared(self, key: str, spec: tuple | None = None) -> Any:
        """The value ``key`` for reading only: memory mapped where the store allows, so that
        a large literal read by every worker is held once by the page cache."""
        return self.get_value(key, spec)

    def check_writable(self) -> None:
        """Raise ``OSError`` naming the store if an object cannot be written and read back
        (called before any task runs)."""
        # a name of its own at the top (no folder shared with another run's probe, which
        # could remove that folder while this one is being made in it)
        key = f"_probe-{owner_tag()}-{uuid.uuid4().hex}"
        try:
            self.put(key, b"probe")
            if self.get(key) != b"probe":
                raise OSError(f"object store {self.url}: a probe object read back differently")
            self.delete_prefix(key)
        except OSError as exc:
            raise OSError(exc.errno, f"object store {self.url} is not writable: "
                          f"{exc.strerror or exc}") from exc
        except Exception as exc:
            raise OSError(f"object store {self.url} is not writable: {exc}") from exc


def check_private_dir(path: str, what: str = "object store") -> None:
    """Refuse (``PermissionError`` naming the path and its mode) a directory that another
    user can write to: one owned by another user, or with group or other write
    permission, or below a directory that others can write to without the sticky bit
    (they could move it and put their own in its place)."""
    if not hasattr(os, "geteuid"):
        return
    uid = os.geteuid()
    st = os.stat(path)
    mode = stat.S_IMODE(st.st_mode)
    if st.st_uid != uid or mode & 0o022:
        owner = "you" if st.st_uid == uid else f"uid {st.st_uid}"
        raise PermissionError(
            errno.EACCES, f"{what} {path} has mode {mode:04o} (owner {owner}): other users "
            "can write to it, and could change or read the blocks in it; use a directory "
            f"of yours that only you can write to (chmod go-w {path}), or none (a private "
            "temporary one)", path)
    parent = os.path.dirname(path)
    while parent and parent != path:
        pst = os.stat(parent)
        pmode = stat.S_IMODE(pst.st_mode)
        if (pmode & 0o022 and not pmode & stat.S_ISVTX) or pst.st_uid not in (uid, 0):
            raise PermissionError(
                errno.EACCES, f"{what} {path} is inside {parent} (mode {pmode:04o}, owner "
                f"uid {pst.st_uid}), which another user can change: they could put a "
                "directory of their own in its place; use a directory outside it", path)
        path, parent = parent, os.path.dirname(parent)


class LocalStore(ObjectStore):
    """Objects as files under a directory only its user can write to (a directory that
    other users can write to is refused; a missing one is made with mode 0700, its
    folders 0700 and its files 0600); a put is a write to a hidden temporary file in
    the same directory followed by one rename (what a killed writer leaves is removed by
    ``tilegraph clean`` and by the next store on that directory). ``secret``: see
    :meth:`ObjectStore.authenticate`."""

    mac_data = False  # a private directory: only its user (or root) can change a block

    def __init__(self, root: str, secret: bytes | None = None, *, create: bool = True):
        self.root = os.path.abspath(root)
        self.url = self.root
        if not create and not os.path.isdir(self.root):
            raise FileNotFoundError(
                errno.ENOENT, f"object store {self.root} does not exist on host "
                f"{socket.gethostname()}: a directory store must be one that the driver "
                "and every worker share (a shared filesystem mounted at the same path), or "
                "an fsspec URL such as s3://bucket/prefix", self.root)
        try:
            os.makedirs(self.root, mode=0o700)
        except FileExistsError:
            pass
        check_private_dir(self.root)
        if secret is not None:
            self.authenticate(secret)

    def _path(self, key: str) -> str:
        if key.startswith("/") or ".." in key.split("/"):
            raise ValueError(f"bad object key {key!r}")
        return os.path.join(self.root, key)

    def put(self, key: str, data: bytes) -> None:
        self._write(key, lambda f: f.write(data))

    def _mkdir(self, path: str) -> None:
        """Make ``path`` and its missing parents below the root, each with mode 0700."""
        try:
            os.mkdir(path, 0o700)
        except FileExistsError:
            pass
        except FileNotFoundError:
            parent = os.path.dirname(path)
            if len(parent) <= len(self.root):
                raise
            self._mkdir(parent)
            try:
                os.mkdir(path, 0o700)
            except FileExistsError:
                pass

    def _write(self, key: str, write: Any) -> int:
        path = self._path(key)
        parent = os.path.dirname(path)
        tmp = os.path.join(parent, f".{os.path.basename(path)}.tmp-{owner_tag()}-"
                                   f"{uuid.uuid4().hex}")
        try:
            if parent != self.root:
                self._mkdir(parent)
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with open(fd, "wb") as f:
                write(f)
                size = f.tell()
            os.replace(tmp, path)
        except BaseException as exc:
            try:
                os.unlink(tmp)
            except OSError:
                pass
            if isinstance(exc, OSError):
                raise self._write_error(exc, key, parent) from exc
            raise
        return size

    def _write_error(self, exc: OSError, key: str, parent: str) -> OSError:
        """The error of a failed write, naming the store and the object; a full disk is
        ENOSPC even when NumPy's writer did not say so ("problem writing element ...")."""
        code = exc.errno
        if code is None:
            try:
                if shutil.disk_usage(parent).free < (1 << 20):
                    code = errno.ENOSPC
            except OSError:
                pass
        why = os.strerror(code) if code is not None else (exc.strerror or str(exc))
        return OSError(code, f"object store {self.url}: writing {key!r} failed: {why}",
                       self._path(key))

    def put_value(self, key: str, value: Any) -> int:
        if is_block(value):
            # straight from the array to the file: no intermediate bytes
            signer = self._signer()

            def write(f: Any) -> None:
                header, data = _npy_parts(value)
                if self.mac_data:
                    kind, tag = NPY, _tag_of(signer, NPY, key, header, data)
                else:
                    kind, tag = NPY_HEAD, _tag_of(signer, NPY_HEAD, key, header)
                f.write(_MAGIC + kind + tag + header)
                f.write(data)

            return self._write(key, write)
        return super().put_value(key, value)

    def _open(self, key: str) -> Any:
        try:
            return open(self._path(key), "rb")
        except FileNotFoundError:
            raise KeyError(f"object {key!r} is not in the store {self.url}") from None

    def _block_header(self, f: Any, key: str, spec: tuple | None
                      ) -> tuple[bytes, bytes, bytes, tuple, bool, np.dtype] | None:
        """For a ``.npy`` block open in ``f``: its kind, tag, header, shape, order and
        dtype, the header's tag checked (and the block against ``spec``), the file then at
        the start of its data. ``None`` (the file at its start) for a pickle."""
        raw = f.read(_PREFIX + _HEADER_MAX)
        kind, tag = _split(raw, key, self.url)
        if kind == PICKLE:
            f.seek(0)
            return None
        shape, fortran, dtype, hlen = _parse_header(memoryview(raw)[_PREFIX:], key, self.url)
        header = raw[_PREFIX:_PREFIX + hlen]
        _check_block(self._signer(), kind, tag, key, self.url, self.mac_data, header, None)
        check_spec(shape, dtype, spec, key, self.url)
        # before any memory is taken for it: the file holds the data its header says
        if os.fstat(f.fileno()).st_size - _PREFIX - hlen < math.prod(shape) * dtype.itemsize:
            raise IntegrityError(f"{_where(key, self.url)} is truncated")
        f.seek(_PREFIX + hlen)
        return kind, tag, header, shape, fortran, dtype

    def get_value(self, key: str, spec: tuple | None = None) -> Any:
        signer = self._signer()
        with self._open(key) as f:
            head = self._block_header(f, key, spec)
            if head is None:
                return loads(f.read(), key, signer, self.mac_data, self.url, spec)
            kind, tag, header, shape, fortran, dtype = head
            count = math.prod(shape)
            data = np.fromfile(f, dtype=dtype, count=count) if count else np.empty(0, dtype)
        if data.size != count:
            raise IntegrityError(f"{_where(key, self.url)} is truncated")
        if kind == NPY:
            _check_block(signer, kind, tag, key, self.url, self.mac_data, header,
                         data.view(np.uint8))
        return data.reshape(shape[::-1]).transpose() if fortran else data.reshape(shape)

    def get(self, key: str) -> bytes:
        with self._open(key) as f:
            return f.read()

    def exists(self, key: str) -> bool:
        return os.path.exists(self._path(key))

    def get_shared(self, key: str, spec: tuple | None = None) -> Any:
        with self._open(key) as f:
            head = self._block_header(f, key, spec)
            offset = f.tell()
        if head is None:
            return self.get_value(key, spec)
        kind, tag, header, shape, fortran, dtype = head
        count = math.prod(shape)
        if count == 0:
            flat = np.empty(0, dtype)
        else:
            try:
                flat = np.memmap(self._path(key), dtype=dtype, mode="r", offset=offset,
                                 shape=(count,))
            except ValueError:  # the file is shorter than its header says
                raise IntegrityError(f"{_where(key, self.url)} is truncated") from None
        if kind == NPY:
            _check_block(self._signer(), kind, tag, key, self.url, self.mac_data, header,
                         flat.view(np.uint8))
        return flat.reshape(shape[::-1]).transpose() if fortran else flat.reshape(shape)

    def delete_prefix(self, prefix: str) -> None:
        path = self._path(prefix)
        if os.path.isdir(path):
            shutil.rmtree(path, ignore_errors=True)
        elif os.path.lexists(path):
            os.unlink(path)

    def clean(self) -> None:
        """Remove the temporary files of dead writers under the root."""
        for dirpath, _, _ in os.walk(self.root):
            remove_debris(dirpath)


class FsspecStore(ObjectStore):
    """Objects in any fsspec file system (``s3://bucket/prefix`` through s3fs,
    ``memory://x``, ...): a put is one whole-object write, which object stores make atomic;
    on a file system fsspec writes in place, so a local directory should use
    :class:`LocalStore` (the default for plain paths and ``file://`` URLs). Other users
    may be able to write to such a store (a shared bucket), so the MAC of a block covers
    its data too. ``secret``: see :meth:`ObjectStore.authenticate`."""

    mac_data = True

    def __init__(self, url: str, secret: bytes | None = None, **storage_options: Any):
        import fsspec

        self.url = url.rstrip("/")
        self.fs, self.root = fsspec.core.url_to_fs(self.url, **storage_options)
        self.root = self.root.rstrip("/")
        if secret is not None:
            self.authenticate(secret)

    def put(self, key: str, data: bytes) -> None:
        self.fs.pipe_file(f"{self.root}/{key}", data)

    def get(self, key: str) -> bytes:
        try:
            return self.fs.cat_file(f"{self.root}/{key}")
        except FileNotFoundError:
            raise KeyError(f"object {key!r} is not in the store {self.url}") from None

    def exists(self, key: str) -> bool:
        return self.fs.exists(f"{self.root}/{key}")

    def delete_prefix(self, prefix: str) -> None:
        path = f"{self.root}/{prefix}"
        try:
            self.fs.rm(path, recursive=True)
        except FileNotFoundError:
            pass


def open_store(url: str | os.PathLike | ObjectStore, secret: bytes | None = None, *,
               create: bool = True) -> ObjectStore:
    """The store named by ``url``: a plain path or ``file://`` URL is a :class:`LocalStore`,
    any other URL an :class:`FsspecStore`; an :class:`ObjectStore` is used as it is.
    ``secret``: the MAC secret of its values (see :meth:`ObjectStore.authenticate`);
    ``create=False``: a local directory that does not exist is an error (a worker opening
    a run's store: a missing one is not shared with the driver), not made."""
    if isinstance(url, ObjectStore):
        store = url
    else:
        if not isinstance(url, (str, os.PathLike)):
            raise TypeError(f"store must be a path or a URL, got {type(url).__name__}")
        url = os.fspath(url)
        if not url:
            raise ValueError("store must be a path or a URL, got an empty string")
        if url.startswith("file://"):
            store = LocalStore(url[len("file://"):], create=create)
        elif "://" in url:
            store = FsspecStore(url)
        else:
            store = LocalStore(url, create=create)
    if secret is not None:
        store.authenticate(secret)
    return store
