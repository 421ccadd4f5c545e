"""The HTTP API over a real server on loopback: submit, poll, result, cancel, events,
workers, authentication, body limits, bad input, and persistence across a restart."""

from __future__ import annotations

import http.client
import io
import json
import os
import signal
import time

import numpy as np
import psutil
import pytest
from _service import MAX_BODY, TOKEN, Server

SUM_SCRIPT = """
import sys
import numpy as np
import tilegraph as tg

n = int(sys.argv[1])
for dtype in sys.argv[2:]:
    a = np.arange(n * 7, dtype=dtype).reshape(n, 7)
    x = tg.from_numpy(a, chunks=(4, 3))
    y = (x * 2 + 1).T @ x
    print(dtype, y.sum().compute())
    np.save(f"y-{dtype}.npy", y.compute())
"""

LONG_SCRIPT = """
import time
import tilegraph as tg

n = 400
dsk = {f"t{i}": (time.sleep, 0.05) for i in range(n)}
dsk["all"] = (lambda *parts: len(parts), *[f"t{i}" for i in range(n)])
print(tg.get(dsk, "all"))
"""

FAILING_SCRIPT = """
import numpy as np
import tilegraph as tg

def check(values):
    raise ValueError(f"negative values: {values.min()}")

x = tg.from_numpy(np.arange(10.0) - 5, chunks=4)
check(x.compute())
"""


def submit(server, source, name="job.py", args=(), outputs=()):
    status, body, _ = server.request(
        "POST", "/api/jobs", json.dumps({"script": source, "name": name, "args": list(args),
                                         "outputs": list(outputs)}).encode(),
        "application/json")
    assert status == 201, body
    return json.loads(body)["id"]


def wait(server, job_id, states=("done", "failed", "cancelled"), timeout=60, until=None):
    deadline = time.monotonic() + timeout
    while True:
        job = server.get(f"/api/jobs/{job_id}")
        if job["state"] in states if until is None else until(job):
            return job
        assert time.monotonic() < deadline, f"job still {job['state']}: {job}"
        time.sleep(0.05)


@pytest.fixture(scope="module")
def sum_job(server):
    """A finished job of SUM_SCRIPT on 10 x 7 arrays of two dtypes (four runs)."""
    job_id = submit(server, SUM_SCRIPT, args=["10", "float64", "int32"],
                    outputs=["y-float64.npy", "y-int32.npy"])
    assert server.get(f"/api/jobs/{job_id}")["state"] in ("queued", "running", "done")
    return wait(server, job_id)


def test_submit_poll_result(server, sum_job):
    job = sum_job
    assert job["state"] == "done", job
    assert job["tasks_total"] > 0 and job["tasks_done"] == job["tasks_total"]
    assert job["progress"] == 1.0 and job["runs"] == 4 and job["peak_bytes"] > 0
    assert len(job["plan"]) == 4 and job["plan"][0][0].startswith("plan: ")
    assert job["started"] >= job["created"] and job["finished"] >= job["started"]
    assert job["error"] is None and job["returncode"] == 0
    status, body, _ = server.request("GET", f"/api/jobs/{job['id']}/result")
    assert status == 200
    result = json.loads(body)
    assert result["missing"] == []
    lines = result["stdout"].splitlines()
    for dtype, line in zip(["float64", "int32"], lines, strict=True):
        a = np.arange(70, dtype=dtype).reshape(10, 7)
        expected = (a * 2 + 1).T @ a
        assert line == f"{dtype} {expected.sum()}"
        name = f"y-{dtype}.npy"
        assert result["files"][name]["size"] > 0
        status, raw, _ = server.request("GET", result["files"][name]["url"])
        assert status == 200
        got = np.load(io.BytesIO(raw))
        np.testing.assert_array_equal(got, expected)
        assert got.dtype == expected.dtype
    assert any(j["id"] == job["id"] for j in server.get("/api/jobs"))


