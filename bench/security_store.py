"""Attacks on the serverless engine's state store (Valkey) and object store by a hostile
local user: each probe tries to run code in a driver or a worker, or to read or change
another user's data, through the stores, against real servers, worker processes and
files. The goal is that none succeeds.

    python bench/security_store.py          # prints a table; exit status 1 if any succeeds

``probes()`` returns one dict per attempt: ``probe`` (what was tried), ``target``
(``"state store"`` or ``"object store"``), ``succeeded`` (whether the attack worked; a
probe that could not be carried out counts as succeeded, so it is never mistaken for a
defence) and ``detail`` (what happened). Run as root, the attacks of "another user" run
in a child process as user nobody; otherwise they are judged from the modes of the
socket's and the store's directories.
"""

from __future__ import annotations

import contextlib
import io
import os
import pickle
import shutil
import socket
import stat
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from typing import Any

import numpy as np

import tilegraph as tg
from tilegraph.runtime.events import TaskEnd
from tilegraph.runtime.serverless.auth import Credentials, IntegrityError, split_url
from tilegraph.runtime.serverless.pool import EmbeddedServer
from tilegraph.runtime.serverless.state import connect, namespace_keys
from tilegraph.runtime.serverless.store import LocalStore, open_store
from tilegraph.runtime.serverless.worker import Worker
from tilegraph.serverless import Pool

NOBODY = 65534
STATE, OBJECT = "state store", "object store"


class Marker:
    """A payload that creates the file ``path`` when it is unpickled: the stand-in for
    code an attacker would run."""

    def __init__(self, path: str):
        self.path = path

    def __reduce__(self):
        return (open, (self.path, "w"))


def _slow(block: np.ndarray, seconds: float) -> np.ndarray:
    time.sleep(seconds)
    return block + 1


def _wait(cond: Callable[[], Any], timeout: float = 30.0) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        got = cond()
        if got:
            return got
        time.sleep(0.02)
    raise TimeoutError("timed out")


def _run_ids(r: Any, ns: str) -> list[str]:
    return [k.decode().rsplit(":", 1)[1] for k in r.scan_iter(match=f"{ns}:run:*")]


def _attacker(pool: Pool) -> Any:
    """A client with the server's password but not the pool's MAC secret."""
    return connect(pool.redis_url, Credentials(pool.credentials.password))


class _Background:
    def __init__(self, fn: Callable[[], Any]):
        self.value: Any = None
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._run, args=(fn,), daemon=True)
        self.thread.start()

    def _run(self, fn: Callable[[], Any]) -> None:
        try:
            self.value = fn()
        except BaseException as exc:
            self.error = exc

    def join(self, timeout: float = 60.0) -> None:
        self.thread.join(timeout)
        if self.thread.is_alive():
            raise TimeoutError("the run did not end")


@contextlib.contextmanager
def _worker(pool: Pool):
    w = Worker(pool.redis_url, namespace=pool.namespace, lease=5.0, worker_id="probe",
               credentials=pool.credentials)
    th = threading.Thread(target=w.run, daemon=True)
    th.start()
    try:
        yield w
    finally:
        w.stopping.set()
        th.join(10)


def _as_other_user(fn: Callable[[], int]) -> int | None:
    """``fn()`` (a small int) in a child process running as user nobody, or ``None``
    when this process cannot change its user (not root)."""
    if not hasattr(os, "geteuid") or os.geteuid() != 0:
        return None
    pid = os.fork()
    if pid == 0:
        code = 99
        try:
            os.setgid(NOBODY)
            os.setuid(NOBODY)
            code = fn()
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status)


def _others_may_enter(path: str) -> bool:
    """Whether another user could enter ``path`` (by its mode and owner)."""
    st = os.stat(path)
    return st.st_uid != os.geteuid() or bool(stat.S_IMODE(st.st_mode) & 0o077)


