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
``memory_limit`` ``None`` (3/4 of RAM)   bytes of results each process that runs tasks
                                         may hold at once (an int or a string such as
                                         ``"2GB"``); colder results spill to disk beyond
                                         it. All threads of the threads backend share it,
                                         each MPI rank has its own; with several workers
                                         it can be exceeded by about one task's result.
                                         The default is divided among the processes the
                                         backend runs on this host (its MPI ranks)
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
``mpi_broadcast_limit`` ``"1MiB"``       with MPI, results of at most this many bytes (all
                                         outputs of a call together) are returned on every
                                         rank; larger ones on rank 0 only (``None`` on the
                                         others). ``0``: rank 0 only, always
=============  ========================  ====================================================

Each backend declares its own options, set the same way, beside its factory (with their
defaults, checks and meanings: see :func:`tilegraph.runtime.backends.register_backend` and
the module of each backend, e.g. ``lease`` in :mod:`tilegraph.runtime.serverless.backend`,
``mpi_timeout`` in :mod:`tilegraph.runtime.mpi`, ``client`` in
:mod:`tilegraph.runtime.dask_backend`); :func:`names` lists every option. A run gets the
options of its own backend; one given in the call for another backend is an error naming
the backend that takes it (set with ``config.set``, it is left for the runs on that
backend).

A public entry point (``compute``, ``get``, ``run``, ``to_zarr``, ...) turns its keyword
options into one :class:`Options` record (:func:`resolve`, once per call). Once the run's
backend is known, :func:`per_process` completes it: ``memory_limit`` becomes the bytes each
process that runs tasks may hold (the one given, else the host's default budget divided
among the backend's processes on this host), before any graph is built. The completed
record is passed down to lowering, planning and the executor; nothing below the entry point
reads an option again.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
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
    "mpi_broadcast_limit": 1 << 20,
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

    try:
        return parse_bytes(value)
    except (TypeError, ValueError) as exc:
        raise type(exc)(f"memory_limit (bytes each process of a run may hold): {exc}"
                        ) from None


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

    from tilegraph.util import path_value

    if value is None:
        return None
    path = path_value("report", value, "a file path or None")
    parent = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(parent):
        raise ValueError(f"report {path!r}: directory {parent!r} does not exist")
    return path


def _check_max_tasks(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"max_tasks must be a positive integer, got {value!r}")
    return value


def _check_mpi_broadcast_limit(value: Any) -> int:
    from tilegraph.util import parse_bytes

    if value == 0 and not isinstance(value, bool):
        return 0
    try:
        return parse_bytes(value)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"mpi_broadcast_limit must be 0 or a positive number of bytes (an "
                         f"int or a string such as '1MiB'), got {value!r}") from exc


def _default_backend() -> str:
    import os

    return _check_backend(os.environ.get("TILEGRAPH_BACKEND") or "threads")


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
    "mpi_broadcast_limit": _check_mpi_broadcast_limit,
}


GENERAL = frozenset(_checks)  # the options of every run (the backends declare their own)


