"""The service against a hostile local user and a careless one, over a real server on
loopback: bad requests leave nothing behind, stored records and a job's files are not
trusted, a replaced plan is never unpickled, the data directory is private, and every
process a job starts ends with it."""

from __future__ import annotations

import json
import os
import pickle
import sqlite3
import stat
import sys
import time
from pathlib import Path

import psutil
import pytest
from _service import Server
from test_api import submit, wait

from tilegraph.service import protect, reaper


def _state(server):
    """The job ids listed and the entries of the jobs directory."""
    return ({j["id"] for j in server.get("/api/jobs")},
            set(os.listdir(server.data_dir / "jobs")))


def _post(server, body, ctype="application/json", query=""):
    status, reply, _ = server.request("POST", "/api/jobs" + query, body, ctype)
    return status, json.loads(reply) if reply else None


def _script(**fields):
    return json.dumps({"script": "print(1)", **fields}).encode()


LONG = "a" * 300 + ".py"
WIDE = "\u00e9" * 127 + ".py"  # 257 bytes of UTF-8 in 130 characters

BAD_BODIES = [
    (b'{"script": ', "body", "not valid JSON"),
    (b"[" * 100_000 + b"]" * 100_000, "body", "nests more than 16 levels deep"),
    (b'{"script": "x", "args": ' + b"[" * 20 + b"]" * 20 + b"}", "body",
     "nests more than 16 levels deep"),
    (b'{"script": "\xff\xfe"}', "body", "not UTF-8"),
    (b'"just a string"', "body", "JSON object"),
    (_script(name="a\x00.py"), "name", "control character (U+0000)"),
    (_script(name="a\x1b.py"), "name", "control character (U+001B)"),
    (b'{"script": "print(1)", "name": "\\ud800.py"}', "name", "lone surrogate (U+D800)"),
    (_script(name=LONG), "name", "303 bytes long in UTF-8; a name may have at most 255"),
    (_script(name=WIDE), "name", "257 bytes long"),
    (_script(name="sub/a.py"), "name", "path separator"),
    (_script(name=".hidden.py"), "name", "ending in .py"),
    (_script(name=5), "name", "must be a string"),
    (_script(outputs=["a\x00b"]), "outputs[0]", "control character (U+0000)"),
    (b'{"script": "print(1)", "outputs": ["ok", "\\udc80"]}', "outputs[1]",
     "lone surrogate (U+DC80)"),
    (_script(outputs=["d/" + "x" * 300]), "outputs[0]", "a name may have at most 255"),
    (_script(outputs=["/".join(["x" * 200] * 25)]), "outputs[0]",
     "a path may have at most 4096"),
    (_script(outputs=["../x"]), "outputs[0]", "inside the script's directory"),
    (_script(outputs=["a/../../x"]), "outputs[0]", "inside the script's directory"),
    (_script(outputs=["/etc/passwd"]), "outputs[0]", "not an absolute path"),
    (_script(outputs=[""]), "outputs[0]", "is empty"),
    (_script(outputs=[7]), "outputs[0]", "outputs[0] is int"),
    (_script(outputs="out.npy"), "outputs", "must be a list"),
    (_script(outputs=["o"] * 1025), "outputs", "at most 1024"),
    (_script(args=["ok", "a\x00"]), "args[1]", "NUL character"),
    (b'{"script": "print(1)", "args": ["\\ud83d"]}', "args[0]", "lone surrogate"),
    (_script(args=["x"] * 5000), "args", "at most 4096"),
    (_script(args=["x" * 300_000]), "args", "at most 262144"),
    (_script(args=[None]), "args[0]", "args[0] is NoneType"),
    (b'{"script": "print(\'\\ud800\')"}', "script", "lone surrogate"),
    (b'{"script": 5}', "script", "non-empty string"),
    (_script(**{"\ud800": 1}), "\ud800", "unknown field(s)"),
]