def _result(probe: str, target: str, succeeded: bool, detail: str) -> dict[str, Any]:
    return {"probe": probe, "target": target, "succeeded": bool(succeeded), "detail": detail}


def _outcome(run: _Background, marker: str) -> tuple[bool, str]:
    """(whether the attack worked, what happened) after a run an attack was made on."""
    ran = os.path.exists(marker)
    if run.error is None:
        return True, "the run finished as if nothing happened" + (
            "; the payload ran" if ran else "")
    name = type(run.error).__name__
    return ran, (f"payload ran ({name})" if ran else
                 f"refused: {name}: {str(run.error).splitlines()[0][:160]}")


# -- the probes ----------------------------------------------------------------------------


def probe_unauthenticated(server: EmbeddedServer) -> dict[str, Any]:
    with socket.create_connection(("127.0.0.1", server.port), timeout=5) as s:
        s.sendall(b"KEYS *\r\n")
        reply = s.recv(200)
    ok = not reply.startswith(b"-NOAUTH")
    return _result("unauthenticated connect (loopback port, KEYS *)", STATE, ok,
                   f"server replied {reply.strip()[:60]!r}")


def probe_wrong_password(server: EmbeddedServer) -> dict[str, Any]:
    try:
        connect(server.tcp_url, Credentials("guess-" + os.urandom(4).hex()))
    except ConnectionError as exc:
        return _result("connect with a guessed password", STATE, False, str(exc)[:160])
    return _result("connect with a guessed password", STATE, True, "accepted")


def probe_socket_other_user(server: EmbeddedServer) -> dict[str, Any]:
    path = split_url(server.url)[0][len("unix://"):].split("?")[0]

    def attempt() -> int:
        s = socket.socket(socket.AF_UNIX)
        try:
            s.connect(path)
        except PermissionError:
            return 0
        return 1

    code = _as_other_user(attempt)
    name = "connect to the Unix socket as another user"
    if code is None:
        open_dir = _others_may_enter(os.path.dirname(path))
        return _result(name, STATE, open_dir, "judged by mode (not root): directory "
                       f"{oct(stat.S_IMODE(os.stat(os.path.dirname(path)).st_mode))}")
    return _result(name, STATE, code != 0, "as nobody: " +
                   ("connected" if code == 1 else "permission denied"))


def probe_other_pool_keys(server: EmbeddedServer) -> dict[str, Any]:
    """Read the keys of a pool on one server with the password of another's."""
    other = EmbeddedServer()
    try:
        try:
            r = connect(server.url, other.credentials)
            keys = r.keys("*")
        except ConnectionError as exc:
            return _result("read another pool's keys with one's own password", STATE, False,
                           str(exc)[:160])
        return _result("read another pool's keys with one's own password", STATE, True,
                       f"read {len(keys)} keys")
    finally:
        other.stop()


def probe_forged_error(pool: Pool, tmp: str) -> dict[str, Any]:
    marker = os.path.join(tmp, "forged-error")
    x = tg.from_numpy(np.ones((4, 4)), chunks=2)
    run = _Background(lambda: x.map_blocks(_slow, 0.5).compute(backend="serverless",
                                                               pool=pool))
    r = _attacker(pool)
    rid = _wait(lambda: _run_ids(r, pool.namespace))[0]
    r.hset(f"{pool.namespace}:run:{rid}",
           mapping={"error": pickle.dumps(Marker(marker)), "errtask": "0"})
    r.rpush(f"{pool.namespace}:{rid}:want", "!fail")
    run.join()
    ok, detail = _outcome(run, marker)
    return _result("forged error pickle + !fail (password, no secret)", STATE, ok, detail)


