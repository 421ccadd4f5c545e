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

The bed's parts live by job: :mod:`~tilegraph.testing.machine` (the set-up commands, the
probes, the processes of a namespace, the removal of a bed and :func:`cleanup`, the open beds
closed at exit), :mod:`~tilegraph.testing.making` (the link parameters and the steps that make
a bed), :mod:`~tilegraph.testing.records` (:class:`Host`, :class:`Traffic`, the processes and
services started) and :mod:`~tilegraph.testing.services` (the helpers that start dask, MPI,
Valkey and serverless workers); every name is importable from here.

Known limits: the hosts share the machine's cores, memory and process ids (a process on
one host can see, and signal, those of another; the bed never confuses them, as it finds a
host's processes by their network namespace).
"""

from __future__ import annotations

import contextlib
import json
import os
import shlex
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Mapping, Sequence
from typing import Any

from tilegraph.testing.machine import (  # noqa: F401 - re-exported
    DATA_PREFIX,
    KILL_GRACE,
    OPEN_BEDS,
    PRIVATE_DIRS,
    RUN_ROOT,
    ClusterError,
    cleanup,
    die_with_bed,
    install_handlers,
    leftovers,
    locked,
    netem_available,
    pids_in,
    reap,
    remove_bed,
    restore_handlers,
    sh,
    unavailable,
)
from tilegraph.testing.making import (  # noqa: F401 - re-exported
    SUBNET_POOL,
    choose_subnet,
    cut_mark,
    make_dirs,
    make_mounts,
    make_network,
    parse_bandwidth,
    parse_latency,
    write_agent,
)
from tilegraph.testing.records import (  # noqa: F401 - re-exported
    DaskDeployment,
    Host,
    HostProcess,
    Traffic,
    ValkeyServer,
)
from tilegraph.testing.services import (  # noqa: F401 - re-exported
    READY_TIMEOUT,
    ServiceHelpers,
)

_counter = 0
_counter_lock = threading.Lock()


class Cluster(ServiceHelpers):
    """``hosts`` emulated hosts on this machine (see the module docstring). ``latency``:
    one-way delay between two hosts (seconds or ``"0.2ms"``; needs netem); ``bandwidth``:
    each direction of each host's link (bits per second or ``"1gbit"``); ``shared``: a
    directory every host sees (``True``: one made for the bed, at ``c.shared``; a path: that
    directory, left in place at close); ``tmp``: what the hosts' private directories are
    (``"tmpfs"``, in memory, of at most ``tmp_size`` each when given, or ``"disk"``: a
    directory per host in the machine's temp dir); ``subnet``: an IPv4 network for the
    addresses (default a free /24 of 10.231.0.0/16); ``outside``: whether this machine gets
    a link to the switch (needed to reach the hosts from here, e.g. a dask client or
    ``mpiexec``). ``processes``: the processes started on the hosts (and ``mpiexec``), which
    :meth:`close` kills. The helpers that start services are :class:`ServiceHelpers`'."""

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
        self.processes: list[HostProcess] = []
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
        install_handlers()
        self.closed = False
        OPEN_BEDS.add(self)
        try:
            with locked():
                self.subnet = choose_subnet(subnet, hosts)
                addrs = list(self.subnet.hosts())
                self.outside_address = str(addrs[-1])
                self.hosts = [Host(i, f"host{i}", str(addrs[i]), f"tgc-{self.tag}-h{i}",
                                   os.path.join(self.dir, f"h{i}.mnt"),
                                   os.path.join(self.dir, f"h{i}.uts"))
                              for i in range(hosts)]
                make_dirs(self, self._own_shared)
                make_network(self)
                for h in self.hosts:
                    make_mounts(self, h, self._tmp_size)
            self.agent = write_agent(self)
        except BaseException:
            self.close()
            raise

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
            proc = HostProcess([*prefix, *argv], env=self.env(env), preexec_fn=die_with_bed,
                               **popen)
        finally:
            if logf is not None:
                logf.close()
        proc.host = self.host(host).index
        proc.log = None if log is None else os.path.join(self.dir, "logs", log)
        self.processes.append(proc)
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
                self.processes.remove(proc)
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
        return pids_in([self.host(host).netns_path])

    # ------------------------------------------------------------------ losing a host

    def cut(self, host: int | Host) -> None:
        """Pull ``host``'s cable at the switch: its port goes down, so nothing it sends
        arrives and nothing sent to it arrives; no connection is reset (no RST leaves a
        host whose link is down), as when a machine loses power or its network. Its
        processes keep running until :meth:`kill`. :meth:`reconnect` plugs it back."""
        h = self.host(host)
        open(cut_mark(self.dir, h), "w").close()  # (the launch agent's sign, see write_agent)
        sh(["ip", "-n", self.switch, "link", "set", f"h{h.index}", "down"],
           f"cutting {h.name}'s link")

    def reconnect(self, host: int | Host) -> None:
        """Plug ``host``'s cable back in after :meth:`cut`."""
        h = self.host(host)
        sh(["ip", "-n", self.switch, "link", "set", f"h{h.index}", "up"],
           f"reconnecting {h.name}")
        with contextlib.suppress(FileNotFoundError):
            os.remove(cut_mark(self.dir, h))

    def connected(self, host: int | Host) -> bool:
        """Whether ``host``'s port on the switch is up (not :meth:`cut`)."""
        h = self.host(host)
        out = sh(["ip", "-j", "-n", self.switch, "link", "show", f"h{h.index}"],
                 f"reading {h.name}'s link")
        return "UP" in (json.loads(out or "[{}]")[0].get("flags") or [])

    def kill(self, host: int | Host, sig: int = signal.SIGKILL) -> list[int]:
        """Send ``sig`` (default SIGKILL: no process can clean up) to every process on
        ``host``, found by its network namespace, and wait (at most 10 s) until they are
        gone; returns their ids. Their kernel is still there: a peer connected to one of
        them sees the connection reset, unless the host was :meth:`cut` first (see
        :meth:`lose`)."""
        h = self.host(host)
        pids = pids_in([h.netns_path])
        for pid in pids:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, sig)
        if sig in (signal.SIGKILL, signal.SIGTERM):
            deadline = time.monotonic() + 10.0
            while pids_in([h.netns_path]) and time.monotonic() < deadline:
                time.sleep(0.02)
                reap()
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
            out = sh([*self.enter(h, "/"), "cat", "/sys/class/net/eth0/statistics/rx_bytes",
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
            with locked():
                remove_bed(self.pid, self.k)
        finally:
            for p in self.processes:
                if p.poll() is None:
                    with contextlib.suppress(ProcessLookupError):
                        p.kill()
                with contextlib.suppress(Exception):
                    p.wait(5)
            self.processes.clear()
            OPEN_BEDS.discard(self)
            restore_handlers()
