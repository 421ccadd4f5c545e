"""The object store of the serverless engine: where blocks live between tasks.

The interface is an object store's (put, get, exists, delete by prefix), with
read-after-write consistency and atomic puts: a reader sees a whole object or none, never a
half-written one, so a task that writes its output twice (a duplicated delivery) leaves the
same whole object. Nothing assumes a shared file system: the default is a local directory
(each put is written under a hidden temporary name and renamed into place), and any fsspec
URL (``s3://bucket/prefix`` through s3fs, ``memory://``, ``file://``) is a store too.

Values are serialized by :func:`dumps`: a NumPy array as a ``.npy`` image (read back with one
copy), anything else pickled (cloudpickle when plain pickle cannot, e.g. for closures).
"""

from __future__ import annotations

import errno
import io
import math
import os
import pickle
import shutil
import uuid
from abc import ABC, abstractmethod
from typing import Any

import numpy as np

from tilegraph.debris import owner_tag, remove_debris
from tilegraph.util import AST_LOCK

_NPY = b"\x93NUMPY"
_PICKLE = b"TGPK"


def _whole(value: np.ndarray) -> np.ndarray:
    """``value`` in one piece of memory: a block cut from a larger array (a view with
    strides) is copied first. NumPy's writer walks such a view in small buffered pieces,
    4-5x slower than copying it and writing the copy (2 MB blocks of an 8000-wide array:
    about 10 ms against 2-4 ms)."""
    flags = value.flags
    if flags.c_contiguous or flags.f_contiguous:
        return value
    return np.ascontiguousarray(value)


def dumps(value: Any) -> bytes:
    """The bytes of ``value`` in the store: ``.npy`` for a plain NumPy array, else a pickle."""
    if type(value) is np.ndarray and value.dtype != object:
        buf = io.BytesIO()
        np.lib.format.write_array(buf, _whole(value), allow_pickle=False)
        return buf.getvalue()
    return _PICKLE + pickle_dumps(value)


def loads(data: bytes | memoryview) -> Any:
    """The value :func:`dumps` wrote."""
    head = bytes(data[:6])
    if head == _NPY:
        with AST_LOCK:   # NumPy parses the header as a Python literal
            return np.load(io.BytesIO(data), allow_pickle=False)
    if head[:4] != _PICKLE:
        raise ValueError("not an object written by the tilegraph serverless store")
    return pickle.loads(memoryview(data)[4:])


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


def dumps_code(value: Any) -> bytes:
    """``value`` (a task source: functions and their arguments) in the store's format,
    pickled with cloudpickle when it is installed, so that functions defined in a script's
    ``__main__``, lambdas and closures reach workers that cannot import them."""
    try:
        import cloudpickle
    except ImportError:
        return _PICKLE + pickle_dumps(value)
    return _PICKLE + cloudpickle.dumps(value, protocol=5)


class ObjectStore(ABC):
    """Objects by key (``/``-separated names). ``url`` names the store for other processes."""

    url: str

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

    def put_value(self, key: str, value: Any) -> int:
        """Store ``value`` (see :func:`dumps`); returns the bytes written."""
        data = dumps(value)
        self.put(key, data)
        return len(data)

    def get_value(self, key: str) -> Any:
        return loads(self.get(key))

    def get_shared(self, key: str) -> Any:
        """The value ``key`` for reading only: memory mapped where the store allows, so that
        a large literal read by every worker is held once by the page cache."""
        return self.get_value(key)

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