def probe_forged_record(pool: Pool, tmp: str) -> dict[str, Any]:
    marker = os.path.join(tmp, "forged-record")
    r = _attacker(pool)
    ns, rid = pool.namespace, "probe" + os.urandom(4).hex()
    evil = os.path.join(tmp, "evil-store")
    LocalStore(evil, b"\x02" * 32).put_value(f"{rid}/source", Marker(marker))
    r.hset(f"{ns}:run:{rid}", mapping={"state": "running", "kind": "graph", "store": evil,
                                       "blob": f"{rid}/source", "retries": 0})
    r.zadd(f"{ns}:ready", {f"{rid}|0": 0})
    r.rpush(f"{ns}:wake", 1)
    try:
        _wait(lambda: r.hget(f"{ns}:run:{rid}", "state") == b"failed")
        msg = r.xrevrange(f"{ns}:{rid}:ev", count=1)
        why = msg[0][1].get(b"msg", b"").decode()[:160] if msg else ""
    finally:
        r.delete(f"{ns}:run:{rid}", f"{ns}:{rid}:att", f"{ns}:{rid}:want", f"{ns}:{rid}:ev")
    ran = os.path.exists(marker)
    return _result("forged run record naming a task source of the attacker's", STATE, ran,
                   "payload ran" if ran else f"workers refused it: {why}")


def probe_forged_source(tmp: str) -> dict[str, Any]:
    marker = os.path.join(tmp, "forged-source")
    x = tg.from_numpy(np.arange(16.0).reshape(4, 4), chunks=2)
    with Pool(workers=0, provisioner=False) as p:
        run = _Background(lambda: (x + 1).compute(backend="serverless", pool=p))
        r = _attacker(p)
        rid = _wait(lambda: _run_ids(r, p.namespace))[0]
        blob = f"{rid}/source"
        _wait(lambda: p.store.exists(blob))
        open_store(p.store.url).authenticate(b"\x03" * 32).put_value(blob, Marker(marker))
        with _worker(p):
            run.join()
    ok, detail = _outcome(run, marker)
    return _result("forged task source (a run's source replaced in the store)", OBJECT, ok,
                   detail)


def probe_tampered_pickle(pool: Pool, tmp: str) -> dict[str, Any]:
    marker = os.path.join(tmp, "tampered-pickle")
    dsk = {"a": (dict, [("v", 1)]), "slow": (time.sleep, 1.0), "c": (len, "a"),
           "b": (lambda d, _, n: {**d, "w": n}, "a", "slow", "c")}
    done: list[str] = []

    def tamper(e: Any) -> None:
        if not (isinstance(e, TaskEnd) and e.key == "a") or done:
            return
        rid = _run_ids(pool.r, pool.namespace)[0]
        folder = os.path.join(pool.store.root, rid, "b")
        deadline = time.monotonic() + 10  # "b" waits on "slow", and on this callback
        while not done and time.monotonic() < deadline:
            try:
                names = os.listdir(folder)
            except FileNotFoundError:  # the run's first block not written yet
                names = []
            for name in names:
                path = os.path.join(folder, name)
                try:
                    with open(path, "rb") as f:
                        is_pickle = f.read(5) == b"TGS1P"
                except FileNotFoundError:  # a temporary name renamed meanwhile
                    continue
                if is_pickle:
                    with open(path, "wb") as f:
                        f.write(b"TGS1P" + b"\0" * 32 + pickle.dumps(Marker(marker)))
                    done.append(name)
            if not done:
                time.sleep(0.02)

    run = _Background(lambda: tg.get(dsk, "b", backend="serverless", pool=pool,
                                     callbacks=[tamper]))
    run.join()
    ok, detail = _outcome(run, marker)
    if not done:
        ok, detail = True, "probe could not tamper (no pickle found in time)"
    return _result("tampered block pickle read by a worker", OBJECT, ok, detail)


