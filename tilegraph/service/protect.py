"""What the service trusts and what it does not: its data directory kept private, the plans
it hands to a job's process sealed with a MAC, names checked before they become files or
records, and bounded, checked reads of what a job's process leaves in the data directory.

Anyone who can write the data directory could change what the service and its jobs read
back, so:

* the data directory is private (:func:`private_data_dir`): a new one is made 0700; an
  existing one that another user owns or can write, or whose parent another user can write
  (without the sticky bit), is refused with its path and mode; one that others can only
  read or enter is made 0700;
* a plan sent by :meth:`tilegraph.Client.compute` is stored as ``plan.pkl`` with an
  HMAC-SHA256 (:func:`seal_plan`) under a secret the service draws when it starts (never
  written to disk; the job's process gets it through a pipe), bound to the job's id and the
  plan's length: the job's process unpickles it only when the MAC is valid, compared in
  constant time (:func:`open_plan`), and otherwise fails naming the file;
* a name from a request becomes a file or a record only when it is short (at most
  ``MAX_NAME_BYTES`` bytes of UTF-8 per name, ``MAX_PATH_BYTES`` per path) and holds no
  NUL, control character, lone surrogate or path separator (:func:`check_name`); a JSON
  body nested deeper than ``MAX_JSON_DEPTH`` is refused (:func:`loads_json`);
* what a job's process writes (progress, error, events) is read with a size bound
  (:func:`read_bounded`) and taken field by field, each checked; text with lone surrogates
  is mended (:func:`mend`), so a record always encodes as UTF-8.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import re
import secrets
import stat
from typing import Any

MAX_NAME_BYTES = 255  # one file name (a script's, a job's, a component of an output path)
MAX_PATH_BYTES = 4096  # a declared output's relative path
MAX_JSON_DEPTH = 16  # nesting of a request's JSON body (a script submission needs 2)
SECRET_BYTES = 32
PLAN_MAGIC = b"TGPLAN1\n"
PLAN_HEADER = len(PLAN_MAGIC) + hashlib.sha256().digest_size


class BadInput(ValueError):
    """A request's field is wrong: ``field`` names it (``outputs[2]``, ``name``, ``body``)."""

    def __init__(self, field: str, message: str):
        super().__init__(message)
        self.field = field


class PlanRejected(RuntimeError):
    """A plan file fails its check (missing MAC, wrong MAC, wrong size, not a file): it is
    not unpickled."""


# -- names and request bodies -----------------------------------------------------------------


def _surrogate(text: str) -> int:
    """The index of the first lone surrogate in ``text``, or -1."""
    try:
        text.encode("utf-8")
        return -1
    except UnicodeEncodeError as exc:
        return exc.start


def check_text(value: Any, field: str, *, nul: bool = True) -> str:
    """``value`` if it is a string that encodes as UTF-8 (no lone surrogate) and, unless
    ``nul``, holds no NUL character; else :class:`BadInput` naming ``field``."""
    if not isinstance(value, str):
        raise BadInput(field, f"{field!s} must be a string, got {type(value).__name__}")
    at = _surrogate(value)
    if at >= 0:
        raise BadInput(field, f"{field} holds a lone surrogate (U+{ord(value[at]):04X}) at "
                              f"index {at}: it is not valid UTF-8 text")
    if not nul and "\0" in value:
        raise BadInput(field, f"{field} holds a NUL character at index {value.index(chr(0))}")
    return value


def check_name(value: Any, field: str) -> str:
    """``value`` if it can be one file name: a non-empty string, not ``.`` or ``..``, of at
    most ``MAX_NAME_BYTES`` bytes of UTF-8, without NUL, control characters, lone surrogates
    or path separators; else :class:`BadInput` naming ``field`` and the problem.

    >>> check_name("run-1.py", "name")
    'run-1.py'
    >>> check_name("a/b", "name")
    Traceback (most recent call last):
    ...
    tilegraph.service.protect.BadInput: name 'a/b' holds a path separator ('/')
    """
    check_text(value, field)
    if not value:
        raise BadInput(field, f"{field} is empty")
    size = len(value.encode("utf-8"))
    if size > MAX_NAME_BYTES:
        raise BadInput(field, f"{field} is {size} bytes long in UTF-8; a name may have at "
                              f"most {MAX_NAME_BYTES}")
    bad = next((c for c in value if ord(c) < 0x20 or 0x7f <= ord(c) < 0xa0), None)
    if bad is not None:
        raise BadInput(field, f"{field} {value!r} holds a control character "
                              f"(U+{ord(bad):04X}) at index {value.index(bad)}")
    if "/" in value:
        raise BadInput(field, f"{field} {value!r} holds a path separator ('/')")
    if value in (".", ".."):
        raise BadInput(field, f"{field} {value!r} is not a file name")
    return value