class Options:
    """The options of one run, checked, made once from the call's keyword options over the
    current settings (:func:`resolve`) and passed down to the pipeline, which reads them
    from here only; read-only (``_replace`` makes a changed copy). A plain class with
    slots: ``import tilegraph`` pays neither for the dataclasses module nor for making a
    named tuple. ``backend_options``: the values of the options the run's backend declares
    (e.g. ``lease`` for ``"serverless"``), a read-only mapping its factory gets.

    ``memory_limit``: bytes each process that runs the tasks may hold; ``None`` after
    :func:`resolve` when none was given, an int in every record :func:`per_process` made
    (what lowering, planning and the executor take). ``limit_given``: whether it was given
    (in the call or by ``config.set``) rather than the default."""

    backend: Any  # a backend's name, or a Backend object
    workers: int | None
    retries: int
    progress: bool | str
    callbacks: tuple[Callable, ...]
    memory_limit: int | None
    limit_given: bool
    spill_dir: str | None
    spill: bool
    placement: str
    report: str | None
    max_tasks: int
    mpi_broadcast_limit: int
    backend_options: Mapping[str, Any]

    __slots__ = (
        "backend",
        "backend_options",
        "callbacks",
        "limit_given",
        "max_tasks",
        "memory_limit",
        "mpi_broadcast_limit",
        "placement",
        "progress",
        "report",
        "retries",
        "spill",
        "spill_dir",
        "workers",
    )

    def __init__(self, **fields: Any):
        missing = [name for name in self.__slots__ if name not in fields]
        unknown = sorted(frozenset(fields) - frozenset(self.__slots__))
        if missing or unknown:
            raise TypeError(f"Options: missing {missing}, unknown {unknown}")
        for name in self.__slots__:
            object.__setattr__(self, name, fields[name])

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError(f"a run's Options are read-only (cannot set {name!r}): make a "
                             "changed copy with _replace(...)")

    def __delattr__(self, name: str) -> None:
        raise AttributeError(f"a run's Options are read-only (cannot delete {name!r})")

    def _asdict(self) -> dict[str, Any]:
        return {name: getattr(self, name) for name in self.__slots__}

    def _replace(self, **changes: Any) -> Options:
        return Options(**{**self._asdict(), **changes})

    def __eq__(self, other: object) -> bool:
        return type(other) is Options and self._asdict() == other._asdict()

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return "Options(" + ", ".join(f"{k}={v!r}" for k, v in self._asdict().items()) + ")"


def is_option(name: str) -> bool:
    """Whether ``name`` is an option: of every run, or of a backend (whose module is
    imported to know)."""
    if name in _checks:
        return True
    from tilegraph.runtime.backends import option_backend

    return option_backend(name) is not None


def names() -> list[str]:
    """The names of every option, sorted (every backend's module imported to know its
    own)."""
    from tilegraph.runtime.backends import all_backend_options

    return sorted(GENERAL | all_backend_options().keys())


def check_names(options: Mapping[str, Any], where: str) -> None:
    """Reject the names in ``options`` that are no option, naming them and the options."""
    unknown = sorted(name for name in options if not is_option(name))
    if unknown:
        raise TypeError(
            f"{where} got unknown option(s) {', '.join(map(repr, unknown))}; "
            f"known options: {', '.join(names())} (and dask's scheduler=, num_workers=)"
        )


# dask's scheduler names -> tilegraph's backend (see from_dask_keywords)
DASK_SCHEDULERS = {
    "threads": "threads", "threading": "threads",
    "sync": "sync", "single-threaded": "sync", "synchronous": "sync",
    "processes": "processes", "multiprocessing": "processes",
    "distributed": "dask", "dask.distributed": "dask",
}
_WARNED_PROCESSES: list[bool] = []  # set once: scheduler='processes' warns once per process


def _dask_get_backend(get: Callable) -> str | None:
    """The backend of one of dask's scheduler functions (``dask.threaded.get``,
    ``dask.get``/``dask.local.get_sync``, ``dask.multiprocessing.get``), ``""`` for
    tilegraph's own ``get`` (the backend as set), ``None`` for any other callable."""
    module = getattr(get, "__module__", None) or ""
    name = getattr(get, "__name__", None)
    if module == "tilegraph.pipeline" and name == "get":
        return ""
    return {("dask.threaded", "get"): "threads", ("dask.local", "get_sync"): "sync",
            ("dask.multiprocessing", "get"): "processes"}.get((module, name))


def _is_distributed_client(value: Any) -> bool:
    return (type(value).__module__.split(".")[0] == "distributed"
            and hasattr(value, "submit") and hasattr(value, "scheduler_info"))