def test_job_lists_newest_first_brief_and_limited(server, sum_job):
    full = server.get("/api/jobs")
    assert [j["created"] for j in full] == sorted((j["created"] for j in full), reverse=True)
    brief = server.get("/api/jobs?brief=1&limit=1")
    assert len(brief) == 1 and brief[0]["id"] == full[0]["id"]
    assert "plan" not in brief[0] and "traceback" not in brief[0]
    assert {"state", "progress", "tasks_done", "tasks_total"} <= set(brief[0])
    for query, words in [("limit=0", b"limit must be"), ("limit=x", b"limit must be"),
                         ("brief=yes", b"brief must be 0 or 1")]:
        status, body, _ = server.request("GET", f"/api/jobs?{query}")
        assert status == 400 and words in body


def test_failing_script_traceback_in_record(server):
    job = wait(server, submit(server, FAILING_SCRIPT, name="failing.py"))
    assert job["state"] == "failed"
    assert job["error"] == "ValueError: negative values: -5.0"
    tb = job["traceback"]
    assert tb.startswith("Traceback (most recent call last):")
    assert 'failing.py", line 9, in <module>' in tb and "in check" in tb
    assert "runner.py" not in tb and "runpy" not in tb  # only the user's frames
    assert job["returncode"] == 1
    result = json.loads(server.request("GET", f"/api/jobs/{job['id']}/result")[1])
    assert "ValueError: negative values" in result["stderr"]


def test_script_exit_status_and_missing_output(server):
    job = wait(server, submit(server, "import sys\nprint('bye')\nsys.exit(3)\n",
                              outputs=["never.txt"]))
    assert job["state"] == "failed" and job["returncode"] == 3
    assert job["error"] == "the job's process exited with status 3"
    result = json.loads(server.request("GET", f"/api/jobs/{job['id']}/result")[1])
    assert result["stdout"] == "bye\n" and result["missing"] == ["never.txt"]
    status, _, _ = server.request("GET", f"/api/jobs/{job['id']}/files/never.txt")
    assert status == 404


def test_cancel_a_long_job_mid_run(server):
    job_id = submit(server, LONG_SCRIPT, name="long.py")
    job = wait(server, job_id, until=lambda j: j["tasks_done"] >= 3 or (j["state"] != "running"
               and j["state"] != "queued"))
    assert job["state"] == "running", job
    workers = server.get("/api/workers")
    mine = [w for w in workers if w.get("job") == job_id]
    assert len(mine) == 1 and mine[0]["rss"] > 0 and mine[0]["pid"] > 0
    pid = mine[0]["pid"]
    t0 = time.monotonic()
    status, body, _ = server.request("DELETE", f"/api/jobs/{job_id}")
    assert status == 200
    job = wait(server, job_id, timeout=15)
    assert time.monotonic() - t0 < 5  # Ctrl-C stopped the run; no kill was needed
    assert job["state"] == "cancelled" and job["error"] == "cancelled"
    assert 3 <= job["tasks_done"] < job["tasks_total"] == 401
    assert not psutil.pid_exists(pid)
    assert all(w.get("job") != job_id for w in server.get("/api/workers"))
    # the run itself was cancelled by the executor: its last event says so
    events = _stream(server, job_id)
    ends = [e for e in events if e["type"] == "RunEnd"]
    assert ends and ends[-1]["status"] == "cancelled"
    assert sum(e["type"] == "TaskEnd" for e in events) == job["tasks_done"]
    status, body, _ = server.request("DELETE", f"/api/jobs/{job_id}")  # again: no change
    assert status == 200 and json.loads(body)["state"] == "cancelled"


