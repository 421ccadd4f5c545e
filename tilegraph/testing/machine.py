"""What the emulated clusters of :mod:`tilegraph.testing.cluster` do to the machine, beside
making a bed: the set-up commands and the probes that say whether a bed can be made here
(:func:`unavailable`, :func:`netem_available`), the lock every bed takes while it is made or
removed, the processes found by their network namespace and killed, the removal of a bed
(:func:`remove_bed`) and of what a dead owner left (:func:`leftovers`, :func:`cleanup`), and
the beds still open (:data:`OPEN_BEDS`), which are closed at exit and on SIGTERM/SIGHUP."""

from __future__ import annotations

import atexit
import contextlib
import fcntl
import os
import re
import shlex
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tilegraph.testing.cluster import Cluster

RUN_ROOT = "/run/tilegraph-cluster"   # one directory per bed: namespace files, logs, agent
DATA_PREFIX = "tilegraph-cluster-"    # in the temp dir: a bed's shared and disk directories
PRIVATE_DIRS = ("/tmp", "/var/tmp", "/dev/shm")        # each host's own
KILL_GRACE = 2.0  # seconds between SIGTERM and SIGKILL at teardown

_NETNS_RE = re.compile(r"^tgc-(?P<pid>\d+)-(?P<k>\d+)-(?P<part>h\d+|sw|probe|netem)$")
_LINK_RE = re.compile(r"^tgc(?P<pid>\d+)k(?P<k>\d+)$")
_BED_RE = re.compile(r"^(?P<pid>\d+)-(?P<k>\d+)$")
_DATA_RE = re.compile(rf"^{DATA_PREFIX}(?P<pid>\d+)-(?P<k>\d+)$")
_TOOLS = ("ip", "tc", "nsenter", "unshare", "mount", "umount")

_lock = threading.RLock()
_lock_fd = -1
_lock_depth = 0
OPEN_BEDS: set[Cluster] = set()
"""The beds of this process not closed yet: closed at exit and on SIGTERM/SIGHUP."""
_handlers_installed = False
_netem: bool | None = None


class ClusterError(RuntimeError):
    """A step of making, using or removing an emulated cluster failed; the message names
    the step, the command and what it printed."""



def sh(argv: Sequence[str], what: str, *, input: str | None = None,
       timeout: float = 30.0) -> str:
    """Run a set-up command; its stdout, or a :class:`ClusterError` naming ``what``."""
    try:
        proc = subprocess.run(list(argv), capture_output=True, text=True, input=input,
                              timeout=timeout)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise ClusterError(f"{what}: {shlex.join(argv)} failed: {exc}") from exc
    if proc.returncode != 0:
        raise ClusterError(f"{what}: {shlex.join(argv)} exited with {proc.returncode}: "
                           f"{(proc.stderr or proc.stdout).strip()[-2000:]}")
    return proc.stdout


def _quiet(argv: Sequence[str]) -> bool:
    """Run a removal command, ignoring failure (the thing may be gone already)."""
    try:
        return subprocess.run(list(argv), capture_output=True, timeout=30).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


def unavailable() -> str | None:
    """Why no emulated cluster can be made on this machine (``None``: one can): not Linux,
    not root, a missing tool (``ip``, ``tc``: the Debian package iproute2; ``nsenter``,
    ``unshare``: util-linux), or namespaces that cannot be made."""
    if not sys.platform.startswith("linux"):
        return "emulated hosts need Linux network and mount namespaces"
    if os.geteuid() != 0:
        return "emulated hosts need root (network namespaces, veth links, mounts)"
    missing = [t for t in _TOOLS if shutil.which(t) is None]
    if missing:
        return (f"emulated hosts need {', '.join(missing)} (apt-get install iproute2 "
                "util-linux)")
    name = f"tgc-{os.getpid()}-0-probe"
    try:
        sh(["ip", "netns", "add", name], "probe")
    except ClusterError as exc:
        return f"network namespaces cannot be made here: {exc}"
    finally:
        _quiet(["ip", "netns", "del", name])
    return None


def netem_available() -> bool:
    """Whether this kernel can delay packets (the ``netem`` queueing discipline): a
    :class:`Cluster` with a ``latency`` needs it. Asked once per process, in a namespace
    made for the question."""
    global _netem
    if _netem is None:
        name = f"tgc-{os.getpid()}-0-netem"
        try:
            sh(["ip", "netns", "add", name], "probe")
            sh(["ip", "-n", name, "link", "set", "lo", "up"], "probe")
            _netem = _quiet(["ip", "netns", "exec", name, "tc", "qdisc", "add", "dev", "lo",
                             "root", "netem", "delay", "1ms"])
        except ClusterError:
            _netem = False
        finally:
            _quiet(["ip", "netns", "del", name])
    return _netem


