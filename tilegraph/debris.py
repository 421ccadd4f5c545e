"""Names that say which process owns a temporary file or directory, and the removal of what
a dead process left behind.

Spill directories (``tilegraph-spill-<host>-<pid>-<random>``), a serverless run's object
store and embedded Valkey server directory (``tilegraph-store-...``, ``tilegraph-valkey-...``,
named the same way) and the hidden temporary
results of writers (``.<name>.tmp-<host>-<pid>-<uuid hex>[suffix]``, and
``.<name>.old-<host>-<pid>-<uuid hex>``, a replaced result waiting to be deleted) carry the
host and process id of the process that made them. A process that is killed (SIGKILL, a
segfault, ``os._exit``) cannot remove them; :func:`remove_debris` removes those whose owner
runs on this host and is no longer alive, and never those of a live process or of another
host. A hidden old result whose destination is missing (a replacement interrupted between
its two renames) is renamed back to its destination instead of deleted.

Every new run removes the spill directories of dead processes next to its own, every
writer cleans the directory it writes to, and ``tilegraph clean [DIR...]`` does both for
any directory.

A live process records the spill and staging directories it made (:func:`own`), so that a
run stopped by a signal removes them before the process ends (:func:`remove_own`, see
:mod:`tilegraph.runtime.signals`). Under ``tilegraph run``, each rank also tells the
launcher the directories it makes them in (:func:`note_spill_parent`, a line in the file
named by ``TILEGRAPH_SPILL_PARENTS``), so that after a run that did not end cleanly the
launcher removes what every rank left there, even a rank killed by SIGKILL.
"""

from __future__ import annotations

import os
import re
import shutil
import socket
import tempfile
import threading
from dataclasses import dataclass

SPILL_PREFIX = "tilegraph-spill-"
STORE_PREFIX = "tilegraph-store-"  # a serverless run's object store of blocks
VALKEY_PREFIX = "tilegraph-valkey-"  # an embedded Valkey server's directory
_HOST = re.sub(r"[^A-Za-z0-9_]", "_", socket.gethostname())[:64] or "host"

_SPILL_RE = re.compile(
    r"^tilegraph-(?P<what>spill|store|valkey)-(?P<host>\w+)-(?P<pid>\d+)-[^-]+$")
_TEMP_RE = re.compile(
    r"^\.(?P<base>.+)\.(?P<kind>tmp|old)-(?P<host>\w+)-(?P<pid>\d+)-[0-9a-f]{32}(?P<suffix>.*)$")


def owner_tag() -> str:
    """``<host>-<pid>`` of this process, for the names of its temporary files."""
    return f"{_HOST}-{os.getpid()}"


def pid_alive(pid: int) -> bool:
    """Whether a process with this id runs on this host (a process of another user counts;
    a zombie, dead and waiting for its parent to collect its status, does not)."""
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            state = f.read().rsplit(b")", 1)[1].split()[0]
    except (OSError, IndexError):  # no /proc (not Linux) or gone meanwhile
        return True
    return state != b"Z"


def host_id() -> str:
    """This host as a process id's scope: ``<host name>/<boot id>/<pid namespace>`` (the
    parts Linux gives): two processes with the same id here are the same process only if
    this string is the same for both (a container with the same host name but its own
    process ids, or the same machine after a reboot, is another scope)."""
    global _host_id
    if _host_id is None:
        parts = [_HOST]
        try:
            with open("/proc/sys/kernel/random/boot_id") as f:
                parts.append(f.read().strip()[:8])
            parts.append(os.readlink("/proc/self/ns/pid").strip("pid:[]"))
        except OSError:
            pass
        _host_id = "/".join(parts)
    return _host_id


_host_id: str | None = None


