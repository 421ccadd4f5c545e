"""A job's process, in-process: the JSON-lines event sink, the job record folded from its
events, and the error file of a failing script."""

from __future__ import annotations

import json
import os
import sys

import numpy as np
import pytest

import tilegraph as tg
from tilegraph.runtime.events import subscribe
from tilegraph.service import runner


def _lines(path):
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f]


def test_sink_writes_every_event_of_a_run_with_its_plan(tmp_path):
    path = tmp_path / "events.jsonl"
    sink = runner.EventSink(str(path), interval=0.01, progress=str(tmp_path / "p.json"))
    a = np.arange(600.0).reshape(20, 30)
    x = tg.from_numpy(a, chunks=(7, 8))
    try:
        with subscribe(sink):
            # a limit of a few blocks: results spill to disk and come back
            got = (x @ x.T + 1).sum().compute(workers=2, memory_limit=3000)
    finally:
        sink.close()
    assert got == pytest.approx((a @ a.T + 1).sum())
    events = _lines(path)
    types = [e["type"] for e in events]
    assert types[0] == "RunStart" and types[-1] == "RunEnd"
    start, end = events[0], events[-1]
    assert start["backend"] == "threads" and start["nworkers"] == 2
    assert start["summary"][0] == f"plan: {start['ntasks']} tasks" + \
        start["summary"][0].split("tasks", 1)[1]
    assert end["status"] == "done" and end["ndone"] == start["ntasks"]
    assert types.count("TaskEnd") == start["ntasks"] == types.count("TaskStart")
    assert "Spill" in types and "Release" in types
    spills = [e for e in events if e["type"] == "Spill"]
    assert all(e["nbytes"] > 0 and e["time"] >= start["time"] for e in spills)
    # the progress the service shows, kept by the sink
    p = json.loads((tmp_path / "p.json").read_text())
    assert p == sink.progress
    assert p["tasks_done"] == p["tasks_total"] == start["ntasks"] and p["runs"] == 1
    # what left memory was written to disk or dropped to be made again (which, depends on
    # the order two workers finish in)
    written = sum(e["nbytes"] for e in spills if not e["clean"])
    assert p["spilled_bytes"] == end["spilled_bytes"] == written
    assert p["spilled_bytes"] == sum(e["nbytes"] for e in spills if not e["clean"])
    assert p["peak_bytes"] == max(e["held"] for e in events if e.get("held", -1) >= 0)
    assert p["plan"] == [start["summary"]] and p["current"] == {}
    assert p["events_dropped"] == 0


def test_sink_stops_writing_task_events_beyond_its_room(tmp_path):
    path = tmp_path / "events.jsonl"
    sink = runner.EventSink(str(path), interval=0.01, progress=str(tmp_path / "p.json"),
                            max_task_events=10)
    x = tg.from_numpy(np.arange(100.0), chunks=10)
    try:
        with subscribe(sink):
            assert (x + 1).sum().compute(workers=1) == 5050.0
            assert (x * 2).max().compute(workers=1) == 198.0
    finally:
        sink.close()
    events = _lines(path)
    types = [e["type"] for e in events]
    assert types.count("RunStart") == types.count("RunEnd") == 2  # always written
    assert len(events) == 10 + 4
    p = json.loads((tmp_path / "p.json").read_text())
    assert p["runs"] == 2 and p["tasks_done"] == p["tasks_total"] > 10
    assert p["events_dropped"] > 0 and len(p["plan"]) == 2


def test_sink_writes_failures_and_keys_in_short(tmp_path):
    path = tmp_path / "events.jsonl"
    sink = runner.EventSink(str(path), interval=0.01)

    def bad(v):
        raise ZeroDivisionError("no")

    try:
        with subscribe(sink), pytest.raises(ZeroDivisionError):
            tg.get({("k" * 200, 1): (bad, 1)}, ("k" * 200, 1))
    finally:
        sink.close()
    events = _lines(path)
    failed = [e for e in events if e["type"] == "TaskFailed"]
    assert failed and failed[0]["error"] == "ZeroDivisionError: no"
    assert len(failed[0]["key"]) == runner.KEY_CHARS and failed[0]["retry"] is False
    assert events[-1]["type"] == "RunEnd" and events[-1]["status"] == "failed"


def test_runner_main_script_and_error_file(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("TILEGRAPH_EVENTS", str(tmp_path / "ev.jsonl"))
    monkeypatch.setenv("TILEGRAPH_ERROR_FILE", str(tmp_path / "error.json"))
    monkeypatch.setattr(sys, "argv", list(sys.argv))
    monkeypatch.setattr(sys, "path", list(sys.path))
    (tmp_path / "ok.py").write_text(
        "import sys, numpy as np, tilegraph as tg\n"
        "print(sys.argv[1:], tg.from_numpy(np.ones(10), chunks=3).sum().compute())\n")
    assert runner.main(["--workers", "2", "script", "ok.py", "a"]) == 0
    assert capsys.readouterr().out == "['a'] 10.0\n"
    assert [e["type"] for e in _lines(tmp_path / "ev.jsonl")][::len(_lines(
        tmp_path / "ev.jsonl")) - 1] == ["RunStart", "RunEnd"]
    assert not (tmp_path / "error.json").exists()
    (tmp_path / "bad.py").write_text("def f():\n    return {}['x']\n\nf()\n")
    assert runner.main(["script", "bad.py"]) == 1
    record = json.loads((tmp_path / "error.json").read_text())
    assert record["error"] == "KeyError: 'x'"
    assert record["traceback"].splitlines()[1].endswith('bad.py", line 4, in <module>')
    assert "runpy" not in record["traceback"]
    assert "KeyError: 'x'" in capsys.readouterr().err
    (tmp_path / "exit.py").write_text("import sys\nsys.exit(4)\n")
    assert runner.main(["script", "exit.py"]) == 4
    assert runner.main(["nonsense"]) == 2
    assert "usage:" in capsys.readouterr().err
    assert os.environ["TILEGRAPH_EVENTS"]
    assert not tg.runtime.events.global_subscribers()  # the sink left with the run