@pytest.mark.parametrize("body, field, words", BAD_BODIES,
                         ids=[f"{i}-{b[1]}" for i, b in enumerate(BAD_BODIES)])
def test_a_bad_submission_is_a_400_naming_the_field_and_leaves_nothing(server, body, field,
                                                                        words):
    before = _state(server)
    status, reply = _post(server, body)
    assert status == 400, reply
    assert reply["field"] == field and words in reply["error"], reply
    assert _state(server) == before   # no record, no directory (not even a hidden one)
    status, _, _ = server.request("GET", "/api/jobs")
    assert status == 200


@pytest.mark.parametrize("query, words", [
    ("?name=a%2Fb", "path separator"),
    ("?name=%00", "control character (U+0000)"),
    ("?name=" + "n" * 256, "256 bytes long"),
    ("?name=..", "not a file name"),
])
def test_a_bad_plan_name_is_a_400_and_leaves_nothing(server, query, words):
    before = _state(server)
    status, reply = _post(server, b"\x80\x05N.", "application/octet-stream", query)
    assert status == 400 and reply["field"] == "name" and words in reply["error"], reply
    assert _state(server) == before


def test_a_name_at_the_limit_is_taken(server):
    name = "n" * (protect.MAX_NAME_BYTES - 3) + ".py"
    job = wait(server, submit(server, "open('o' * 255, 'w').write('x')\n", name=name,
                              outputs=["o" * 255]))
    assert job["state"] == "done" and job["name"] == name, job
    status, body, _ = server.request("GET", f"/api/jobs/{job['id']}/files/{'o' * 255}")
    assert (status, body) == (200, b"x")


@pytest.fixture(scope="module")
def done_job(server):
    """A finished job that ran one computation (its events file is not empty)."""
    source = ("import numpy as np, tilegraph as tg\n"
              "print(tg.from_numpy(np.arange(30.0), chunks=7).sum().compute())\n")
    job = wait(server, submit(server, source, name="small.py", outputs=["none.txt"]))
    assert job["state"] == "done", job
    return job


def test_bad_queries_and_paths_are_400s(server, done_job):
    job_id = done_job["id"]
    for path, field in [("/api/jobs?limit=%C2%B2", "limit"),
                        ("/api/jobs?limit=" + "9" * 30, "limit"),
                        (f"/api/jobs/{job_id}/events?from=1" + "0" * 30, "from"),
                        (f"/api/jobs/{job_id}/files/a%00b", "name"),
                        (f"/api/jobs/{job_id}/files/x%1By", "name")]:
        status, body, _ = server.request("GET", path)
        assert status == 400 and json.loads(body)["field"] == field, (path, body)
    for path in (f"/api/jobs/{job_id}/files/..%2F..%2Fjobs.sqlite",
                 f"/api/jobs/{job_id}/files/work/../../../jobs.sqlite"):
        status, body, _ = server.request("GET", path)
        assert status in (400, 404) and b"SQLite" not in body, (path, body)


# -- what a job's process writes is not trusted ----------------------------------------------


FORGE_PROGRESS = r"""
import json, os, sys, time
path = os.environ["TILEGRAPH_PROGRESS"]
forged = {"runs": 2**70, "tasks_total": "many", "tasks_done": -5, "held_bytes": 1.5,
          "peak_bytes": True, "spilled_bytes": 7, "current": {"0": "\ud800 gemm"},
          "plan": [["x" * 10000], ["ok"]] * 30}
with open(path, "w") as f:
    json.dump(forged, f)
time.sleep(1.0)  # the service reads it while the job runs
with open(path, "w") as f:
    f.write("[" * 50000 + "]" * 50000)
time.sleep(0.6)
with open(path, "w") as f:
    f.write(" " * (5 << 20))
time.sleep(0.6)
with open(os.environ["TILEGRAPH_ERROR_FILE"], "w") as f:
    json.dump({"error": ["not", "text"], "traceback": 5}, f)
sys.exit(1)
"""


