"""Attacks on the service by a hostile local user and a careless one: each probe tries to run
code, or to read or change another user's jobs, or to break the service for everyone.

    python bench/security_service.py

:func:`probes` starts real services (``tilegraph serve --local`` on free loopback ports,
in private temporary data directories), runs every probe against them and returns one dict
per attempt: ``{"probe": str, "target": "service", "succeeded": bool, "detail": str}``.
Run as a script it prints them as a table; the goal is that none succeeds (exit status 1
otherwise). A probe that cannot finish counts as succeeded (the service misbehaved, or the
probe must be looked at). The requests go to 127.0.0.1 only, a bounded number of them.
"""

from __future__ import annotations

import contextlib
import http.client
import json
import os
import pickle
import secrets
import shutil
import socket
import sqlite3
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from typing import Any

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TOKEN = "probe-token-" + secrets.token_hex(8)
START_TIMEOUT = 60.0
JOB_TIMEOUT = 60.0


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _env(extra: dict[str, str] | None = None) -> dict[str, str]:
    env = dict(os.environ, TILEGRAPH_TOKEN=TOKEN, PYTHONPATH=os.pathsep.join(
        filter(None, [ROOT, os.environ.get("PYTHONPATH")])))
    env.update(extra or {})
    return env


class Service:
    """``tilegraph serve --local`` on a free loopback port."""

    def __init__(self, data_dir: str, *extra: str, env: dict[str, str] | None = None):
        self.data_dir = data_dir
        self.port = _free_port()
        self.log = open(data_dir + "-serve.log", "wb")  # closed by stop()
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "tilegraph.cli", "serve", "--local", "--port",
             str(self.port), "--data-dir", data_dir, "--workers", "1", *extra],
            env=_env(env), stdout=self.log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + START_TIMEOUT
        while True:
            with contextlib.suppress(OSError):
                if self.call("GET", "/api/info")[0] == 200:
                    return
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.stop()
                with open(data_dir + "-serve.log", encoding="utf-8", errors="replace") as f:
                    raise RuntimeError(f"the service did not start:\n{f.read()}")
            time.sleep(0.1)

    def call(self, method: str, path: str, body: bytes | None = None,
             ctype: str | None = "application/json", token: str | None = TOKEN,
             headers: dict[str, str] | None = None) -> tuple[int, bytes]:
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
        try:
            h = dict(headers or {})
            if token is not None:
                h["Authorization"] = f"Bearer {token}"
            if body is not None and ctype:
                h["Content-Type"] = ctype
            conn.request(method, path, body=body, headers=h)
            resp = conn.getresponse()
            return resp.status, resp.read()
        finally:
            conn.close()

    def json(self, method: str, path: str, body: Any = None) -> Any:
        status, raw = self.call(method, path, None if body is None else
                                json.dumps(body).encode())
        if status >= 300:
            raise RuntimeError(f"{method} {path}: HTTP {status}: {raw[:200]!r}")
        return json.loads(raw) if raw else None

    def submit(self, source: str, name: str = "probe.py", args: list[str] | None = None,
               outputs: list[str] | None = None) -> str:
        return self.json("POST", "/api/jobs", {"script": source, "name": name,
                                               "args": args or [],
                                               "outputs": outputs or []})["id"]

    def wait(self, job_id: str, until: Callable[[dict], bool] | None = None) -> dict:
        deadline = time.monotonic() + JOB_TIMEOUT
        while True:
            job = self.json("GET", f"/api/jobs/{job_id}")
            if (until(job) if until else job["state"] in ("done", "failed", "cancelled")):
                return job
            if time.monotonic() > deadline:
                raise TimeoutError(f"job {job_id} still {job['state']}")
            time.sleep(0.05)

    def snapshot(self) -> tuple[set[str], set[str]]:
        """The listed job ids and the entries of the jobs directory."""
        listed = {j["id"] for j in self.json("GET", "/api/jobs?brief=1")}
        return listed, set(os.listdir(os.path.join(self.data_dir, "jobs")))

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()


def _result(probe: str, succeeded: bool, detail: str) -> dict[str, Any]:
    return {"probe": probe, "target": "service", "succeeded": bool(succeeded),
            "detail": detail}


# -- the probes -------------------------------------------------------------------------------


def _no_token(srv: Service, tmp: str) -> dict[str, Any]:
    got = {}
    for method, path, body in [("GET", "/api/jobs", None), ("GET", "/", None),
                               ("POST", "/api/jobs", b'{"script": "print(1)"}')]:
        got[f"{method} {path}"] = srv.call(method, path, body, token=None)[0]
    let_in = {k: v for k, v in got.items() if v != 401}
    return _result("request without a token", bool(let_in),
                   f"answers {got}" if let_in else "every request got 401")