def _scheduler_backend(scheduler: Any, where: str) -> tuple[str, Any]:
    """``(backend, client)`` for dask's ``scheduler=`` value (see
    :func:`from_dask_keywords`); ``backend`` is ``""`` for "the backend as set"."""
    backend: str | None = None
    client = None
    if isinstance(scheduler, str):
        backend = DASK_SCHEDULERS.get(scheduler.lower())
    elif _is_distributed_client(scheduler):
        backend, client = "dask", scheduler
    elif callable(scheduler):
        owner = getattr(scheduler, "__self__", None)
        if owner is not None and _is_distributed_client(owner):
            backend, client = "dask", owner  # client.get
        else:
            backend = _dask_get_backend(scheduler)
    if backend is None:
        raise ValueError(
            f"{where}: scheduler={scheduler!r} has no meaning in tilegraph; give one of "
            f"{', '.join(map(repr, DASK_SCHEDULERS))}, a distributed.Client, dask's "
            "dask.threaded.get or dask.get, or backend= (one of tilegraph's backends). "
            "A scheduler function of your own is taken by compute() and persist(), and by "
            "dask.compute(x, scheduler=...): tilegraph arrays are dask collections")
    if backend == "processes":
        backend = "threads"
        if not _WARNED_PROCESSES:
            _WARNED_PROCESSES.append(True)
            import warnings

            from tilegraph.runtime.warning_site import install

            install()  # shown at the user's line
            warnings.warn(
                "scheduler='processes' runs on tilegraph's threads: tilegraph has no "
                "process pool for arrays (its block kernels release the GIL, so threads "
                "give the same results without pickling blocks). For separate processes "
                "use backend='dask' with a distributed LocalCluster, or MPI ranks "
                "(tilegraph run -n N script.py)", UserWarning, stacklevel=2)
    return backend, client


def foreign_get(options: Mapping[str, Any]) -> Callable | None:
    """The scheduler function of the user's own among ``options`` (``scheduler=f``, a
    callable that is none of dask's named ones, tilegraph's ``get`` or a distributed
    Client's), or ``None``: ``compute``/``persist`` run their plan through it as dask
    does, calling ``f(graph, keys, **kwargs)`` on the plan as a dask graph."""
    scheduler = options.get("scheduler")
    if (not callable(scheduler) or isinstance(scheduler, str)
            or _is_distributed_client(scheduler)
            or _is_distributed_client(getattr(scheduler, "__self__", None))
            or _dask_get_backend(scheduler) is not None):
        return None
    return scheduler


def from_dask_keywords(options: Mapping[str, Any], where: str) -> Mapping[str, Any]:
    """``options`` with dask's keywords of ``compute``/``persist`` made tilegraph's:

    - ``scheduler="threads"``/``"threading"`` -> ``backend="threads"``;
      ``"sync"``/``"single-threaded"``/``"synchronous"`` -> ``backend="sync"``;
      ``"distributed"`` -> ``backend="dask"`` on the current ``distributed.Client``;
      a ``distributed.Client`` (or its ``get``) -> ``backend="dask", client=<it>``;
      ``dask.threaded.get`` and ``dask.get``/``dask.local.get_sync`` as their names;
      ``tilegraph.get`` -> the backend as set.
    - ``scheduler="processes"``/``"multiprocessing"`` (or ``dask.multiprocessing.get``)
      runs on threads, with a warning the first time: tilegraph has no process pool for
      arrays; its block kernels (NumPy, BLAS) release the GIL, so threads give the same
      results with no pickling. For processes, run on a dask cluster
      (``backend="dask"``) or on MPI ranks (``tilegraph run -n N script.py``).
    - ``num_workers=n`` -> ``workers=n``.
    - ``optimize_graph=`` is accepted and has no effect (tilegraph always plans).

    Any other ``scheduler=`` (another string, a callable here) is refused with an error
    that names it and the schedulers understood; ``scheduler=None`` is the backend as set.
    (``compute`` and ``persist`` run their plan through a scheduler function of the
    user's own, as dask does: :func:`foreign_get`.)
    Given with a different ``backend=``, or ``num_workers=`` with a different
    ``workers=``, they are refused as contradictory.

    >>> dict(from_dask_keywords({"scheduler": "single-threaded"}, "compute()"))
    {'backend': 'sync'}
    >>> dict(from_dask_keywords({"num_workers": 2}, "compute()"))
    {'workers': 2}
    """
    if not any(k in options for k in ("scheduler", "num_workers", "optimize_graph")):
        return options
    out = dict(options)
    out.pop("optimize_graph", None)
    n = out.pop("num_workers", None)
    if n is not None:
        if out.get("workers") not in (None, n):
            raise TypeError(f"{where}: num_workers={n!r} and workers={out['workers']!r} "
                            "disagree; give one of them")
        out["workers"] = n
    scheduler = out.pop("scheduler", None)
    if scheduler is None:
        return out
    backend, client = _scheduler_backend(scheduler, where)
    if backend == "":
        return out
    if out.get("backend") not in (None, backend):
        raise TypeError(f"{where}: scheduler={scheduler!r} (backend {backend!r}) and "
                        f"backend={out['backend']!r} disagree; give one of them")
    out["backend"] = backend
    if client is not None:
        if out.get("client") not in (None, client):
            raise TypeError(f"{where}: scheduler= names one distributed.Client and "
                            "client= another; give one of them")
        out["client"] = client
    return out