SCRIPT_NAME = re.compile(r"[A-Za-z0-9_-][A-Za-z0-9_.-]*\.py")


def check_script_name(value: Any, field: str) -> str:
    """``value`` if it can name a script: a valid name (:func:`check_name`) of letters,
    digits, ``_``, ``-`` and ``.`` ending in ``.py``, not starting with a dot; else
    :class:`BadInput`."""
    check_name(value, field)
    if not SCRIPT_NAME.fullmatch(value):
        raise BadInput(field, f"{field} must be a file name ending in .py (letters, digits, "
                              f"'_', '-', '.', not starting with '.'), got {value!r}")
    return value


def check_relative_path(value: Any, field: str) -> str:
    """``value`` normalised, if it is a relative path that stays inside its directory
    (no ``..`` out of it, not absolute), of at most ``MAX_PATH_BYTES`` bytes, each
    component a valid name (:func:`check_name`); else :class:`BadInput`."""
    check_text(value, field)
    if not value:
        raise BadInput(field, f"{field} is empty")
    if value.startswith("/"):
        raise BadInput(field, f"{field} {value!r} must be a path inside the script's "
                              "directory, not an absolute path")
    norm = os.path.normpath(value)
    if norm == "." or norm == ".." or norm.startswith("../"):
        raise BadInput(field, f"{field} {value!r} must be a path inside the script's "
                              "directory")
    size = len(norm.encode("utf-8"))
    if size > MAX_PATH_BYTES:
        raise BadInput(field, f"{field} is {size} bytes long in UTF-8; a path may have at "
                              f"most {MAX_PATH_BYTES}")
    for part in norm.split("/"):
        check_name(part, field)
    return norm


def json_depth(value: Any, limit: int = MAX_JSON_DEPTH) -> int:
    """How deeply ``value`` (parsed JSON) nests lists and objects, counted without
    recursion and up to ``limit + 1`` at most."""
    deepest = 0
    stack = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, (list, dict)):
            deepest = max(deepest, depth)
            if deepest > limit:
                return deepest
            stack.extend((v, depth + 1) for v in (item.values() if isinstance(item, dict)
                                                  else item))
    return deepest


def loads_json(body: bytes, limit: int = MAX_JSON_DEPTH) -> Any:
    """The JSON value of a request's ``body`` (UTF-8), nested at most ``limit`` deep; else
    :class:`BadInput` (field ``body``) saying why. Python's parser stops by itself on a
    nesting of about a thousand (RecursionError), which is reported the same way."""
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise BadInput("body", f"the body is not UTF-8 text (byte {exc.start})") from None
    try:
        value = json.loads(text)
    except RecursionError:
        raise BadInput("body", f"the body's JSON nests more than {limit} levels deep"
                       ) from None
    except ValueError as exc:
        raise BadInput("body", f"the body is not valid JSON: {exc}") from None
    if json_depth(value, limit) > limit:
        raise BadInput("body", f"the body's JSON nests more than {limit} levels deep")
    return value


# -- what a job's process leaves behind -------------------------------------------------------


def mend(text: str) -> str:
    """``text`` with each lone surrogate replaced by U+FFFD, so that it encodes as UTF-8."""
    if _surrogate(text) < 0:
        return text
    return text.encode("utf-8", "surrogatepass").decode("utf-8", "replace")