def _other_token(srv: Service, tmp: str) -> dict[str, Any]:
    other = "probe-token-" + secrets.token_hex(8)  # the token of another user's service
    before = srv.snapshot()
    codes = [srv.call("GET", "/api/jobs", token=other)[0],
             srv.call("POST", "/api/jobs", b'{"script": "print(1)"}', token=other)[0],
             srv.call("GET", f"/api/jobs?token={other}", token=None)[0],
             srv.call("GET", "/api/jobs", token=TOKEN + "x")[0]]
    changed = srv.snapshot() != before
    ok = all(c == 401 for c in codes) and not changed
    return _result("another user's token", not ok,
                   "every request got 401, nothing submitted" if ok else
                   f"answers {codes}, jobs changed: {changed}")


def _traversal(srv: Service, tmp: str) -> dict[str, Any]:
    secret = os.path.join(tmp, "other-user-secret.txt")
    with open(secret, "w") as f:
        f.write("another user's data")
    before = srv.snapshot()
    accepted = []
    for body, query, ctype in [
            ({"script": "print(1)", "name": "../../escape.py"}, "", None),
            ({"script": "print(1)", "outputs": ["../../jobs.sqlite"]}, "", None),
            ({"script": "print(1)", "outputs": ["a/../../../x"]}, "", None),
            ({"script": "print(1)", "outputs": [secret]}, "", None),
            (None, "?name=..%2F..%2Fplan", "application/octet-stream")]:
        raw = json.dumps(body).encode() if body is not None else b"\x80\x05N."
        status, _ = srv.call("POST", "/api/jobs" + query, raw,
                             ctype or "application/json")
        if status != 400:
            accepted.append(f"{body or query}: HTTP {status}")
    outside = [p for p in (os.path.join(srv.data_dir, "escape.py"),
                           os.path.join(os.path.dirname(srv.data_dir), "escape.py"))
               if os.path.exists(p)]
    # a job's declared output that is a link out of its directory, and names in the URL
    job = srv.wait(srv.submit(f"import os\nos.symlink({secret!r}, 'out.txt')\n",
                              outputs=["out.txt"]))
    served = []
    for name in ("out.txt", "..%2F..%2F..%2Fjobs.sqlite", "%2E%2E/%2E%2E/jobs.sqlite"):
        status, body = srv.call("GET", f"/api/jobs/{job['id']}/files/{name}")
        if status == 200:
            served.append(f"{name}: {body[:40]!r}")
    left = srv.snapshot()[1] - before[1] - {job["id"]}
    bad = accepted or outside or served or left
    return _result("path traversal in names", bool(bad),
                   f"accepted {accepted}, files outside {outside}, served {served}, left "
                   f"{sorted(left)}" if bad else
                   "names with '..', '/' or absolute paths got 400; a link out of the job's "
                   "directory was not served")


class _Marker:
    def __init__(self, path: str):
        self.path = path

    def __reduce__(self) -> tuple:
        return os.mkdir, (self.path,)


def _replaced_plan(srv: Service, tmp: str) -> dict[str, Any]:
    """The service runs one job at a time here: a blocker holds the queue while the plans
    that follow are replaced in the data directory."""
    if ROOT not in sys.path:
        sys.path.insert(0, ROOT)
    import numpy as np

    import tilegraph as tg
    from tilegraph.array.lowering import plan_arrays
    from tilegraph.service.client import _dumps

    go = os.path.join(tmp, "go")
    blocker = srv.submit("import os, sys, time\nend = time.time() + 60\n"
                         "while not os.path.exists(sys.argv[1]) and time.time() < end:\n"
                         "    time.sleep(0.02)\n", args=[go])
    srv.wait(blocker, lambda j: j["state"] == "running")
    x = tg.from_numpy(np.arange(12.0).reshape(3, 4), chunks=(2, 3))
    payload = _dumps(plan_arrays([(x + 1).sum()._compute_target()]))
    ids, markers = [], []
    for i in range(3):
        status, reply = srv.call("POST", "/api/jobs", payload, "application/octet-stream")
        if status != 201:
            return _result("a replaced plan pickle", True, f"a plan was refused: {status}")
        ids.append(json.loads(reply)["id"])
        markers.append(os.path.join(tmp, f"pwned-{i}"))
    plans = [os.path.join(srv.data_dir, "jobs", i, "plan.pkl") for i in ids]
    evil = [pickle.dumps(_Marker(m)) for m in markers]
    size = os.path.getsize(plans[1])
    with open(plans[0], "wb") as f:          # a bare pickle
        f.write(evil[0])
    with open(plans[1], "wb") as f:          # the right size and header, a forged MAC
        f.write(b"TGPLAN1\n" + b"\0" * 32 + evil[1] + b" " * (size - 40 - len(evil[1])))
    with open(plans[2], "rb") as f:          # the service's own header on a new pickle
        header = f.read(40)
    with open(plans[2], "wb") as f:
        f.write(header + evil[2] + b" " * (size - 40 - len(evil[2])))
    open(go, "w").close()
    jobs = [srv.wait(i) for i in ids]
    ran = [m for m in markers if os.path.exists(m)]
    unnamed = [j["id"] for j, p in zip(jobs, plans, strict=True)
               if j["state"] != "failed" or p not in (j["error"] or "")]
    bad = ran or unnamed
    return _result("a replaced plan pickle", bool(bad),
                   f"payload ran: {ran}; jobs not failed naming the file: {unnamed}" if bad
                   else "3 replaced plans (bare, forged MAC, reused header): each job failed "
                        "naming its plan file; no payload ran")