def test_a_forged_progress_and_error_file_are_checked_field_by_field(server):
    job = wait(server, submit(server, FORGE_PROGRESS, name="forge.py"))
    assert job["state"] == "failed"
    # only the right fields were taken: counts that are integers >= 0, mended text
    assert job["runs"] == 0 and job["tasks_total"] == 0 and job["tasks_done"] == 0
    assert job["held_bytes"] == 0 and job["peak_bytes"] == 0 and job["spilled_bytes"] == 7
    assert len(job["plan"]) == 20 and max(len(ln) for s in job["plan"] for ln in s) <= 4000
    # the error file did not hold text: the exit status speaks instead
    assert job["error"] == "the job's process exited with status 1"
    status, body, _ = server.request("GET", "/api/jobs")
    assert status == 200 and any(j["id"] == job["id"] for j in json.loads(body))


def test_forged_events_are_not_streamed(server, done_job):
    from test_api import _messages

    path = server.data_dir / "jobs" / done_job["id"] / "events.jsonl"
    status, before = _messages(server, done_job["id"])
    assert status == 200
    original = [e for _, events in before for e in events]
    assert original and original[0]["type"] == "RunStart"
    size = path.stat().st_size
    with open(path, "ab") as f:
        f.write(b'{"type":"Injected"}\r\nevent: end\r\ndata: [1]\n')  # splits an SSE event
        f.write(b'not json\n[1, 2]\n{"no": "type"}\n{"type": 5}\n\n')
        f.write(b"[" * 50_000 + b"]" * 50_000 + b"\n")
        f.write(b'{"type":"' + b"x" * (3 << 20) + b'"}\n')   # longer than an event may be
        f.write(b'{"type":"Forged","note":"\\ud800"}\n')
    try:
        status, after = _messages(server, done_job["id"])
        assert status == 200
        events = [e for _, ev in after for e in ev]
        assert events[:len(original)] == original
        assert [e["type"] for e in events[len(original):]] == ["Forged"]
        assert events[-1]["note"] == "\ud800"   # passed on escaped, as JSON allows
    finally:
        with open(path, "r+b") as f:
            f.truncate(size)


# -- stored records are not trusted ------------------------------------------------------------


def test_forged_records_are_left_out_and_never_break_the_list(tmp_path):
    data = tmp_path / "data"
    srv = Server(data)
    try:
        kept = wait(srv, submit(srv, "print('kept')\n"))["id"]
    finally:
        srv.stop()
    victim = tmp_path / "victim"
    victim.mkdir()
    (victim / "precious.txt").write_text("keep me")
    db = sqlite3.connect(data / "jobs.sqlite")
    cols = [r[1] for r in db.execute("PRAGMA table_info(jobs)")]

    def row(**values):
        base = dict.fromkeys(cols)
        base.update(id="0123456789ab", kind="script", name="a.py", state="done",
                    created=time.time(), tasks_done=0, tasks_total=0, runs=0, held_bytes=0,
                    peak_bytes=0, spilled_bytes=0, plan="[]", args="[]", outputs="[]")
        base.update(values)
        db.execute(f"INSERT INTO jobs ({', '.join(base)}) VALUES "
                   f"({', '.join('?' for _ in base)})", list(base.values()))

    row(id="../../victim", state="done")                       # a path, not an id
    row(id="00000000000a", outputs='["\\ud800"]')               # a surrogate output
    row(id="00000000000b", state="exploded")
    row(id="00000000000c", plan="[" * 5000 + "]" * 5000)
    row(id="00000000000d", name="../../x.py")
    row(id="00000000000e", tasks_done="many")
    row(id="00000000000f", created=None)
    row(id="000000000010", args='[1]')
    row(id="000000000011", error="ok \udcff".encode("utf-8", "surrogateescape"))   # a BLOB
    db.execute("INSERT INTO jobs (id, kind, name, state, created, error) VALUES "
               "('000000000012', 'script', 'b.py', 'failed', 1.0, CAST(x'6869ff' AS TEXT))")
    db.commit()
    db.close()
    srv = Server(data)
    try:
        status, body, _ = srv.request("GET", "/api/jobs")
        assert status == 200
        listed = {j["id"]: j for j in json.loads(body)}
        # the valid ones, the one with bad UTF-8 text mended
        assert set(listed) == {kept, "000000000012"}
        assert listed["000000000012"]["error"] == "hi\ufffd"
        log = srv.log_path.read_text()
        for bad in ("'../../victim'", "'00000000000a'", "'00000000000b'", "'00000000000c'",
                    "'00000000000d'", "'00000000000e'", "'00000000000f'", "'000000000010'",
                    "'000000000011'"):
            assert f"is left out: {bad}" in log, bad
        assert "id must be 12 hexadecimal digits" in log and "lone surrogate" in log
        status, _, _ = srv.request("DELETE", "/api/jobs/..%2F..%2Fvictim?purge=1")
        assert status == 404
        assert (victim / "precious.txt").read_text() == "keep me"
    finally:
        srv.stop()


