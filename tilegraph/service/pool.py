"""Where the service's jobs run: a pool adapter with two implementations.

* :class:`ServerlessPool` (the default of ``tilegraph serve``): the serverless engine's pool
  (:class:`tilegraph.serverless.Pool`: an embedded Valkey, an object store and worker
  processes with an autoscaling provisioner, or an existing Redis and store given by URL).
  A job's process computes with ``TILEGRAPH_BACKEND=serverless`` and the pool's addresses,
  so its tasks run on the pool's workers.
* :class:`LocalPool` (``tilegraph serve --local``): every job's process computes with the
  threads backend on ``workers`` threads.

Both give the environment of a job's process (:meth:`env`) and describe the workers
(:meth:`workers`) as dicts with the keys ``id, pid, host, task, lease_expires, rss,
started``.
"""

from __future__ import annotations

import os
import socket
from typing import Any

WORKER_KEYS = ("id", "pid", "host", "task", "lease_expires", "rss", "started")


class PoolUnavailable(RuntimeError):
    """The pool that was asked for cannot be started here."""


class LocalPool:
    """Jobs compute with the threads backend of their own process, ``workers`` threads each
    (default: one per core)."""

    kind = "local"

    def __init__(self, workers: int | None = None):
        if workers is not None and (isinstance(workers, bool) or not isinstance(workers, int)
                                    or workers < 1):
            raise ValueError(f"workers must be a positive integer or None, got {workers!r}")
        self.nworkers = workers or os.cpu_count() or 1
        self.host = socket.gethostname()

    def env(self) -> dict[str, str]:
        """Environment variables of a job's process."""
        return {"TILEGRAPH_BACKEND": "threads"}

    def job_workers(self) -> int | None:
        """Threads a job's process computes on."""
        return self.nworkers

    def workers(self, running: list[Any]) -> list[dict[str, Any]]:
        """One worker per running job's process: its pid, memory, and the tasks its threads
        run now (``running``: the jobs that are running)."""
        import psutil

        out = []
        for job in running:
            pid = job.pid
            try:
                rss = psutil.Process(pid).memory_info().rss if pid else 0
            except psutil.Error:
                rss = 0
            tasks = sorted(job.current.values())
            out.append({"id": f"job-{job.id}", "pid": pid, "host": self.host,
                        "task": ", ".join(tasks) if tasks else None, "lease_expires": None,
                        "rss": rss, "started": job.started, "job": job.id,
                        "threads": self.nworkers})
        return out

    def describe(self) -> str:
        """The pool in words, for the dashboard."""
        return f"local threads backend, {self.nworkers} thread(s) per job"

    def close(self) -> None:
        """Nothing to stop: the threads live in the jobs' processes."""


class ServerlessPool:
    """The serverless engine's pool: ``workers`` worker processes (autoscaled), on the
    Valkey at ``redis`` and the object store at ``store``, or embedded ones when ``None``."""

    kind = "serverless"

    def __init__(self, workers: int | None = None, redis: str | None = None,
                 store: str | None = None, **options: Any):
        try:
            from tilegraph.serverless import Pool
        except ImportError as exc:
            raise PoolUnavailable(
                "the serverless engine is unavailable (tilegraph.serverless cannot be "
                f"imported: {exc}); start the service with --local to run jobs on the "
                "threads backend") from exc
        self.pool = Pool(workers=workers, redis=redis, store=store, **options)
        self.host = socket.gethostname()

    def env(self) -> dict[str, str]:
        """Environment variables of a job's process: compute on the pool (with the pool's
        credentials: its server's password and MAC secret)."""
        return {"TILEGRAPH_BACKEND": "serverless", "TILEGRAPH_REDIS": self.pool.redis_url,
                "TILEGRAPH_STORE": self.pool.store_url,
                "TILEGRAPH_NAMESPACE": self.pool.namespace, **self.pool.credentials.env()}

    def job_workers(self) -> int | None:
        """The pool decides how many workers run a job's tasks."""
        return None

    def workers(self, running: list[Any]) -> list[dict[str, Any]]:
        """The pool's workers, their current task, lease and memory (with whatever else
        the pool says of them, such as tasks done)."""
        return [{**{k: w.get(k) for k in WORKER_KEYS}, **w} for w in self.pool.workers()]

    def describe(self) -> str:
        """The pool in words, for the dashboard."""
        return f"serverless pool (redis {self.pool.redis_url}, store {self.pool.store_url})"

    def close(self) -> None:
        """Stop the pool (its workers, and the embedded Valkey and store if it started
        them)."""
        self.pool.close()


def make_pool(local: bool, workers: int | None = None, redis: str | None = None,
              store: str | None = None, **options: Any) -> LocalPool | ServerlessPool:
    """The pool of ``tilegraph serve``: threads with ``local``, else the serverless pool
    (``options``: its provisioner's, :class:`tilegraph.serverless.Pool`'s
    ``scaling_factor``, ``idle_timeout``, ``pipeline_width``, ``straggler_factor``; those
    left ``None`` keep their defaults)."""
    options = {k: v for k, v in options.items() if v is not None}
    if local:
        if redis is not None or store is not None or options:
            given = ["--redis"] * (redis is not None) + ["--store"] * (store is not None) + \
                [f"--{k.replace('_', '-')}" for k in options]
            raise ValueError(f"{', '.join(given)} choose the serverless pool; they do not "
                             "go with --local")
        return LocalPool(workers)
    return ServerlessPool(workers, redis, store, **options)