def _stream(srv: Service, job_id: str) -> tuple[list[str], list[Any]]:
    """(event kinds, data of each message) of a finished job's stream."""
    status, raw = srv.call("GET", f"/api/jobs/{job_id}/events")
    if status != 200:
        raise RuntimeError(f"events: HTTP {status}")
    kinds, data = [], []
    for message in raw.decode("utf-8", "replace").replace("\r\n", "\n").replace(
            "\r", "\n").split("\n\n"):
        lines = message.strip("\n").split("\n")
        kind = next((ln[7:] for ln in lines if ln.startswith("event: ")), "message")
        text = "\n".join(ln[6:] for ln in lines if ln.startswith("data: "))
        if text:
            kinds.append(kind)
            data.append(text)
    return kinds, data


def _forged_events(srv: Service, tmp: str) -> dict[str, Any]:
    job = srv.wait(srv.submit("import numpy as np, tilegraph as tg\n"
                              "print(tg.from_numpy(np.arange(9.0), chunks=4).sum()"
                              ".compute())\n"))
    path = os.path.join(srv.data_dir, "jobs", job["id"], "events.jsonl")
    with open(path, "ab") as f:
        f.write(b'{"type":"Injected"}\r\nevent: end\r\ndata: "forged"\n')
        f.write(b"not json\n[1]\n" + b"[" * 20000 + b"]" * 20000 + b"\n")
        f.write(b'{"type":"' + b"x" * (2 << 20) + b'"}\n')
    kinds, data = _stream(srv, job["id"])
    problems = []
    if kinds.count("end") != 1:
        problems.append(f"{kinds.count('end')} end events")
    for text in data:
        try:
            value = json.loads(text)
        except ValueError:
            problems.append(f"a message that is not JSON: {text[:60]!r}")
            continue
        if isinstance(value, list) and any(isinstance(e, dict) and e.get("type") in
                                           ("Injected", "x" * 10) for e in value):
            problems.append("an injected event")
    return _result("a forged events file", bool(problems),
                   "; ".join(problems) if problems else
                   "lines that were not events (a carriage return, not JSON, too deep, too "
                   "long) were not streamed; every message is JSON")


def _forged_progress(srv: Service, tmp: str) -> dict[str, Any]:
    script = ("import json, os, time\n"
              "p = os.environ['TILEGRAPH_PROGRESS']\n"
              "json.dump({'tasks_done': -3, 'tasks_total': 'all', 'runs': 2**80,\n"
              "           'held_bytes': float('nan'), 'current': {'0': '\\ud800'},\n"
              "           'plan': [['x' * 100000]] * 100}, open(p, 'w'))\n"
              "time.sleep(1)\n"
              "open(os.environ['TILEGRAPH_ERROR_FILE'], 'w').write('{\"error\": 1}')\n"
              "raise SystemExit(3)\n")
    job = srv.wait(srv.submit(script))
    status, _ = srv.call("GET", "/api/jobs")
    problems = []
    if status != 200:
        problems.append(f"the job list answers HTTP {status}")
    wrong = {k: job[k] for k in ("tasks_done", "tasks_total", "runs", "held_bytes")
             if type(job[k]) is not int or not 0 <= job[k] < 2**63}
    if wrong:
        problems.append(f"forged values taken: {wrong}")
    if len(job["plan"]) > 20 or any(len(ln) > 4000 for s in job["plan"] for ln in s):
        problems.append("the plan summaries are not bounded")
    if not isinstance(job["error"], str):
        problems.append(f"the error is {job['error']!r}")
    return _result("a forged progress file", bool(problems),
                   "; ".join(problems) if problems else
                   "counts of the wrong type or range, NaN, a surrogate and 100 summaries of "
                   "100 kB were not taken as they were; the list answers")