class LocalStore(ObjectStore):
    """Objects as files under a directory; a put is a write to a hidden temporary file in
    the same directory followed by one rename (what a killed writer leaves is removed by
    ``tilegraph clean`` and by the next store on that directory)."""

    def __init__(self, root: str):
        self.root = os.path.abspath(root)
        self.url = self.root
        os.makedirs(self.root, exist_ok=True)

    def _path(self, key: str) -> str:
        if key.startswith("/") or ".." in key.split("/"):
            raise ValueError(f"bad object key {key!r}")
        return os.path.join(self.root, key)

    def put(self, key: str, data: bytes) -> None:
        self._write(key, lambda f: f.write(data))

    def _write(self, key: str, write: Any) -> int:
        path = self._path(key)
        parent = os.path.dirname(path)
        os.makedirs(parent, exist_ok=True)
        tmp = os.path.join(parent, f".{os.path.basename(path)}.tmp-{owner_tag()}-"
                                   f"{uuid.uuid4().hex}")
        try:
            with open(tmp, "wb") as f:
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
        if type(value) is np.ndarray and value.dtype != object:
            # straight from the array to the file: no intermediate bytes
            whole = _whole(value)
            return self._write(key, lambda f: np.lib.format.write_array(
                f, whole, allow_pickle=False))
        return super().put_value(key, value)

    def get_value(self, key: str) -> Any:
        path = self._path(key)
        try:
            f = open(path, "rb")
        except FileNotFoundError:
            raise KeyError(f"object {key!r} is not in the store {self.url}") from None
        with f:
            if f.read(6) == _NPY:
                f.seek(0)
                return _read_npy(f, key, self.url)
            f.seek(0)
            return loads(f.read())

    def get(self, key: str) -> bytes:
        try:
            with open(self._path(key), "rb") as f:
                return f.read()
        except FileNotFoundError:
            raise KeyError(f"object {key!r} is not in the store {self.url}") from None

    def exists(self, key: str) -> bool:
        return os.path.exists(self._path(key))

    def get_shared(self, key: str) -> Any:
        path = self._path(key)
        try:
            with open(path, "rb") as f:
                head = f.read(6)
        except FileNotFoundError:
            raise KeyError(f"object {key!r} is not in the store {self.url}") from None
        if head == _NPY:
            with AST_LOCK:   # NumPy parses the header as a Python literal
                return np.load(path, mmap_mode="r", allow_pickle=False)
        return self.get_value(key)

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
    :class:`LocalStore` (the default for plain paths and ``file://`` URLs)."""

    def __init__(self, url: str, **storage_options: Any):
        import fsspec

        self.url = url.rstrip("/")
        self.fs, self.root = fsspec.core.url_to_fs(self.url, **storage_options)
        self.root = self.root.rstrip("/")

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


def open_store(url: str | os.PathLike | ObjectStore) -> ObjectStore:
    """The store named by ``url``: a plain path or ``file://`` URL is a :class:`LocalStore`,
    any other URL an :class:`FsspecStore`."""
    if isinstance(url, ObjectStore):
        return url
    if not isinstance(url, (str, os.PathLike)):
        raise TypeError(f"store must be a path or a URL, got {type(url).__name__}")
    url = os.fspath(url)
    if not url:
        raise ValueError("store must be a path or a URL, got an empty string")
    if url.startswith("file://"):
        return LocalStore(url[len("file://"):])
    if "://" in url:
        return FsspecStore(url)
    return LocalStore(url)


def _read_npy(f: Any, key: str, url: str) -> np.ndarray:
    """A ``.npy`` image from an open file. The header is parsed (NumPy evaluates it as a
    Python literal) holding :data:`tilegraph.util.AST_LOCK`, since several threads read
    blocks at once; the data is read without it."""
    fmt = np.lib.format
    with AST_LOCK:
        version = fmt.read_magic(f)
        if version == (1, 0):
            shape, fortran, dtype = fmt.read_array_header_1_0(f)
        else:
            shape, fortran, dtype = fmt.read_array_header_2_0(f)
    if dtype.hasobject:
        raise ValueError(f"object {key!r} in the store {url} holds Python objects, which "
                         "are not read from .npy images")
    count = math.prod(shape)
    data = np.fromfile(f, dtype=dtype, count=count) if count else np.empty(0, dtype)
    if data.size != count:
        raise ValueError(f"object {key!r} in the store {url} is truncated")
    if fortran:
        return data.reshape(shape[::-1]).transpose()
    return data.reshape(shape)