def process_start(pid: int) -> str | None:
    """When process ``pid`` of this host started, as a string that is the same at every
    call for the same process and differs for a later process given the same id (the
    clock ticks since boot from ``/proc``); ``None`` if it is not running or not known."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return f.read().rsplit(b")", 1)[1].split()[19].decode()
    except (OSError, IndexError):
        pass
    try:
        import psutil

        return f"{psutil.Process(pid).create_time():.2f}"
    except Exception:
        return None


@dataclass(frozen=True)
class Debris:
    """A temporary file or directory left by a dead process: ``path``, what it is (``kind``:
    ``"spill"``, ``"store"``, ``"valkey"``, ``"tmp"`` or ``"old"``), its owner ``pid``, and
    ``restore``: the destination an interrupted replacement is renamed back to (``None``:
    the entry is deleted)."""

    path: str
    kind: str
    pid: int
    restore: str | None = None


def _owner(name: str) -> tuple[str, str, int, re.Match | None] | None:
    m = _SPILL_RE.match(name)
    if m:
        return m["what"], m["host"], int(m["pid"]), None
    m = _TEMP_RE.match(name)
    if m:
        return m["kind"], m["host"], int(m["pid"]), m
    return None


def find_debris(directory: str) -> list[Debris]:
    """The entries of ``directory`` (not below it) left by dead processes of this host."""
    try:
        names = sorted(os.listdir(directory))
    except (FileNotFoundError, NotADirectoryError, PermissionError):
        return []
    out = []
    for name in names:
        owner = _owner(name)
        if owner is None:
            continue
        kind, host, pid, m = owner
        if host != _HOST or pid == os.getpid() or pid_alive(pid):
            continue
        path = os.path.join(directory, name)
        restore = None
        if kind == "old" and m is not None:
            dest = os.path.join(directory, m["base"])
            if not os.path.lexists(dest):
                restore = dest
        out.append(Debris(path, kind, pid, restore))
    return out


def remove_debris(directory: str) -> list[Debris]:
    """Remove (or restore, see the module docstring) what dead processes of this host left
    in ``directory``; returns what was done. Entries removed meanwhile by another process are
    skipped."""
    done = []
    for item in find_debris(directory):
        try:
            if item.restore is not None:
                os.rename(item.path, item.restore)
            elif os.path.isdir(item.path) and not os.path.islink(item.path):
                shutil.rmtree(item.path)
            else:
                os.remove(item.path)
        except FileNotFoundError:
            continue
        except OSError:
            continue  # e.g. the destination reappeared, or no permission: leave it
        done.append(item)
    return done


def restore_interrupted(path: str) -> bool:
    """If ``path`` is missing because a replacement of it was interrupted between its two
    renames (by a process that is now dead), put the old result back; True if it did."""
    path = os.path.abspath(path)
    if os.path.lexists(path):
        return False
    parent, base = os.path.split(path)
    prefix = f".{base}.old-"
    try:
        names = [n for n in os.listdir(parent) if n.startswith(prefix)]
    except (FileNotFoundError, NotADirectoryError, PermissionError):
        return False
    for item in find_debris(parent):
        if item.restore == path and os.path.basename(item.path) in names:
            try:
                os.rename(item.path, path)
            except OSError:
                return False
            return True
    return False


def entry_bytes(path: str) -> int:
    """Bytes of a file, or of every file below a directory."""
    if os.path.isdir(path) and not os.path.islink(path):
        total = 0
        for root, _dirs, files in os.walk(path):
            for name in files:
                try:
                    total += os.lstat(os.path.join(root, name)).st_size
                except OSError:
                    pass
        return total
    try:
        return os.lstat(path).st_size
    except OSError:
        return 0


_cleaned: set[str] = set()  # directories already cleaned of dead processes' entries
_cleaned_lock = threading.Lock()
SPILL_PARENTS_ENV = "TILEGRAPH_SPILL_PARENTS"  # set by `tilegraph run` for its ranks


def remove_dead_spills(parent: str | None) -> None:
    """Once per process and directory: remove what dead processes of this host left in the
    spill directory ``parent`` (the temp dir when ``None``): spill directories and a
    rechunk's intermediate stores alike; and tell ``tilegraph run``, when it launched this
    process, that this directory is used (:func:`note_spill_parent`)."""
    parent = os.path.abspath(parent or tempfile.gettempdir())
    with _cleaned_lock:
        if parent in _cleaned:
            return
        _cleaned.add(parent)
    note_spill_parent(parent)
    remove_debris(parent)


def note_spill_parent(parent: str) -> None:
    """Append ``parent`` to the file named by ``TILEGRAPH_SPILL_PARENTS`` (one line per
    directory; nothing when it is not set, or cannot be written)."""
    record = os.environ.get(SPILL_PARENTS_ENV)
    if not record or "\n" in parent:
        return
    try:
        fd = os.open(record, os.O_WRONLY | os.O_APPEND)  # made by the launcher, never here
    except OSError:
        return
    try:
        os.write(fd, (parent + "\n").encode())
    except OSError:
        pass
    finally:
        os.close(fd)


def noted_spill_parents(record: str) -> list[str]:
    """The directories listed in the file ``record`` (by :func:`note_spill_parent`): each
    once, absolute paths of existing directories only."""
    try:
        with open(record, encoding="utf-8", errors="replace") as f:
            lines = f.read().splitlines()
    except OSError:
        return []
    return [p for p in dict.fromkeys(lines) if os.path.isabs(p) and os.path.isdir(p)]


_own: dict[str, None] = {}  # spill and staging directories this live process made
_own_lock = threading.Lock()


def own(path: str) -> None:
    """Record a directory this process made (removed by :func:`remove_own`)."""
    with _own_lock:
        _own[path] = None


def disown(path: str) -> None:
    """Forget a directory recorded by :func:`own` (it was removed)."""
    with _own_lock:
        _own.pop(path, None)


def remove_own() -> list[str]:
    """Remove every directory this process recorded with :func:`own` and is still there
    (its spill and staging directories, with their files): what a run stopped by a signal
    does before the process ends. Returns the directories removed."""
    with _own_lock:
        paths = list(_own)
        _own.clear()
    done = []
    for path in paths:
        if os.path.isdir(path) and not os.path.islink(path):
            shutil.rmtree(path, ignore_errors=True)
            done.append(path)
    return done