# -- plans ------------------------------------------------------------------------------------


class Marker:
    """A pickle that makes a directory when it is unpickled."""

    def __init__(self, path):
        self.path = str(path)

    def __reduce__(self):
        return os.mkdir, (self.path,)


BLOCKER = """
import os, sys, time
deadline = time.time() + 60
while not os.path.exists(sys.argv[1]) and time.time() < deadline:
    time.sleep(0.02)
"""


def _plan_payload():
    import numpy as np

    import tilegraph as tg
    from tilegraph.array.lowering import plan_arrays
    from tilegraph.service.client import _dumps

    x = tg.from_numpy(np.arange(12.0).reshape(3, 4), chunks=(2, 3))
    return _dumps(plan_arrays([(x * 2).sum()._compute_target()]))


def test_a_plan_replaced_before_it_runs_is_never_unpickled(tmp_path):
    data = tmp_path / "data"
    srv = Server(data, "--max-jobs", "1")
    try:
        go = tmp_path / "go"
        blocker = submit(srv, BLOCKER, args=[str(go)])
        wait(srv, blocker, until=lambda j: j["state"] == "running")
        payload = _plan_payload()
        ids = []
        for _ in range(3):
            status, reply = _post(srv, payload, "application/octet-stream")
            assert status == 201
            ids.append(reply["id"])
        plans = [data / "jobs" / i / "plan.pkl" for i in ids]
        assert all(stat.S_IMODE(p.stat().st_mode) == 0o600 for p in plans)
        assert stat.S_IMODE((data / "jobs" / ids[0]).stat().st_mode) == 0o700
        markers = [tmp_path / f"pwned-{i}" for i in range(3)]
        # 1: a bare pickle in its place
        plans[0].write_bytes(pickle.dumps(Marker(markers[0])))
        # 2: the right size, a forged MAC, the attacker's pickle (unpickling stops at its end)
        size = plans[1].stat().st_size
        evil = pickle.dumps(Marker(markers[1]))
        plans[1].write_bytes(protect.PLAN_MAGIC + b"\0" * 32 + evil
                             + b" " * (size - protect.PLAN_HEADER - len(evil)))
        # 3: a link to a file of the attacker's
        theirs = tmp_path / "theirs.pkl"
        theirs.write_bytes(pickle.dumps(Marker(markers[2])))
        plans[2].unlink()
        plans[2].symlink_to(theirs)
        go.touch()
        jobs = [wait(srv, i) for i in ids]
        for job, plan, marker in zip(jobs, plans, markers, strict=True):
            assert job["state"] == "failed", job
            assert str(plan) in job["error"] and "PlanRejected" in job["error"], job
            assert not marker.exists()
        assert "not the" in jobs[0]["error"] and "it was changed" in jobs[0]["error"]
        assert "fails its MAC check" in jobs[1]["error"]
        assert "a link is refused" in jobs[2]["error"]
        # (an untouched plan runs: test_a_result_replaced_by_a_link_is_not_served)
    finally:
        srv.stop()