def _stream(server, job_id, token=TOKEN):
    """Every event of a finished job's Server-Sent Events stream."""
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=30)
    conn.request("GET", f"/api/jobs/{job_id}/events?token={token}")
    resp = conn.getresponse()
    assert resp.status == 200
    assert resp.getheader("content-type").startswith("text/event-stream")
    text = resp.read().decode()
    conn.close()
    events, kinds = [], []
    for message in text.split("\n\n"):
        lines = message.strip().splitlines()
        kind = next((ln[7:] for ln in lines if ln.startswith("event: ")), "message")
        data = "".join(ln[6:] for ln in lines if ln.startswith("data: "))
        kinds.append(kind)
        if kind == "message" and data:
            events.extend(json.loads(data))
    assert kinds[-2:] in (["end", "message"], ["message", "end"]) or "end" in kinds
    return events


def test_event_stream_of_a_job(server, sum_job):
    job = sum_job
    events = _stream(server, job["id"])
    types = [e["type"] for e in events]
    assert types[0] == "RunStart" and types.count("RunStart") == 4
    assert types.count("TaskEnd") == job["tasks_done"]
    assert types[-1] == "RunEnd" and events[-1]["status"] == "done"
    ends = [e for e in events if e["type"] == "TaskEnd"]
    assert all(e["stop"] >= e["start"] and e["colour"].startswith("#") for e in ends)
    assert {e["kind"] for e in ends} >= {"partial"}


@pytest.mark.parametrize("token", [None, "wrong-token-0123456789", TOKEN + "x", ""])
def test_401_without_or_with_a_wrong_token(server, token):
    for method, path in [("GET", "/"), ("GET", "/api/jobs"), ("GET", "/api/workers"),
                         ("GET", "/api/jobs/abc/events"), ("DELETE", "/api/jobs/abc"),
                         ("GET", "/api/openapi.json")]:
        status, body, _ = server.request(method, path, token=token)
        assert (status, body) == (401, b""), path
    before = len(server.get("/api/jobs"))
    status, body, _ = server.request("POST", "/api/jobs", json.dumps(
        {"script": "print(1)"}).encode(), "application/json", token=token)
    assert (status, body) == (401, b"")
    status, body, _ = server.request("GET", f"/api/jobs?token={token or 'x'}", token=None)
    assert (status, body) == (401, b"")
    assert len(server.get("/api/jobs")) == before  # nothing was submitted


def test_the_token_is_printed_with_the_dashboard_url(server):
    assert f"dashboard: {server.url}/?token={TOKEN}\n" in server.printed
    assert "local threads backend, 2 thread(s) per job" in server.printed
    # without TILEGRAPH_TOKEN, a token is made: see test_client.py::test_client_over_tls


def test_token_in_the_query_and_the_dashboard(server):
    status, body, headers = server.request("GET", f"/?token={TOKEN}", token=None)
    assert status == 200 and b"<title>tilegraph service</title>" in body
    assert headers["content-type"].startswith("text/html")
    spec = server.get("/api/openapi.json")
    assert spec["openapi"].startswith("3.") and "/api/jobs/{job_id}/events" in spec["paths"]