def _bad_bodies(srv: Service, tmp: str) -> list[dict[str, Any]]:
    cases = [
        ("a malformed JSON body", b'{"script": "print(1)", '),
        ("a deeply nested JSON body", b"[" * 100_000 + b"]" * 100_000),
        ("a NUL in a name", json.dumps({"script": "print(1)", "outputs": ["a\0b"]}).encode()),
        ("an overlong name", json.dumps({"script": "print(1)",
                                         "name": "n" * 300 + ".py"}).encode()),
        ("a surrogate name breaking the listing",
         b'{"script": "print(1)", "outputs": ["\\ud800"]}'),
    ]
    out = []
    for probe, body in cases:
        before = srv.snapshot()
        status, raw = srv.call("POST", "/api/jobs", body)
        list_status = srv.call("GET", "/api/jobs")[0]
        after = srv.snapshot()
        try:
            reply = json.loads(raw)
        except ValueError:
            reply = {}
        bad = status != 400 or list_status != 200 or after != before
        out.append(_result(probe, bad,
                           f"HTTP {status} {raw[:120]!r}; list HTTP {list_status}; "
                           f"left {sorted(after[1] - before[1])}" if bad else
                           f"400 naming {reply.get('field')!r}: "
                           f"{str(reply.get('error'))[:70]}; nothing left behind"))
    return out