def test_open_plan_checks_the_mac_the_job_and_the_size(tmp_path):
    key = protect.new_secret()
    payload = pickle.dumps({"plan": [1, 2, 3]})
    path = tmp_path / "plan.pkl"
    path.write_bytes(protect.seal_plan(key, "aaaaaaaaaaaa", payload))
    assert protect.open_plan(str(path), key, "aaaaaaaaaaaa", len(payload)) == payload
    with pytest.raises(protect.PlanRejected, match="fails its MAC check for job bbbb"):
        protect.open_plan(str(path), key, "bbbbbbbbbbbb", len(payload))  # another job's
    with pytest.raises(protect.PlanRejected, match="fails its MAC check"):
        protect.open_plan(str(path), protect.new_secret(), "aaaaaaaaaaaa", len(payload))
    with pytest.raises(protect.PlanRejected, match=f"{path} has .* bytes, not the"):
        protect.open_plan(str(path), key, "aaaaaaaaaaaa", len(payload) + 1)
    flipped = bytearray(path.read_bytes())
    flipped[-2] ^= 1
    path.write_bytes(bytes(flipped))
    with pytest.raises(protect.PlanRejected, match="fails its MAC check"):
        protect.open_plan(str(path), key, "aaaaaaaaaaaa", len(payload))
    path.write_bytes(b"X" * len(flipped))
    with pytest.raises(protect.PlanRejected, match="does not carry the service's seal"):
        protect.open_plan(str(path), key, "aaaaaaaaaaaa", len(payload))
    with pytest.raises(protect.PlanRejected, match="cannot be opened"):
        protect.open_plan(str(tmp_path / "none.pkl"), key, "aaaaaaaaaaaa", 1)


def test_the_runner_refuses_a_plan_without_the_mac(tmp_path, monkeypatch):
    from tilegraph.service import runner

    marker = tmp_path / "pwned"
    plan = tmp_path / "plan.pkl"
    evil = pickle.dumps(Marker(marker))
    plan.write_bytes(evil)
    monkeypatch.setenv("TILEGRAPH_ERROR_FILE", str(tmp_path / "error.json"))
    monkeypatch.delenv("TILEGRAPH_EVENTS", raising=False)
    r, w = os.pipe()
    os.write(w, protect.new_secret())
    os.close(w)
    code = runner.main(["--job", "aaaaaaaaaaaa", "--key-fd", str(r), "--plan-bytes",
                        str(len(evil) - protect.PLAN_HEADER), "compute", str(plan),
                        str(tmp_path / "out.npz")])
    assert code == 1 and not marker.exists()
    error = json.loads((tmp_path / "error.json").read_text())["error"]
    assert error.startswith("PlanRejected: ") and str(plan) in error
    assert runner.main(["compute", str(plan), "out.npz"]) == 2   # no MAC settings: refused


# -- the data directory -----------------------------------------------------------------------


def _serve(tmp_path, data, capsys):
    from tilegraph.cli import main

    assert main(["serve", "--local", "--port", "1", "--data-dir", str(data)]) == 2
    return capsys.readouterr().err


def test_a_data_directory_others_can_write_is_refused(tmp_path, capsys):
    data = tmp_path / "open"
    data.mkdir()
    data.chmod(0o777)
    err = _serve(tmp_path, data, capsys)
    assert f"the data directory {data} is writable by other users (mode 0777)" in err
    assert f"chmod 700 {data}" in err
    assert os.listdir(data) == []   # nothing was made in it
    data.chmod(0o770)
    assert "(mode 0770)" in _serve(tmp_path, data, capsys)