def test_oversize_body_is_refused(server):
    # refused from its Content-Length, before the body is sent or read
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=30)
    conn.putrequest("POST", "/api/jobs")
    conn.putheader("Authorization", f"Bearer {TOKEN}")
    conn.putheader("Content-Type", "application/json")
    conn.putheader("Content-Length", str(MAX_BODY + 1))
    conn.endheaders()
    resp = conn.getresponse()
    assert resp.status == 413 and b"larger than the limit of 1000000 bytes" in resp.read()
    conn.close()
    # without a Content-Length (chunked): counted while it is read
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=30)
    chunks = [b"x" * (MAX_BODY // 4)] * 4 + [b"x"]
    conn.request("POST", "/api/jobs", body=iter(chunks), encode_chunked=True,
                 headers={"Authorization": f"Bearer {TOKEN}",
                          "Content-Type": "application/octet-stream"})
    resp = conn.getresponse()
    assert resp.status == 413
    conn.close()
    # at the limit: accepted
    body = json.dumps({"script": "#" * (MAX_BODY - 20)}).encode()
    assert len(body) <= MAX_BODY
    status, reply, _ = server.request("POST", "/api/jobs", body, "application/json")
    assert status == 201
    assert wait(server, json.loads(reply)["id"])["state"] == "done"


@pytest.mark.parametrize("payload, ctype, status, words", [
    ({"name": "a.py"}, "application/json", 400, "'script' must be"),
    ({"script": "print(1)", "name": "../a.py"}, "application/json", 400,
     "name '../a.py' holds a path separator"),
    ({"script": "print(1)", "name": "a.txt"}, "application/json", 400,
     "name must be a file name ending in .py"),
    ({"script": "print(1)", "outputs": ["../../etc/passwd"]}, "application/json", 400,
     "inside the script's directory"),
    ({"script": "print(1)", "args": [1]}, "application/json", 400, "'args' must be"),
    ({"script": "print(1)", "color": 1}, "application/json", 400, "unknown field(s) color"),
    ([1, 2], "application/json", 400, "JSON object"),
    ("not json", "application/json", 400, "JSON"),
    ({"script": "print(1)"}, "text/plain", 415, "application/json"),
    ("", "application/octet-stream", 400, "pickled plan"),
])
def test_bad_submissions_are_refused(server, payload, ctype, status, words):
    body = payload.encode() if isinstance(payload, str) else json.dumps(payload).encode()
    got, reply, _ = server.request("POST", "/api/jobs", body, ctype)
    assert got == status, reply
    assert words in json.loads(reply)["error"]


def test_unknown_job_and_early_result(server):
    for method, path in [("GET", "/api/jobs/nosuchjob"), ("DELETE", "/api/jobs/nosuchjob"),
                         ("GET", "/api/jobs/nosuchjob/result"),
                         ("GET", "/api/jobs/nosuchjob/events")]:
        status, body, _ = server.request(method, path)
        assert status == 404 and b"no job 'nosuchjob'" in body
    job_id = submit(server, "import time\ntime.sleep(30)\n")
    status, body, _ = server.request("GET", f"/api/jobs/{job_id}/result")
    assert status == 409 and b"its result comes when it ends" in body
    server.request("DELETE", f"/api/jobs/{job_id}")
    assert wait(server, job_id)["state"] == "cancelled"


def test_queue_restart_and_stop(tmp_path):
    """One job at a time: a queued job waits and can be cancelled before it starts; after a
    crash (SIGKILL) the restarted service keeps the finished jobs with their results, fails
    the running one with the reason and kills what it left; a clean stop fails the running
    and the queued jobs with their reasons."""
    data = tmp_path / "data"
    srv = Server(data, "--max-jobs", "1")
    done = wait(srv, submit(srv, "print('kept')\n"))
    assert done["state"] == "done"
    running = submit(srv, LONG_SCRIPT, name="long.py")
    queued = submit(srv, "print('never')\n")
    assert srv.get(f"/api/jobs/{queued}")["state"] == "queued"
    status, body, _ = srv.request("DELETE", f"/api/jobs/{queued}")
    assert status == 200 and json.loads(body)["state"] == "cancelled"
    assert json.loads(body)["error"] == "cancelled before it started"
    wait(srv, running, until=lambda j: j["tasks_done"] >= 1)
    pid = srv.get("/api/workers")[0]["pid"]
    srv.stop(signal.SIGKILL)  # no chance to clean up: the job's process is left behind
    assert psutil.pid_exists(pid)
    srv = Server(data, "--max-jobs", "1")
    try:
        jobs = {j["id"]: j for j in srv.get("/api/jobs")}
        assert jobs[done["id"]]["state"] == "done"
        result = json.loads(srv.request("GET", f"/api/jobs/{done['id']}/result")[1])
        assert result["stdout"] == "kept\n"
        assert jobs[queued]["state"] == "cancelled" and jobs[queued]["started"] is None
        lost = jobs[running]
        assert lost["state"] == "failed"
        assert "the service stopped while the job was running" in lost["error"]
        deadline = time.monotonic() + 5
        while psutil.pid_exists(pid) and psutil.Process(pid).status() != "zombie":
            assert time.monotonic() < deadline, "the left-behind job still runs"
            time.sleep(0.05)
        again = submit(srv, LONG_SCRIPT, name="long.py")
        waiting = submit(srv, "print('never')\n")
        wait(srv, again, until=lambda j: j["state"] == "running")
    finally:
        srv.stop()  # Ctrl-C: a clean stop
    srv = Server(data)
    try:
        job = srv.get(f"/api/jobs/{again}")
        assert job["state"] == "failed"
        assert job["error"] == "the service stopped while the job was running"
        job = srv.get(f"/api/jobs/{waiting}")
        assert job["state"] == "failed"
        assert job["error"] == "the service stopped before the job started"
        assert len(srv.get("/api/jobs")) == 5
    finally:
        srv.stop()


def test_serve_refuses_an_open_address_without_tls(tmp_path, capsys):
    from tilegraph.service.server import check_bind, is_loopback

    assert is_loopback("127.0.0.1") and is_loopback("::1") and is_loopback("localhost")
    assert not is_loopback("0.0.0.0") and not is_loopback("example.org")
    with pytest.raises(ValueError, match=r"refusing to serve 0\.0\.0\.0 without TLS"):
        check_bind("0.0.0.0", None, None, insecure=False)
    check_bind("0.0.0.0", None, None, insecure=True)
    with pytest.raises(ValueError, match="both --certfile and --keyfile"):
        check_bind("0.0.0.0", "cert.pem", None, insecure=False)
    with pytest.raises(ValueError, match="no such file"):
        check_bind("0.0.0.0", str(tmp_path / "c.pem"), str(tmp_path / "k.pem"), False)
    from tilegraph.cli import main

    assert main(["serve", "--host", "0.0.0.0", "--local", "--data-dir",
                 str(tmp_path / "d")]) == 2
    assert "refusing to serve 0.0.0.0 without TLS" in capsys.readouterr().err
    assert not (tmp_path / "d").exists()


def test_serve_defaults_to_the_serverless_pool(tmp_path, capsys):
    try:
        import tilegraph.serverless
    except ImportError:
        from tilegraph.cli import main

        assert main(["serve", "--data-dir", str(tmp_path / "d")]) == 2
        err = capsys.readouterr().err
        assert "the serverless engine is unavailable" in err and "--local" in err
        return
    import tilegraph as tg

    srv = Server(tmp_path / "data", "--workers", "2", local=False)
    try:
        info = srv.get("/api/info")
        assert info["pool"] == "serverless" and "redis unix://" in info["description"]
        job = wait(srv, submit(srv, SUM_SCRIPT, args=["6", "float64"]))
        assert job["state"] == "done", job
        a = np.arange(42.0).reshape(6, 7)
        stdout = json.loads(srv.request("GET", f"/api/jobs/{job['id']}/result")[1])["stdout"]
        assert stdout.splitlines()[0] == f"float64 {((a * 2 + 1).T @ a).sum()}"
        # every task of the plans, the pool's included (a last event may come after the
        # run has returned, and is not counted)
        assert job["tasks_total"] - 1 <= job["tasks_done"] <= job["tasks_total"]
        assert job["tasks_total"] > 40 and job["progress"] == 1.0
        workers = srv.get("/api/workers")
        assert len(workers) >= 2 and all(w["pid"] > 0 and w["rss"] > 0 for w in workers)
        assert set(workers[0]) >= {"id", "pid", "host", "task", "lease_expires", "rss",
                                   "started"}
        client = tg.Client(srv.url, token=TOKEN)
        x = tg.from_numpy(a, chunks=(4, 3))
        (gram,) = client.compute(x.T @ x)
        np.testing.assert_allclose(gram, a.T @ a)
        # cancel mid-run: the pool's workers stop taking its tasks
        long_id = submit(srv, LONG_SCRIPT, name="long.py")
        wait(srv, long_id, until=lambda j: j["tasks_done"] >= 3 or j["state"] in
             ("done", "failed", "cancelled"))
        srv.request("DELETE", f"/api/jobs/{long_id}")
        job = wait(srv, long_id, timeout=20)
        assert job["state"] == "cancelled" and job["tasks_done"] < 401
        deadline = time.monotonic() + 10
        while any(w["task"] for w in srv.get("/api/workers")):
            assert time.monotonic() < deadline, srv.get("/api/workers")
            time.sleep(0.1)
    finally:
        srv.stop()


def test_pool_and_app_reject_bad_settings(tmp_path):
    from tilegraph.service.app import create_app
    from tilegraph.service.jobs import JobManager
    from tilegraph.service.pool import LocalPool, make_pool

    with pytest.raises(ValueError, match="workers must be a positive integer"):
        LocalPool(0)
    with pytest.raises(ValueError, match="do not go with --local"):
        make_pool(True, redis="redis://x")
    with pytest.raises(ValueError, match="at least 8 characters"):
        create_app(str(tmp_path), LocalPool(1), "short")
    with pytest.raises(ValueError, match="max_body must be"):
        create_app(str(tmp_path), LocalPool(1), TOKEN, max_body=0)
    with pytest.raises(ValueError, match="max_jobs must be"):
        JobManager(str(tmp_path), LocalPool(1), max_jobs=0)
    assert not os.path.exists(tmp_path / "jobs.sqlite")  # refused before anything is made


def test_one_service_per_data_directory(server, capsys):
    from tilegraph.cli import main

    assert main(["serve", "--local", "--port", str(server.port + 1 if server.port < 65535
                                                   else 1024),
                 "--data-dir", str(server.data_dir)]) == 2
    err = capsys.readouterr().err
    assert "another service uses the data directory" in err and "--data-dir" in err
    assert server.get("/api/info")["pool"] == "local"  # the first one is untouched


# -- resuming a stream, removing jobs, keeping the newest -------------------------------------


def _messages(server, job_id, headers=None, query=""):
    """(id, events) of every data message of a finished job's stream."""
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=30)
    conn.request("GET", f"/api/jobs/{job_id}/events?token={TOKEN}{query}",
                 headers=headers or {})
    resp = conn.getresponse()
    text = resp.read().decode()
    conn.close()
    if resp.status != 200:
        return resp.status, text
    out = []
    for message in text.split("\n\n"):
        lines = message.strip().splitlines()
        data = "".join(ln[6:] for ln in lines if ln.startswith("data: "))
        ids = [ln[4:] for ln in lines if ln.startswith("id: ")]
        if ids:
            out.append((int(ids[0]), json.loads(data)))
    return resp.status, out


def test_event_stream_resumes_after_the_last_event_id(server, sum_job):
    status, full = _messages(server, sum_job["id"])
    assert status == 200 and full
    everything = [e for _, events in full for e in events]
    raw = (server.data_dir / "jobs" / sum_job["id"] / "events.jsonl").read_bytes()
    assert full[-1][0] == len(raw)   # the last id is the end of the file
    lines = raw.splitlines(keepends=True)
    half = len(lines) // 2
    cut = sum(len(ln) for ln in lines[:half])   # the offset where event ``half`` starts
    # an EventSource reconnecting sends the last id it saw: only the rest comes
    status, rest = _messages(server, sum_job["id"], {"Last-Event-ID": str(cut)})
    assert status == 200 and [e for _, ev in rest for e in ev] == everything[half:]
    # an offset inside an event starts at the next one; beyond the end, nothing is left
    status, later = _messages(server, sum_job["id"], query=f"&from={cut + 3}")
    assert [e for _, ev in later for e in ev] == everything[half + 1:]
    status, none = _messages(server, sum_job["id"], query="&from=999999999")
    assert status == 200 and none == []
    status, text = _messages(server, sum_job["id"], query="&from=-3")
    assert status == 400 and "byte offset" in text


def test_purge_removes_a_finished_job_and_refuses_a_running_one(server, client):
    done = wait(server, submit(server, "print('bye')\n"))
    job_dir = server.data_dir / "jobs" / done["id"]
    assert job_dir.is_dir()
    status, body, _ = server.request("DELETE", f"/api/jobs/{done['id']}?purge=2")
    assert status == 400 and b"purge must be 0 or 1" in body
    client.purge(done["id"])
    assert not job_dir.exists()
    status, _, _ = server.request("GET", f"/api/jobs/{done['id']}")
    assert status == 404
    assert done["id"] not in {j["id"] for j in server.get("/api/jobs")}
    running = submit(server, LONG_SCRIPT, name="long.py")
    wait(server, running, until=lambda j: j["state"] == "running")
    status, body, _ = server.request("DELETE", f"/api/jobs/{running}?purge=1")
    assert status == 409 and b"cancel it and wait for it to end" in body
    server.request("DELETE", f"/api/jobs/{running}")
    wait(server, running)
    status, _, _ = server.request("DELETE", f"/api/jobs/{running}?purge=1")
    assert status == 204


def test_only_the_newest_finished_jobs_are_kept(tmp_path):
    data = tmp_path / "data"
    srv = Server(data, "--keep-jobs", "2", "--max-jobs", "1")
    try:
        ids = [wait(srv, submit(srv, f"print({i})\n"))["id"] for i in range(3)]
        listed = [j["id"] for j in srv.get("/api/jobs")]
        assert listed == [ids[2], ids[1]]
        assert not (data / "jobs" / ids[0]).exists()
        assert (data / "jobs" / ids[1]).is_dir()
        result = json.loads(srv.request("GET", f"/api/jobs/{ids[1]}/result")[1])
        assert result["stdout"] == "1\n"
    finally:
        srv.stop()
    srv = Server(data, "--keep-jobs", "1")   # a smaller limit applies at start
    try:
        assert [j["id"] for j in srv.get("/api/jobs")] == [ids[2]]
        assert not (data / "jobs" / ids[1]).exists()
    finally:
        srv.stop()


def test_declared_outputs_do_not_follow_links_out_of_the_job_directory(server, tmp_path):
    secret = tmp_path / "secret.txt"
    secret.write_text("not for download")
    script = (f"import os\nos.symlink({str(secret)!r}, 'out.bin')\n"
              "open('real.txt', 'w').write('ok')\nos.symlink('real.txt', 'inner.txt')\n")
    job = wait(server, submit(server, script, outputs=["out.bin", "real.txt", "inner.txt"]))
    assert job["state"] == "done", job
    result = json.loads(server.request("GET", f"/api/jobs/{job['id']}/result")[1])
    assert sorted(result["files"]) == ["inner.txt", "real.txt"]
    assert result["missing"] == ["out.bin"]
    status, body, _ = server.request("GET", f"/api/jobs/{job['id']}/files/out.bin")
    assert status == 403 and b"leads out of the job's directory" in body
    status, body, _ = server.request("GET", f"/api/jobs/{job['id']}/files/inner.txt")
    assert status == 200 and body == b"ok"


def test_processes_a_job_starts_end_with_it(server, tmp_path):
    import psutil

    pids = tmp_path / "pids.txt"
    script = (
        "import os, subprocess, sys, time\n"
        "a = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(120)'])\n"
        "b = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(120)'],\n"
        "                     start_new_session=True)\n"
        "c = os.fork()\n"
        "if c == 0:\n"
        "    time.sleep(120)\n"
        "    os._exit(0)\n"
        f"open({str(pids)!r}, 'w').write(f'{{a.pid}} {{b.pid}} {{c}}')\n"
        "print('started')\n")
    job = wait(server, submit(server, script))
    assert job["state"] == "done", job
    started = [int(p) for p in pids.read_text().split()]
    deadline = time.monotonic() + 10

    def alive(pid):
        try:
            return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
        except psutil.NoSuchProcess:
            return False

    while any(alive(p) for p in started) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not [p for p in started if alive(p)]