def _declared(name: str) -> Any:
    """The declaration (a ``BackendOption``) of backend option ``name``."""
    from tilegraph.runtime.backends import backend_options, option_backend

    return backend_options(option_backend(name))[name]


def _check(name: str, value: Any) -> Any:
    """``value`` of option ``name`` checked (by the backend that declares it, if it is a
    backend's)."""
    return _checks[name](value) if name in _checks else _declared(name).check(value)


def get(name: str) -> Any:
    """The current value of option ``name``."""
    check_names({name: None}, "config.get()")
    overrides = _overrides.get()
    if name in overrides:
        value = overrides[name]
    elif name in _defaults:
        value = _defaults[name]
    else:
        value = _declared(name).default
    if name == "backend" and value is None:
        return _default_backend()
    return value


class set:
    """Set options in this thread (other threads never see them): for a ``with`` block,
    restored when it ends, or, called on its own as ``dask.config.set`` is, from then on.
    dask's ``scheduler=`` and ``num_workers=`` are taken as tilegraph's
    (:func:`from_dask_keywords`).

    >>> import tilegraph as tg
    >>> with tg.config.set(workers=3):
    ...     tg.config.get("workers")
    3
    >>> tg.config.get("workers") is None
    True
    """

    def __init__(self, **options: Any):
        options = from_dask_keywords(options, "config.set()")
        check_names(options, "config.set()")
        checked = {name: _check(name, value) for name, value in options.items()}
        self._token = _overrides.set(MappingProxyType({**_overrides.get(), **checked}))

    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> None:
        _overrides.reset(self._token)


def resolve(options: Mapping[str, Any], where: str) -> Options:
    """The :class:`Options` of one run: the call's ``options`` (checked; unknown names,
    and options of another backend than the run's, rejected) over the current settings
    (``config.set``) over the defaults. ``where`` names the call in errors. dask's
    ``scheduler=`` and ``num_workers=`` are taken as tilegraph's
    (:func:`from_dask_keywords`)."""
    options = from_dask_keywords(options, where)
    check_names(options, where)
    overrides = _overrides.get()
    merged = {**_defaults, **{k: v for k, v in overrides.items() if k in _checks}}
    own: dict[str, Any] = {}
    for name, value in options.items():
        if name in _checks:
            merged[name] = _checks[name](value)
        else:
            own[name] = value
    if merged["backend"] is None:
        merged["backend"] = _default_backend()
    from tilegraph.runtime.backends import backend_values

    values = backend_values(merged["backend"], own, overrides)
    return Options(**merged, limit_given=merged["memory_limit"] is not None,
                   backend_options=MappingProxyType(values))


def per_process(options: Options, local_processes: int) -> Options:
    """The run's options completed for a backend that runs ``local_processes`` processes on
    this host (its MPI ranks here; 1 for every other backend): ``memory_limit`` the bytes
    each of them may hold, the one given (it is per process already), else the host's
    default budget (:func:`tilegraph.runtime.budget.default_limit`) divided among them.
    Called once per run, as soon as the backend is known and before any graph is built;
    everything below takes the limit from the record it returns.

    >>> opts = resolve({"memory_limit": "1GB"}, "example")
    >>> per_process(opts, 4).memory_limit
    1000000000
    """
    if not isinstance(options, Options):
        raise TypeError(f"per_process: options must be a tilegraph.config.Options (made by "
                        f"tilegraph.config.resolve), got {type(options).__name__}")
    if (isinstance(local_processes, bool) or not isinstance(local_processes, int)
            or local_processes < 1):
        raise ValueError(f"per_process: local_processes (the processes of the run on this "
                         f"host) must be a positive int, got {local_processes!r}")
    if options.limit_given:
        return options
    from tilegraph.runtime.budget import default_limit

    return options._replace(memory_limit=default_limit(local_processes))