ESCAPE = """
import os, sys, time
pidfile, how = sys.argv[1], sys.argv[2]
if os.fork() == 0:
    if os.fork() == 0:
        os.setsid()
        code = ("import os, time\\n"
                f"open({pidfile!r} + '.tmp', 'w').write(str(os.getpid()))\\n"
                f"os.rename({pidfile!r} + '.tmp', {pidfile!r})\\n"
                "time.sleep(600)\\n")
        os.execve(sys.executable, [sys.executable, "-c", code], {})
    os._exit(0)
os.wait()
while not os.path.exists(pidfile):
    time.sleep(0.01)
if how == "cancel":
    time.sleep(600)
"""


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def _grandchild(srv: Service, tmp: str, how: str, label: str) -> dict[str, Any]:
    pidfile = os.path.join(tmp, f"grandchild-{how}-{label}.pid")
    job_id = srv.submit(ESCAPE, args=[pidfile, how])
    deadline = time.monotonic() + JOB_TIMEOUT
    while not os.path.exists(pidfile):
        if time.monotonic() > deadline:
            raise TimeoutError("the grandchild did not start")
        time.sleep(0.02)
    with open(pidfile) as f:
        pid = int(f.read())
    if how == "cancel":
        srv.call("DELETE", f"/api/jobs/{job_id}")
    job = srv.wait(job_id)
    deadline = time.monotonic() + 5
    while _alive(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    survived = _alive(pid)
    if survived:
        with contextlib.suppress(OSError):
            os.kill(pid, 9)
    return _result(f"a job grandchild surviving {'cancel' if how == 'cancel' else 'its end'}"
                   f" ({label})", survived,
                   f"process {pid} (own session, empty environment) still ran 5 s after "
                   f"the job was {job['state']}" if survived else
                   f"process {pid} (own session, empty environment) ended with the job "
                   f"({job['state']})")


def _open_data_dir(tmp: str) -> dict[str, Any]:
    data = os.path.join(tmp, "world-writable")
    os.mkdir(data)
    os.chmod(data, 0o777)
    proc = subprocess.Popen([sys.executable, "-m", "tilegraph.cli", "serve", "--local",
                             "--port", str(_free_port()), "--data-dir", data],
                            env=_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    try:
        _, err = proc.communicate(timeout=START_TIMEOUT / 4)
    except subprocess.TimeoutExpired:  # it started: stop it
        proc.terminate()
        _, err = proc.communicate(timeout=30)
    refused = proc.returncode == 2 and "writable by other users (mode 0777)" in err
    return _result("a data directory other users can write", not refused,
                   err.strip().splitlines()[-1] if refused else
                   f"it started (status {proc.returncode} once stopped): {err[-200:]}")


def _forged_record(srv: Service, tmp: str) -> tuple[dict[str, Any], Service]:
    victim = os.path.join(tmp, "victim")
    os.mkdir(victim)
    with open(os.path.join(victim, "keep.txt"), "w") as f:
        f.write("another user's file")
    srv.stop()
    db = sqlite3.connect(os.path.join(srv.data_dir, "jobs.sqlite"))
    db.execute("INSERT INTO jobs (id, kind, name, state, created, outputs) VALUES "
               "('../../victim', 'script', 'a.py', 'done', 1.0, '[]')")
    db.execute("INSERT INTO jobs (id, kind, name, state, created, outputs) VALUES "
               "('0123456789ab', 'script', 'a.py', 'done', 1.0, '[\"\\\\ud800\"]')")
    db.commit()
    db.close()
    srv = Service(srv.data_dir, "--max-jobs", "1")
    status, _ = srv.call("GET", "/api/jobs")
    purge = srv.call("DELETE", "/api/jobs/..%2F..%2Fvictim?purge=1")[0]
    kept = os.path.exists(os.path.join(victim, "keep.txt"))
    bad = status != 200 or purge < 400 or not kept
    return _result("a forged job record", bad,
                   f"list HTTP {status}, purge HTTP {purge}, victim kept: {kept}" if bad else
                   "records with a path for an id and a surrogate output were left out; "
                   "the list answers; nothing outside was removed"), srv


# -- running them -----------------------------------------------------------------------------


def probes() -> list[dict[str, Any]]:
    """Run every probe against fresh services; one dict per attempt (see the module's
    docstring)."""
    results: list[dict[str, Any]] = []
    tmp = tempfile.mkdtemp(prefix="tilegraph-probes-")
    srv = None

    def attempt(name: str, fn: Callable[[], Any]) -> None:
        try:
            got = fn()
        except Exception as exc:  # a probe that cannot finish must be looked at
            got = _result(name, True, f"the probe did not finish: {type(exc).__name__}: "
                                      f"{exc}")
        results.extend(got if isinstance(got, list) else [got])

    try:
        srv = Service(os.path.join(tmp, "data"), "--max-jobs", "1")
        for name, fn in [("request without a token", _no_token),
                         ("another user's token", _other_token),
                         ("path traversal in names", _traversal),
                         ("bad bodies", _bad_bodies),
                         ("a replaced plan pickle", _replaced_plan),
                         ("a forged events file", _forged_events),
                         ("a forged progress file", _forged_progress)]:
            attempt(name, lambda fn=fn: fn(srv, tmp))
        info = srv.json("GET", "/api/info")
        label = info.get("job_processes", "?").split(",")[0]
        for how in ("end", "cancel"):
            attempt(f"a job grandchild ({how})",
                    lambda how=how: _grandchild(srv, tmp, how, label))
        holder: list[Service] = []

        def record() -> dict[str, Any]:
            got, new = _forged_record(srv, tmp)
            holder.append(new)
            return got

        attempt("a forged job record", record)
        if holder:
            srv = holder[0]
        attempt("a data directory other users can write", lambda: _open_data_dir(tmp))
        srv.stop()
        srv = Service(os.path.join(tmp, "data-nocg"), env={"TILEGRAPH_JOB_CGROUPS": "0"})
        for how in ("end", "cancel"):
            attempt(f"a job grandchild without cgroups ({how})",
                    lambda how=how: _grandchild(srv, tmp, how, "subreaper"))
    finally:
        if srv is not None:
            srv.stop()
        _kill_grandchildren(tmp)
        shutil.rmtree(tmp, ignore_errors=True)
    return results


def _kill_grandchildren(tmp: str) -> None:
    """Kill the probes' grandchildren that a service did not end (each is known by the pid
    file it wrote and names on its command line)."""
    for name in os.listdir(tmp):
        if not (name.startswith("grandchild-") and name.endswith(".pid")):
            continue
        path = os.path.join(tmp, name)
        with contextlib.suppress(OSError, ValueError):
            with open(path) as f:
                pid = int(f.read())
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                mine = path.encode() in f.read()
            if mine:
                os.kill(pid, 9)


def main() -> int:
    results = probes()
    width = max(len(r["probe"]) for r in results)
    print(f"{'probe':<{width}}  succeeded  detail")
    for r in results:
        print(f"{r['probe']:<{width}}  {'YES' if r['succeeded'] else 'no':<9}  {r['detail']}")
    bad = sum(r["succeeded"] for r in results)
    print(f"\n{bad} of {len(results)} probes succeeded (goal: 0)")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
