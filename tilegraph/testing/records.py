"""The records of an emulated cluster (:mod:`tilegraph.testing.cluster`): a :class:`Host`,
the bytes its interfaces moved (:class:`Traffic`), a process started on a host
(:class:`HostProcess`), and the services the bed's helpers start there
(:class:`DaskDeployment`, :class:`ValkeyServer`)."""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from typing import Any

from tilegraph.util import stop_processes


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
        stop_processes(self.workers)  # first: a worker whose scheduler is gone waits to reconnect
        stop_processes([self.scheduler])

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
        stop_processes([self.process])

    def __enter__(self) -> ValkeyServer:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
