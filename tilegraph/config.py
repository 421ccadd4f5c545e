"""Execution options: defaults, validation, and scoped overrides.

Every option can be given per call (``tilegraph.get(dsk, keys, workers=2)``) or set for a
block of code::

    with tilegraph.config.set(backend="sync"):
        ...

``config.set`` is scoped to the thread (and the ``contextvars`` context) that enters it:
blocks entered at the same time in two threads each see their own settings, and leaving one
never changes what another thread sees. A thread started inside a block starts from the
defaults (pass options per call, or enter ``config.set`` in that thread).

=============  ========================  ====================================================
option         default                   meaning
=============  ========================  ====================================================
``backend``    ``"threads"``             where tasks run: ``"threads"``, ``"sync"``, ``"mpi"``,
                                         ``"serverless"`` or ``"dask"`` (a dask.distributed
                                         cluster), or a ``Backend`` object
                                         (the environment variable ``TILEGRAPH_BACKEND``,
                                         set by ``tilegraph run``, changes the default)
``workers``    ``None`` (= cores)        worker threads of the threads backend (with MPI:
                                         threads per rank, default cores / ranks per host)
``retries``    ``0``                     extra attempts for a task that raised an exception
``progress``   ``"auto"``                progress bar: ``True``, ``False``, or ``"auto"`` (on a
                                         terminal, for runs longer than a second)
``callbacks``  ``()``                    event subscribers for this run (see ``runtime.events``)
``memory_limit`` ``None`` (3/4 of RAM)   bytes of results a worker process may hold at once
                                         (an int or a string such as ``"2GB"``); colder
                                         results spill to disk beyond it. All threads of
                                         the threads backend share it; with several
                                         workers it can be exceeded by about one task's
                                         result. The default is divided among the MPI
                                         ranks on one host
``spill``      ``True``                  whether results may go to disk beyond the limit;
                                         with ``False`` a plan whose projected peak (what
                                         must stay in memory, blocks that can be made
                                         again left out) exceeds ``memory_limit`` is
                                         refused before it runs, naming the task at the
                                         peak, and nothing is spilled
``spill_dir``  ``None`` (the temp dir)   where spilled results are written
``placement``  ``"cyclic"``              initial placement of input blocks on MPI ranks:
                                         ``"cyclic"`` (2-D block-cyclic) or ``"locality"``
``report``     ``None``                  path of an HTML report written after the run (task
                                         stream, memory over time, plan summary)
``max_tasks``  ``50_000_000``            the largest plan (tasks before fusion) that is built;
                                         a larger one is refused with an error naming its
                                         task count, before it is built
``mpi_timeout`` ``60`` (seconds)         how long an MPI rank waits for the others to join
                                         a ``compute()`` before failing with an error that
                                         names the ranks that did not call it
``client``     ``None``                  with ``backend="dask"``: the ``distributed.Client``
                                         or scheduler address of the cluster to run on
                                         (``None``: the current client)
``mpi_broadcast_limit`` ``"1MiB"``       with MPI, results of at most this many bytes (all
                                         outputs of a call together) are returned on every
                                         rank; larger ones on rank 0 only (``None`` on the
                                         others). ``0``: rank 0 only, always
``pool``       ``None``                  serverless: the :class:`tilegraph.runtime.serverless.Pool`
                                         to run on (``None``: ``redis``, else a pool of
                                         ``workers`` processes started for the run)
``redis``      ``None``                  serverless: URL of a Redis/Valkey server whose
                                         workers run the tasks (``TILEGRAPH_REDIS``)
``store``      ``None``                  serverless: object store of the blocks, a directory
                                         or an fsspec URL (``TILEGRAPH_STORE``; default a
                                         temporary directory)
``lease``      ``30`` (seconds)          serverless: lease of the workers a run starts
=============  ========================  ====================================================
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from types import MappingProxyType
from typing import Any

_defaults: dict[str, Any] = {
    "backend": None,  # None: $TILEGRAPH_BACKEND, else "threads"
    "workers": None,
    "retries": 0,
    "progress": "auto",
    "callbacks": (),
    "memory_limit": None,
    "spill_dir": None,
    "spill": True,
    "placement": "cyclic",
    "report": None,
    "max_tasks": 50_000_000,
    "mpi_timeout": 60.0,
    "mpi_broadcast_limit": 1 << 20,
    "client": None,
    "pool": None,
    "redis": None,  # None: $TILEGRAPH_REDIS
    "store": None,  # None: $TILEGRAPH_STORE
    "lease": 30.0,
}
# the options set by the ``config.set`` blocks this context is inside (innermost wins)
_overrides: ContextVar[Mapping[str, Any]] = ContextVar("tilegraph_config",
                                                       default=MappingProxyType({}))


def _check_backend(value: Any) -> Any:
    from tilegraph.runtime.backends import BACKENDS, Backend

    if isinstance(value, Backend):
        return value  # a backend object made by a front end (e.g. autopar's processes)
    if not isinstance(value, str) or value not in BACKENDS:
        raise ValueError(
            f"unknown backend {value!r}; choose one of: {', '.join(sorted(BACKENDS))}"
        )
    return value


def _check_workers(value: Any) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"workers must be a positive integer or None, got {value!r}")
    return value


def _check_retries(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"retries must be a non-negative integer, got {value!r}")
    return value


def _check_progress(value: Any) -> bool | str:
    if value not in (True, False, "auto"):
        raise ValueError(f"progress must be True, False or 'auto', got {value!r}")
    return value


def _check_callbacks(value: Any) -> tuple[Callable, ...]:
    if callable(value):
        value = (value,)
    try:
        fns = tuple(value)
    except TypeError:
        raise TypeError(
            f"callbacks must be a callable or a list of callables, got {type(value).__name__}"
        ) from None
    for fn in fns:
        if not callable(fn):
            raise TypeError(f"callbacks must be callables, got {fn!r}")
    return fns


def _check_memory_limit(value: Any) -> int | None:
    if value is None:
        return None
    from tilegraph.runtime.memory import parse_bytes

    return parse_bytes(value)


def _check_spill(value: Any) -> bool:
    if not isinstance(value, bool):
        raise ValueError(f"spill must be True or False, got {value!r}")
    return value


def _check_spill_dir(value: Any) -> str | None:
    import os

    if value is None:
        return None
    path = os.fspath(value)
    if not os.path.isdir(path):
        raise ValueError(f"spill_dir {path!r} is not an existing directory")
    return path


def _check_placement(value: Any) -> str:
    from tilegraph.plan.place import INITIAL_PLACEMENTS

    if value not in INITIAL_PLACEMENTS:
        raise ValueError(f"placement must be one of {', '.join(INITIAL_PLACEMENTS)}, "
                         f"got {value!r}")
    return value


def _check_report(value: Any) -> str | None:
    import os

    if value is None:
        return None
    try:
        path = os.fspath(value)
    except TypeError:
        raise TypeError(f"report must be a file path or None, got {type(value).__name__}"
                        ) from None
    parent = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(parent):
        raise ValueError(f"report {path!r}: directory {parent!r} does not exist")
    return path


def _check_max_tasks(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"max_tasks must be a positive integer, got {value!r}")
    return value


def _check_mpi_timeout(value: Any) -> float:
    import math

    if isinstance(value, bool) or not isinstance(value, (int, float)) or not (
            value > 0 and math.isfinite(value)):
        raise ValueError(f"mpi_timeout must be a positive number of seconds, got {value!r}")
    return float(value)


def _check_mpi_broadcast_limit(value: Any) -> int:
    from tilegraph.util import parse_bytes

    if value == 0 and not isinstance(value, bool):
        return 0
    try:
        return parse_bytes(value)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"mpi_broadcast_limit must be 0 or a positive number of bytes (an "
                         f"int or a string such as '1MiB'), got {value!r}") from exc


def _check_pool(value: Any) -> Any:
    if value is None:
        return None
    from tilegraph.runtime.serverless.pool import Pool

    if not isinstance(value, Pool):
        raise TypeError(f"pool must be a tilegraph.runtime.serverless.Pool or None, got "
                        f"{type(value).__name__}")
    return value


def _check_redis(value: Any) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str) or not value.startswith(("redis://", "rediss://", "unix://",
                                                             "valkey://")):
        raise ValueError(f"redis must be a URL such as 'redis://host:6379/0', got {value!r}")
    return value


def _check_store(value: Any) -> str | None:
    import os

    if value is None:
        return None
    try:
        path = os.fspath(value)
    except TypeError:
        raise TypeError(f"store must be a directory path or an fsspec URL, got "
                        f"{type(value).__name__}") from None
    if not path:
        raise ValueError("store must be a directory path or an fsspec URL, got ''")
    return path


def _check_lease(value: Any) -> float:
    import math

    if isinstance(value, bool) or not isinstance(value, (int, float)) or not (
            value > 0 and math.isfinite(value)):
        raise ValueError(f"lease must be a positive number of seconds, got {value!r}")
    return float(value)


def _default_backend() -> str:
    import os

    return _check_backend(os.environ.get("TILEGRAPH_BACKEND") or "threads")


def _check_client(value: Any) -> Any:
    if value is None or isinstance(value, str) or (
            hasattr(value, "submit") and hasattr(value, "scheduler_info")):
        return value
    raise TypeError(f"client must be a distributed.Client or a scheduler address such as "
                    f"'tcp://127.0.0.1:8786', got {type(value).__name__}")


_checks: dict[str, Callable[[Any], Any]] = {
    "placement": _check_placement,
    "report": _check_report,
    "memory_limit": _check_memory_limit,
    "spill_dir": _check_spill_dir,
    "spill": _check_spill,
    "backend": _check_backend,
    "workers": _check_workers,
    "retries": _check_retries,
    "progress": _check_progress,
    "callbacks": _check_callbacks,
    "max_tasks": _check_max_tasks,
    "mpi_timeout": _check_mpi_timeout,
    "mpi_broadcast_limit": _check_mpi_broadcast_limit,
    "client": _check_client,
    "pool": _check_pool,
    "redis": _check_redis,
    "store": _check_store,
    "lease": _check_lease,
}


OPTIONS = frozenset(_checks)  # the names of every option


def _check_names(options: dict[str, Any], where: str) -> None:
    unknown = sorted(options.keys() - _checks.keys())
    if unknown:
        hint = ""
        if "scheduler" in unknown:  # dask's name for it
            hint = ("; dask's scheduler= is backend= here (scheduler='threads' -> "
                    "backend='threads', 'sync' -> backend='sync', a distributed Client -> "
                    "backend='dask', client=...)")
        raise TypeError(
            f"{where} got unknown option(s) {', '.join(map(repr, unknown))}; "
            f"known options: {', '.join(sorted(_checks))}{hint}"
        )


def get(name: str) -> Any:
    """The current value of option ``name``."""
    _check_names({name: None}, "config.get()")
    overrides = _overrides.get()
    value = overrides[name] if name in overrides else _defaults[name]
    if name == "backend" and value is None:
        return _default_backend()
    return value


@contextmanager
def set(**options: Any) -> Iterator[None]:
    """Set options for the ``with`` block in this thread (restored afterwards; other
    threads never see them)."""
    _check_names(options, "config.set()")
    checked = {name: _checks[name](value) for name, value in options.items()}
    token = _overrides.set(MappingProxyType({**_overrides.get(), **checked}))
    try:
        yield
    finally:
        _overrides.reset(token)


def resolve(options: dict[str, Any], where: str) -> dict[str, Any]:
    """Per-call options merged over the current defaults, validated; unknown names rejected."""
    _check_names(options, where)
    merged = {**_defaults, **_overrides.get()}
    for name, value in options.items():
        merged[name] = _checks[name](value)
    if merged["backend"] is None:
        merged["backend"] = _default_backend()
    _env_defaults(merged)
    return merged


def _env_defaults(merged: dict[str, Any]) -> None:
    import os

    for name, var in (("redis", "TILEGRAPH_REDIS"), ("store", "TILEGRAPH_STORE")):
        if merged[name] is None and os.environ.get(var):
            merged[name] = _checks[name](os.environ[var])