def _swap_input(store_url: str | None, change: Callable[[Pool, str], None]
                ) -> tuple[bool, str]:
    """Run a graph whose input block the driver stores; ``change(pool, key)`` alters the
    block before any worker reads it. (attack worked, what happened)."""
    a = np.arange(48.0).reshape(6, 8)
    dsk = {"a": a, "b": (np.multiply, "a", 2)}
    with Pool(workers=0, provisioner=False, store=store_url) as p:
        run = _Background(lambda: tg.get(dsk, "b", backend="serverless", pool=p))
        r = _attacker(p)
        rid = _wait(lambda: _run_ids(r, p.namespace))[0]
        key = _wait(lambda: next((k for k in (f"{rid}/b/0", f"{rid}/b/1")
                                  if p.store.exists(k)), None))
        change(p, key)
        with _worker(p):
            run.join()
    if run.error is None:
        wrong = not np.array_equal(run.value, a * 2)
        return wrong, "the run returned " + ("changed values" if wrong else "the right values")
    return False, f"refused: {type(run.error).__name__}: {str(run.error).splitlines()[0][:160]}"


def probe_npy_header(tmp: str) -> dict[str, Any]:
    def change(p: Pool, key: str) -> None:
        raw = p.store.get(key)
        buf = io.BytesIO()
        np.lib.format.write_array(buf, np.zeros((8, 6), np.float32), allow_pickle=False)
        p.store.put(key, raw[:37] + buf.getvalue())  # another shape and dtype, same tag

    ok, detail = _swap_input(None, change)
    return _result("tampered .npy block (shape and dtype changed)", OBJECT, ok, detail)


def probe_npy_values(tmp: str) -> dict[str, Any]:
    def change(p: Pool, key: str) -> None:
        raw = bytearray(p.store.get(key))
        raw[-8:] = np.float64(1e9).tobytes()  # same header, another value
        p.store.put(key, bytes(raw))

    ok, detail = _swap_input(f"memory://tg-probe-{os.urandom(4).hex()}", change)
    return _result("tampered .npy block values (a shared fsspec store)", OBJECT, ok, detail)


def probe_replayed_block(pool: Pool) -> dict[str, Any]:
    s = pool.store
    s.put_value("probe-a/b/0", np.zeros(4))
    s.put("probe-b/b/0", s.get("probe-a/b/0"))
    try:
        s.get_value("probe-b/b/0")
        ok, detail = True, "a block of one run was read as another run's"
    except IntegrityError as exc:
        ok, detail = False, f"refused: {str(exc)[:160]}"
    finally:
        s.delete_prefix("probe-a")
        s.delete_prefix("probe-b")
    return _result("a block copied from another run's key", OBJECT, ok, detail)


def probe_store_other_user(pool: Pool) -> list[dict[str, Any]]:
    root = pool.store.root
    pool.store.put_value("probe/x", np.arange(3.0))
    block = os.path.join(root, "probe", "x")
    try:
        def read() -> int:
            try:
                open(block, "rb").close()
            except PermissionError:
                return 0
            return 1

        def write() -> int:
            try:
                open(os.path.join(root, "planted"), "wb").close()
            except PermissionError:
                return 0
            return 1

        out = []
        for name, fn in (("read another user's blocks", read),
                         ("write into another user's object store", write)):
            code = _as_other_user(fn)
            if code is None:
                ok = _others_may_enter(root)
                detail = (f"judged by mode (not root): store directory "
                          f"{oct(stat.S_IMODE(os.stat(root).st_mode))}")
            else:
                ok = code != 0
                detail = "as nobody: " + ("done" if ok else "permission denied")
            out.append(_result(name, OBJECT, ok, detail))
        return out
    finally:
        pool.store.delete_prefix("probe")


def probe_shared_store_dir(tmp: str) -> dict[str, Any]:
    shared = os.path.join(tmp, "shared")
    os.mkdir(shared)
    os.chmod(shared, 0o777)
    try:
        with Pool(workers=0, provisioner=False, store=shared):
            pass
    except PermissionError as exc:
        return _result("make a pool use a store directory others can write to", OBJECT,
                       False, f"refused: {str(exc)[:160]}")
    return _result("make a pool use a store directory others can write to", OBJECT, True,
                   "accepted")