def read_bounded(path: str, limit: int) -> bytes | None:
    """The bytes of the regular file at ``path`` if it has at most ``limit`` of them;
    ``None`` when it is missing, not a regular file, or larger (never follows a link)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        with os.fdopen(fd, "rb", closefd=False) as f:
            data = f.read(limit + 1)
        return data if len(data) <= limit else None
    finally:
        os.close(fd)


def read_json_object(path: str, limit: int) -> dict[str, Any] | None:
    """The JSON object in the file at ``path`` (at most ``limit`` bytes, nested at most
    ``MAX_JSON_DEPTH`` deep), or ``None`` when it is missing, too large or not one."""
    data = read_bounded(path, limit)
    if data is None:
        return None
    try:
        value = loads_json(data)
    except BadInput:
        return None
    return value if isinstance(value, dict) else None


# -- the data directory -----------------------------------------------------------------------


def _mode(st: os.stat_result) -> str:
    return f"{stat.S_IMODE(st.st_mode):04o}"


def private_data_dir(path: str) -> str:
    """Make ``path`` (absolute) the service's private data directory: created 0700 when
    missing; an existing one must be a directory owned by this user that no other user can
    write, and no parent of it may be writable by another user unless it has the sticky
    bit (else ValueError naming the directory and its mode); a directory other users may
    read or enter is made 0700. Returns the absolute path."""
    path = os.path.abspath(path)
    uid = os.geteuid()
    parent = os.path.dirname(path)
    while True:  # every parent: no other user may swap the data directory for theirs
        st = os.stat(parent)
        if st.st_uid not in (0, uid):
            raise ValueError(f"{parent}, a parent of the data directory {path}, belongs to "
                             f"uid {st.st_uid}: that user could replace the data "
                             "directory; choose another --data-dir")
        if st.st_mode & (stat.S_IWGRP | stat.S_IWOTH) and not st.st_mode & stat.S_ISVTX:
            raise ValueError(f"{parent}, a parent of the data directory {path}, is writable "
                             f"by other users (mode {_mode(st)}, no sticky bit): they could "
                             "replace the data directory; choose another --data-dir")
        if parent == os.path.dirname(parent):
            break
        parent = os.path.dirname(parent)
    try:
        os.mkdir(path, 0o700)
    except FileExistsError:
        pass
    st = os.lstat(path)
    if not stat.S_ISDIR(st.st_mode):
        raise ValueError(f"the data directory {path} is not a directory (a link or a file)")
    if st.st_uid != uid:
        raise ValueError(f"the data directory {path} belongs to uid {st.st_uid}, not to this "
                         f"user (uid {uid}): its owner could change the jobs' records and "
                         "plans; choose another --data-dir")
    if st.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        raise ValueError(f"the data directory {path} is writable by other users (mode "
                         f"{_mode(st)}): they could change the jobs' records and plans; "
                         f"make it private (chmod 700 {path}) or choose another --data-dir")
    if stat.S_IMODE(st.st_mode) & 0o077:
        os.chmod(path, 0o700)
    return path


# -- plans ------------------------------------------------------------------------------------


def new_secret() -> bytes:
    """A random secret of the service, drawn when it starts."""
    return secrets.token_bytes(SECRET_BYTES)


def _plan_mac(key: bytes, job_id: str, payload: bytes) -> bytes:
    msg = hmac.new(key, b"tilegraph plan\0" + job_id.encode() + b"\0"
                   + len(payload).to_bytes(8, "big"), hashlib.sha256)
    msg.update(payload)
    return msg.digest()


def seal_plan(key: bytes, job_id: str, payload: bytes) -> bytes:
    """The bytes of a plan file: a magic line, the MAC of ``payload`` for job ``job_id``
    under ``key``, and ``payload``."""
    return PLAN_MAGIC + _plan_mac(key, job_id, payload) + payload


def open_plan(path: str, key: bytes, job_id: str, size: int) -> bytes:
    """The payload of the plan file at ``path`` that the service sealed for ``job_id``
    (``size`` bytes of payload), or :class:`PlanRejected` naming the file: it is not a
    regular file, has another size, lacks the MAC or its MAC is wrong (constant-time
    comparison). Nothing is unpickled here."""
    path = os.path.abspath(path)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError as exc:
        raise PlanRejected(f"the plan file {path} cannot be opened ({exc.strerror}; a link "
                           "is refused): it is not run") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise PlanRejected(f"the plan file {path} is not a regular file: it is not run")
        if st.st_size != PLAN_HEADER + size:
            raise PlanRejected(f"the plan file {path} has {st.st_size} bytes, not the "
                               f"{PLAN_HEADER + size} the service wrote: it was changed "
                               "after it was submitted and is not unpickled")
        with os.fdopen(fd, "rb", closefd=False) as f:
            data = f.read(PLAN_HEADER + size + 1)
    finally:
        os.close(fd)
    if len(data) != PLAN_HEADER + size or not data.startswith(PLAN_MAGIC):
        raise PlanRejected(f"the plan file {path} does not carry the service's seal: it was "
                           "changed after it was submitted and is not unpickled")
    payload = data[PLAN_HEADER:]
    if not hmac.compare_digest(data[len(PLAN_MAGIC):PLAN_HEADER],
                               _plan_mac(key, job_id, payload)):
        raise PlanRejected(f"the plan file {path} fails its MAC check for job {job_id}: it "
                           "was changed after it was submitted and is not unpickled")
    return payload