@pytest.mark.skipif(os.geteuid() != 0, reason="giving a directory to another user needs root")
def test_a_data_directory_of_another_user_is_refused(tmp_path, capsys):
    data = tmp_path / "theirs"
    data.mkdir(mode=0o700)
    os.chown(data, 65534, 65534)
    err = _serve(tmp_path, data, capsys)
    assert f"the data directory {data} belongs to uid 65534" in err
    parent = tmp_path / "shared"
    parent.mkdir()
    parent.chmod(0o777)
    err = _serve(tmp_path, parent / "data", capsys)
    assert f"{parent}, a parent of the data directory" in err and "mode 0777" in err
    assert not (parent / "data").exists()
    parent.chmod(0o1777)   # the sticky bit: others cannot replace what is ours
    assert protect.private_data_dir(str(parent / "data")) == str(parent / "data")


def test_a_data_directory_is_made_private(tmp_path):
    made = tmp_path / "new"
    assert protect.private_data_dir(str(made)) == str(made)
    assert stat.S_IMODE(made.stat().st_mode) == 0o700
    readable = tmp_path / "readable"
    readable.mkdir(mode=0o755)
    readable.chmod(0o755)
    protect.private_data_dir(str(readable))
    assert stat.S_IMODE(readable.stat().st_mode) == 0o700
    link = tmp_path / "link"
    link.symlink_to(made)
    with pytest.raises(ValueError, match="is not a directory"):
        protect.private_data_dir(str(link))


# -- every process of a job ends with it ------------------------------------------------------


ESCAPE = """
import os, signal, sys, time
pidfile, how = sys.argv[1], sys.argv[2]
if how == "stubborn":
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
if os.fork() == 0:
    if os.fork() == 0:   # the grandchild: a session of its own, an empty environment
        os.setsid()
        code = ("import os, time\\n"
                f"open({pidfile!r} + '.tmp', 'w').write(str(os.getpid()))\\n"
                f"os.rename({pidfile!r} + '.tmp', {pidfile!r})\\n"
                "time.sleep(300)\\n")
        os.execve(sys.executable, [sys.executable, "-c", code], {})
    os._exit(0)
os.wait()
while not os.path.exists(pidfile):
    time.sleep(0.01)
print("escaped")
if how == "end":  # ends once the test has seen the grandchild escape (not before)
    deadline = time.monotonic() + 60
    while not os.path.exists(pidfile + ".seen") and time.monotonic() < deadline:
        time.sleep(0.01)
else:
    time.sleep(300)
"""


def _gone_soon(pid, seconds=5.0):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            if psutil.Process(pid).status() == psutil.STATUS_ZOMBIE:
                return True
        except psutil.NoSuchProcess:
            return True
        time.sleep(0.05)
    return False


def _escape(server, tmp_path, how):
    pidfile = tmp_path / f"grandchild-{how}.pid"
    job_id = submit(server, ESCAPE, name="escape.py", args=[str(pidfile), how])
    deadline = time.monotonic() + 30
    while not pidfile.exists():
        assert time.monotonic() < deadline, server.get(f"/api/jobs/{job_id}")
        time.sleep(0.02)
    pid = int(pidfile.read_text())
    proc = psutil.Process(pid)
    assert proc.environ() == {} and os.getsid(pid) == pid   # it did escape its job's session
    (tmp_path / f"grandchild-{how}.pid.seen").write_text("")
    if how == "end":
        job = wait(server, job_id)
        assert job["state"] == "done", job
    else:
        status, _, _ = server.request("DELETE", f"/api/jobs/{job_id}")
        assert status == 200
        job = wait(server, job_id, timeout=30)
        assert job["state"] == "cancelled", job
    gone = _gone_soon(pid)
    if not gone:
        proc.kill()   # not left behind by a failing test
    assert gone, f"the job's grandchild {pid} survived its job ({how})"


@pytest.fixture(scope="module")
def subreaper_server(tmp_path_factory):
    """A service that may not make cgroups: the runner is the subreaper of its job."""
    srv = Server(tmp_path_factory.mktemp("subreaper") / "data",
                 env={reaper.CGROUP_ENV: "0"})
    yield srv
    srv.stop()