def probe_nested_namespaces() -> list[dict[str, Any]]:
    server = EmbeddedServer()
    user = {"redis": server.url, "credentials": server.credentials}
    out = []
    try:
        try:
            Pool(workers=0, provisioner=False, namespace="team:b", **user).close()
            out.append(_result("a pool namespace inside another's (team:b)", STATE, True,
                               "accepted"))
        except ValueError as exc:
            out.append(_result("a pool namespace inside another's (team:b)", STATE, False,
                               f"refused: {str(exc)[:120]}"))
        a = np.arange(24.0).reshape(4, 6)
        x = tg.from_numpy(a, chunks=2)
        with Pool(workers=0, provisioner=False, namespace="team-b", **user) as team_b, \
                _worker(team_b):
            run = _Background(lambda: x.map_blocks(_slow, 0.2).compute(
                backend="serverless", pool=team_b))
            r = connect(server.url, server.credentials)
            _wait(lambda: _run_ids(r, "team-b"))
            with Pool(workers=0, provisioner=False, namespace="team", **user):
                pass  # closed: its keys go
            run.join()
            whole = run.error is None and np.array_equal(run.value, a + 1)
            out.append(_result("closing pool 'team' deletes pool 'team-b''s keys", STATE,
                               not whole, "team-b's run " + (
                                   "finished right" if whole else f"failed: {run.error}")))
        left = namespace_keys(r, "team")
        if left:
            out[-1]["detail"] += f"; team left {len(left)} keys"
    finally:
        server.stop()
    return out


def probes() -> list[dict[str, Any]]:
    """Every probe, in order (see the module docstring)."""
    results: list[dict[str, Any]] = []
    tmp = tempfile.mkdtemp(prefix="tg-probes-")

    def run(fn: Callable[[], Any], name: str, target: str) -> None:
        try:
            got = fn()
        except Exception as exc:  # could not be carried out: never taken for a defence
            got = _result(name, target, True, f"probe could not complete: "
                          f"{type(exc).__name__}: {exc}")
        results.extend(got if isinstance(got, list) else [got])

    server = EmbeddedServer()
    try:
        run(lambda: probe_unauthenticated(server), "unauthenticated connect", STATE)
        run(lambda: probe_wrong_password(server), "guessed password", STATE)
        run(lambda: probe_socket_other_user(server), "socket as another user", STATE)
        run(lambda: probe_other_pool_keys(server), "another pool's keys", STATE)
    finally:
        server.stop()
    try:
        with Pool(workers=2, lease=2.0) as pool:
            run(lambda: probe_forged_error(pool, tmp), "forged error pickle", STATE)
            run(lambda: probe_forged_record(pool, tmp), "forged run record", STATE)
            run(lambda: probe_tampered_pickle(pool, tmp), "tampered block pickle", OBJECT)
            run(lambda: probe_replayed_block(pool), "replayed block", OBJECT)
            run(lambda: probe_store_other_user(pool), "store as another user", OBJECT)
        run(lambda: probe_forged_source(tmp), "forged task source", OBJECT)
        run(lambda: probe_npy_header(tmp), "tampered .npy block", OBJECT)
        run(lambda: probe_npy_values(tmp), "tampered .npy values", OBJECT)
        run(lambda: probe_shared_store_dir(tmp), "shared store directory", OBJECT)
        run(probe_nested_namespaces, "nested namespace deletion", STATE)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return results


def main() -> int:
    results = probes()
    w = max(len(r["probe"]) for r in results)
    print(f"{'probe':<{w}}  {'target':<12}  {'succeeded':<9}  detail")
    for r in results:
        print(f"{r['probe']:<{w}}  {r['target']:<12}  {'YES' if r['succeeded'] else 'no':<9}  "
              f"{r['detail']}")
    bad = sum(r["succeeded"] for r in results)
    print(f"{bad} of {len(results)} attacks succeeded (goal: 0)")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