@contextlib.contextmanager
def locked():
    """The lock every bed takes while it is made or removed (beds of several processes
    choose their subnets and names under it). Re-entrant in a thread: a signal handler
    that removes the beds may run while the bed being made holds it."""
    global _lock_fd, _lock_depth
    with _lock:
        if _lock_depth == 0:
            os.makedirs(RUN_ROOT, mode=0o700, exist_ok=True)
            fd = os.open(os.path.join(RUN_ROOT, ".lock"), os.O_RDWR | os.O_CREAT, 0o600)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX)
            except BaseException:
                os.close(fd)
                raise
            _lock_fd = fd
        _lock_depth += 1
        try:
            yield
        finally:
            _lock_depth -= 1
            if _lock_depth == 0:
                os.close(_lock_fd)


def process_start(pid: int) -> str | None:
    """When process ``pid`` started (field 22 of ``/proc/<pid>/stat``, in clock ticks since
    boot; ``None`` when it does not run): with its id, it tells a process apart from a later
    one given the same id."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return f.read().rsplit(b")", 1)[1].split()[19].decode()
    except (OSError, IndexError):
        return None


def _owner_alive(pid: int, k: int) -> bool:
    """Whether the process that made bed ``<pid>-<k>`` still runs (its recorded start time
    tells a later process given the same id apart)."""
    if pid == os.getpid():  # k = 0: a probe of this process (unavailable, netem_available)
        return k == 0 or any(c.tag == f"{pid}-{k}" and not c.closed for c in list(OPEN_BEDS))
    start = process_start(pid)
    if start is None:
        return False
    try:
        with open(os.path.join(RUN_ROOT, f"{pid}-{k}", "owner")) as f:
            recorded = f.read().split()
    except OSError:
        return True  # no record: the id alone says it runs
    return len(recorded) < 2 or recorded[1] == start


def _ns_id(path: str) -> tuple[int, int] | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_dev, st.st_ino


def pids_in(netns_paths: Iterable[str]) -> list[int]:
    """The processes whose network namespace is one of ``netns_paths``."""
    wanted = {i for i in (_ns_id(p) for p in netns_paths) if i is not None}
    if not wanted:
        return []
    me = os.getpid()
    out = []
    for name in os.listdir("/proc"):
        if not name.isdigit() or int(name) == me:
            continue
        if _ns_id(f"/proc/{name}/ns/net") in wanted:
            out.append(int(name))
    return out


def kill_in(netns_paths: Sequence[str], grace: float = KILL_GRACE) -> None:
    """SIGTERM every process in these network namespaces, SIGKILL what is left after
    ``grace`` seconds, and wait until none is left (or 10 s)."""
    pids = pids_in(netns_paths)
    for sig, wait in ((signal.SIGTERM, grace), (signal.SIGKILL, 10.0)):
        for pid in pids:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, sig)
        deadline = time.monotonic() + wait
        while pids and time.monotonic() < deadline:
            time.sleep(0.02)
            reap()
            pids = pids_in(netns_paths)
        if not pids:
            return


def reap() -> None:
    """Collect the exit status of this process's children that died (the processes a bed
    started), so that they do not linger as zombies."""
    for c in list(OPEN_BEDS):
        for p in c.processes:
            p.poll()


def _umount(path: str) -> None:
    if os.path.ismount(path) or _mounted(path):
        _quiet(["umount", "-l", path])


def _mounted(path: str) -> bool:
    """Whether ``path`` is a mount point of this mount namespace (a bind of a file too)."""
    try:
        with open("/proc/self/mountinfo") as f:
            return any(line.split()[4] == path for line in f)
    except (OSError, IndexError):
        return False


def remove_bed(pid: int, k: int) -> list[str]:
    """Remove every part of bed ``<pid>-<k>`` that exists: its hosts' processes, namespace
    files, namespaces, outside link, directories. Returns what was removed."""
    removed = []
    prefix = f"tgc-{pid}-{k}-"
    try:
        netns = sorted(n for n in os.listdir("/run/netns") if n.startswith(prefix))
    except OSError:
        netns = []
    paths = [f"/run/netns/{n}" for n in netns]
    kill_in(paths)
    bed = os.path.join(RUN_ROOT, f"{pid}-{k}")
    if os.path.isdir(bed):
        for name in sorted(os.listdir(bed)):
            path = os.path.join(bed, name)
            if name.endswith((".mnt", ".uts")) or name.startswith("stage-"):
                _umount(path)
    for n in netns:
        if _quiet(["ip", "netns", "del", n]):
            removed.append(f"network namespace {n}")
    link = f"tgc{pid}k{k}"
    if os.path.exists(f"/sys/class/net/{link}") and _quiet(["ip", "link", "del", link]):
        removed.append(f"link {link}")
    if os.path.isdir(bed):
        _umount(bed)
        shutil.rmtree(bed, ignore_errors=True)
        removed.append(f"directory {bed}")
    data = os.path.join(tempfile.gettempdir(), f"{DATA_PREFIX}{pid}-{k}")
    if _own_directory(data):  # (nothing is mounted on it here: only in the hosts)
        shutil.rmtree(data, ignore_errors=True)
        removed.append(f"directory {data}")
    return removed


def _own_directory(path: str) -> bool:
    """Whether ``path`` is a directory of this user, not a link: a name in the shared temp
    dir that someone else made (a link to ``/``, a directory of theirs) is never the bed's
    and is left alone."""
    try:
        st = os.lstat(path)
    except OSError:
        return False
    return stat.S_ISDIR(st.st_mode) and st.st_uid == os.geteuid()


def leftovers() -> dict[tuple[int, int], list[str]]:
    """The parts of beds that exist on this machine, by bed (``(owner pid, k)``): network
    namespaces, outside links, bed directories, data directories."""
    found: dict[tuple[int, int], list[str]] = {}

    def add(m: re.Match | None, what: str) -> None:
        if m is not None:
            found.setdefault((int(m["pid"]), int(m["k"])), []).append(what)

    with contextlib.suppress(OSError):
        for n in os.listdir("/run/netns"):
            add(_NETNS_RE.match(n), f"network namespace {n}")
    with contextlib.suppress(OSError):
        for n in os.listdir("/sys/class/net"):
            add(_LINK_RE.match(n), f"link {n}")
    with contextlib.suppress(OSError):
        for n in os.listdir(RUN_ROOT):
            add(_BED_RE.match(n), f"directory {os.path.join(RUN_ROOT, n)}")
    with contextlib.suppress(OSError):
        tmp = tempfile.gettempdir()
        for n in os.listdir(tmp):
            if _own_directory(os.path.join(tmp, n)):
                add(_DATA_RE.match(n), f"directory {os.path.join(tmp, n)}")
    return found


def cleanup(*, dry_run: bool = False) -> list[str]:
    """Remove what beds whose owner process died (SIGKILL, a crash) left on this machine:
    the processes on their hosts, their namespaces, links, mounts and directories. A bed of
    a live process is never touched. Returns what was removed (with ``dry_run``: what would
    be)."""
    done = []
    with locked():
        for (pid, k), parts in sorted(leftovers().items()):
            if _owner_alive(pid, k):
                continue
            if dry_run:
                done.extend(parts)
            else:
                done.extend(remove_bed(pid, k))
    return done


def _close_all() -> None:
    for c in list(OPEN_BEDS):
        with contextlib.suppress(Exception):
            c.close()


def _on_signal(signum: int, frame: Any) -> None:
    """SIGTERM/SIGHUP: remove every open bed, then die of the signal as before."""
    _close_all()
    signal.signal(signum, signal.SIG_DFL)
    os.kill(os.getpid(), signum)


_saved_handlers: dict[int, Any] = {}  # what SIGTERM/SIGHUP did before a bed was open


def install_handlers() -> None:
    """While a bed is open: remove the beds at exit and on SIGTERM/SIGHUP (only where the
    process left those signals at their default, and only from the main thread)."""
    global _handlers_installed
    if not _handlers_installed:
        _handlers_installed = True
        atexit.register(_close_all)
    if OPEN_BEDS or threading.current_thread() is not threading.main_thread():
        return
    for sig in (signal.SIGTERM, signal.SIGHUP):
        if signal.getsignal(sig) is signal.SIG_DFL:
            _saved_handlers[sig] = signal.SIG_DFL
            signal.signal(sig, _on_signal)


def restore_handlers() -> None:
    """The last open bed is closed: SIGTERM/SIGHUP go back to what they were."""
    if OPEN_BEDS or threading.current_thread() is not threading.main_thread():
        return
    for sig, before in list(_saved_handlers.items()):
        if signal.getsignal(sig) is _on_signal:
            signal.signal(sig, before)
        del _saved_handlers[sig]


def die_with_bed() -> None:
    """In a host's process before it starts: SIGKILL when the process that made the bed
    dies (Linux's ``PR_SET_PDEATHSIG``)."""
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(1, int(signal.SIGKILL))
    except (OSError, AttributeError):
        pass