def test_the_service_says_how_it_holds_a_job_s_processes(server, subreaper_server):
    info = server.get("/api/info")
    if reaper.cgroup_parent() is not None:   # this process may make cgroups: so may it
        assert info["job_processes"].startswith("cgroup v2 per job"), info
    assert subreaper_server.get("/api/info")["job_processes"].startswith(
        "runner as child subreaper")


@pytest.mark.parametrize("how", ["end", "cancel"])
def test_a_grandchild_in_its_own_session_ends_with_its_job(server, tmp_path, how):
    _escape(server, tmp_path, how)


@pytest.mark.parametrize("how", ["end", "cancel"])
def test_a_grandchild_ends_with_its_job_without_cgroups(subreaper_server, tmp_path, how):
    _escape(subreaper_server, tmp_path, how)


@pytest.mark.heavy
def test_a_grandchild_of_a_job_killed_by_sigkill_ends_without_cgroups(subreaper_server,
                                                                      tmp_path):
    # the job ignores Ctrl-C and SIGTERM: its runner dies by SIGKILL, without cleaning up;
    # the service ends what it saw of its descendants
    _escape(subreaper_server, tmp_path, "stubborn")


def test_no_cgroup_of_a_job_is_left(server):
    parent = reaper.cgroup_parent()
    if parent is None:
        pytest.skip("no cgroup v2 may be made here")
    prefix = reaper.cgroup_prefix(str(server.data_dir))
    running = {j["id"] for j in server.get("/api/jobs") if j["state"] == "running"}
    left = [n for n in os.listdir(parent) if n.startswith(prefix)
            and n[len(prefix):] not in running]
    assert left == []


def test_the_runner_joins_its_cgroup_before_the_script_runs(tmp_path):
    parent = reaper.cgroup_parent()
    if parent is None:
        pytest.skip("no cgroup v2 may be made here")
    import subprocess

    group = Path(parent) / f"tilegraph-test-{os.getpid()}"
    group.mkdir()
    try:
        (tmp_path / "s.py").write_text("print(open('/proc/self/cgroup').read())\n")
        out = subprocess.run([sys.executable, "-m", "tilegraph.service.runner", "--cgroup",
                              str(group), "script", "s.py"], cwd=tmp_path,
                             capture_output=True, text=True, timeout=60)
        assert out.returncode == 0, out.stderr
        assert any(ln.startswith("0::") and ln.endswith("/" + group.name)
                   for ln in out.stdout.splitlines()), out.stdout
        bad = subprocess.run([sys.executable, "-m", "tilegraph.service.runner", "--cgroup",
                              str(tmp_path / "nocgroup"), "script", "s.py"], cwd=tmp_path,
                             capture_output=True, text=True, timeout=60,
                             env={**os.environ, "TILEGRAPH_ERROR_FILE":
                                  str(tmp_path / "e.json")})
        assert bad.returncode == 2 and bad.stdout == ""   # the script never ran
        assert "cannot join the job's cgroup" in json.loads(
            (tmp_path / "e.json").read_text())["error"]
    finally:
        reaper.kill_cgroup(str(group))


def test_a_result_replaced_by_a_link_is_not_served(server, tmp_path):
    import io

    import numpy as np

    status, reply = _post(server, _plan_payload(), "application/octet-stream")
    assert status == 201
    job = wait(server, reply["id"])
    assert job["state"] == "done", job
    status, body, _ = server.request("GET", f"/api/jobs/{job['id']}/result")
    assert status == 200
    with np.load(io.BytesIO(body), allow_pickle=False) as z:
        assert float(z["arr_0"]) == np.arange(12.0).sum() * 2
    secret = tmp_path / "secret.bin"
    secret.write_bytes(b"another user's data")
    result = server.data_dir / "jobs" / job["id"] / "result.npz"
    result.unlink()
    result.symlink_to(secret)
    status, body, _ = server.request("GET", f"/api/jobs/{job['id']}/result")
    assert status == 404 and b"another user's data" not in body
