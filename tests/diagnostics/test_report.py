import json
import re
import time
from html.parser import HTMLParser

import numpy as np
import pytest

import tilegraph as tg
from tilegraph.diagnostics import report
from tilegraph.diagnostics.recorder import Recorder
from tilegraph.diagnostics.report import write_report
from tilegraph.runtime.events import (
    Release,
    RunEnd,
    RunStart,
    Spill,
    TaskEnd,
    TaskStart,
    Transfer,
    Unspill,
)

VOID = {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source",
        "track", "wbr"}


class Strict(HTMLParser):
    """Checks that a document is well formed: a doctype, then html > head (title) + body,
    every element closed in order (self-closing only inside SVG), no external resource."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.stack = []
        self.doctype = None
        self.seen = set()
        self.elements = []  # (tag, attrs, parent chain) of every element
        self.text = {}  # id of an element in self.elements -> its text
        self.open_ids = []

    def handle_decl(self, decl):
        assert self.doctype is None and not self.seen
        self.doctype = decl

    def _start(self, tag, attrs):
        attrs = dict(attrs)
        assert "src" not in attrs and "href" not in attrs, (tag, attrs)
        assert tag not in ("script", "link", "iframe", "img"), tag
        if not self.seen:
            assert tag == "html" and attrs.get("lang") == "en"
        else:
            assert self.stack, f"<{tag}> outside <html>"
        self.seen.add(tag)
        self.elements.append((tag, attrs, tuple(self.stack)))
        return len(self.elements) - 1

    def handle_starttag(self, tag, attrs):
        i = self._start(tag, attrs)
        if tag not in VOID:
            self.stack.append(tag)
            self.open_ids.append(i)

    def handle_startendtag(self, tag, attrs):
        assert tag in VOID or "svg" in self.stack, f"<{tag}/> outside svg"
        self._start(tag, attrs)

    def handle_endtag(self, tag):
        assert tag not in VOID, f"</{tag}>"
        assert self.stack and self.stack[-1] == tag, f"</{tag}> closes <{self.stack[-1:]}>"
        self.stack.pop()
        self.open_ids.pop()

    def handle_data(self, data):
        for i in self.open_ids:
            self.text[i] = self.text.get(i, "") + data

    def check(self, document):
        self.feed(document)
        self.close()
        assert self.doctype is not None and self.doctype.lower() == "doctype html"
        assert not self.stack, f"unclosed: {self.stack}"
        assert {"html", "head", "title", "body", "meta", "style"} <= self.seen
        metas = [a for t, a, _ in self.elements if t == "meta"]
        assert {"charset": "utf-8"} in metas
        assert [p for t, _, p in self.elements if t == "head"] == [("html",)]
        assert [p for t, _, p in self.elements if t == "body"] == [("html",)]
        return self

    def find(self, tag, cls=None):
        return [(i, a) for i, (t, a, _) in enumerate(self.elements)
                if t == tag and (cls is None or cls in a.get("class", "").split())]

    def texts(self, tag, cls=None):
        return [self.text.get(i, "") for i, _ in self.find(tag, cls)]


def parse(path):
    return Strict().check(path.read_text(encoding="utf-8"))


def legend(doc):
    """Text of the legend of kinds."""
    (ul, _), = doc.find("ul", "kinds")
    return doc.text[ul]


def test_threads_run(tmp_path):
    rec, events = Recorder(), []
    a = tg.random.random((200, 200), chunks=50, seed=0)
    out = (a @ a).compute(callbacks=[rec, events.append], workers=2)
    np.testing.assert_allclose(out, a.compute() @ a.compute())
    path = write_report(tmp_path / "run.html", [rec.data()], summary=(a @ a).explain())
    assert path == tmp_path / "run.html" and path.exists()
    doc = parse(path)

    ends = [e for e in events if isinstance(e, TaskEnd)]
    assert len(doc.find("rect", "task")) == len(ends) > 0
    kinds = {e.kind for e in ends}
    assert {"product", "store"} <= kinds
    assert all(k in legend(doc) for k in kinds)
    fills = {a["fill"] for _, a in doc.find("rect", "task")}
    assert fills == {report.kind_colour(k) for k in kinds}
    # Rows of one process are named by worker alone; both workers have one.
    labels = doc.texts("text")
    assert "worker 0" in labels and "worker 1" in labels
    assert not any(t.startswith("rank") for t in labels)
    tips = doc.texts("title")
    assert any("matmul_block" in t and "key: ('matmul" in t for t in tips)
    (memory,) = doc.find("polyline", "memory")
    assert len(memory[1]["points"].split()) > 10
    assert "tasks per kind" in "".join(doc.texts("pre"))
    assert not doc.find("line", "transfer")
    assert str(len(ends)) in doc.texts("td")


def test_recording_of_a_subscribed_recorder_renders(tmp_path):
    rec = Recorder()
    with tg.subscribe(rec):
        tg.ones((40, 40), chunks=10).sum().compute()
    parse(write_report(tmp_path / "r.html", [rec.data()]))


def rank_recording(rank, ntasks, t0, transfers=0):
    """A recording of rank ``rank``: ``ntasks`` tasks on 2 workers, ``transfers`` results
    received from rank 1 - rank."""
    rec = Recorder()
    rec(RunStart(ntasks, 2, "mpi", rank=rank, time=t0))
    held = 0
    for i in range(ntasks):
        s = t0 + 0.001 + i * 0.01
        rec(TaskStart(("t", rank, i), "op", i % 2, s, "product"))
        held += 800
        rec(TaskEnd(("t", rank, i), "op", i % 2, s, s + 0.008, 800,
                    ("product", "store")[i % 2], held=held))
    for j in range(transfers):
        s = t0 + 0.002 + j * 0.01
        held += 100
        rec(Transfer(("in", j), 1 - rank, rank, 100, s, s + 0.004, held=held))
    rec(Release(("t", rank, 0), 800, held=held - 800))
    rec(Spill(("t", rank, 1), 800, clean=True, held=held - 1600))
    rec(Unspill(("t", rank, 1), 800, held=held - 800))
    rec(RunEnd("done", ntasks, 0.01 * ntasks + 0.01, peak_bytes=held, spilled_bytes=800,
               unspilled_bytes=800))
    return rec.data()


def test_two_ranks(tmp_path):
    t0 = time.perf_counter()
    recs = [rank_recording(1, 6, t0 + 0.003), rank_recording(0, 5, t0, transfers=7)]
    doc = parse(write_report(tmp_path / "mpi.html", recs, title="two ranks"))
    labels = doc.texts("text")
    for rank in (0, 1):
        for worker in (0, 1):
            assert f"rank {rank} / worker {worker}" in labels
    assert "rank 0 / transfers in" in labels and "rank 1 / transfers in" not in labels
    assert len(doc.find("rect", "task")) == 11
    marks = doc.find("line", "transfer")
    assert len(marks) == 7
    assert {a["stroke"] for _, a in marks} == {report.rank_colour(1)}
    tips = [t for t in doc.texts("title") if "rank 1 \u2192 rank 0" in t]
    assert len(tips) == 7 and all("100 B" in t for t in tips)
    # Rows in rank order: rank 0's rows come first although its recording came second.
    assert labels.index("rank 0 / worker 0") < labels.index("rank 1 / worker 0")
    # Times are relative to the earliest start: rank 1's tasks begin to the right of rank 0's.
    first = {}
    for i, a in doc.find("rect", "task"):
        tip = doc.text[i]
        first.setdefault(tip.split("key: ")[1].split(",")[1].strip(), float(a["x"]))
    assert first["1"] > first["0"]
    memory = doc.find("polyline", "memory")
    assert {a["stroke"] for _, a in memory} == {report.rank_colour(0), report.rank_colour(1)}
    assert "rank 0" in doc.text[doc.find("ul", "ranks")[0][0]]
    cells = doc.texts("td")
    assert "700 B in 7" in cells and "two ranks" in doc.texts("h1")


def test_recordings_survive_json(tmp_path):
    t0 = time.perf_counter()
    recs = [rank_recording(0, 5, t0, transfers=3), rank_recording(1, 4, t0)]
    a = write_report(tmp_path / "a.html", recs).read_text()
    b = write_report(tmp_path / "b.html", json.loads(json.dumps(recs))).read_text()
    assert a == b


def test_time_axis_starts_at_the_earliest_start(tmp_path):
    t0 = time.perf_counter()
    recs = [rank_recording(0, 3, t0 + 0.5), rank_recording(1, 3, t0)]
    doc = parse(write_report(tmp_path / "r.html", recs))
    # Rank 0 started half a second after rank 1: its first task is near 0.5 s.
    tips = [t for t in doc.texts("title") if "('t', 0, 0)" in t]
    assert "from 0.501" in tips[0]


def test_clocks_of_other_machines_are_aligned_on_wall_time(tmp_path):
    recs = [rank_recording(0, 3, 1000.0), rank_recording(1, 3, 5.0)]
    recs[0]["host"], recs[0]["wall"] = "a", 1e9
    recs[1]["host"], recs[1]["wall"] = "b", 1e9 + 0.25
    doc = parse(write_report(tmp_path / "r.html", recs))
    tip = {rank: next(t for t in doc.texts("title") if f"('t', {rank}, 0)" in t)
           for rank in (0, 1)}
    assert "from 0.0010 s" in tip[0] and "from 0.2510 s" in tip[1]
    assert {"a", "b"} <= set(doc.texts("td"))  # hosts are named when there are several


def test_many_transfers_are_merged(tmp_path):
    t0 = time.perf_counter()
    rec = Recorder()
    rec(RunStart(1, 1, "mpi", rank=0, time=t0))
    for i in range(30_000):
        s = t0 + i * 1e-4
        rec(Transfer(("y", i), 1 + i % 3, 0, 10, s, s + 3e-4, held=i))
    path = write_report(tmp_path / "r.html", [rec.data()])
    doc = parse(path)
    marks = doc.texts("line", "transfer")
    assert 0 < len(marks) < 6_000
    counts = [int(m.group(1)) if m else 1 for t in marks for m in [re.match(r"(\d+) transf", t)]]
    assert sum(counts) == 30_000
    assert {a["stroke"] for _, a in doc.find("line", "transfer")} == {
        report.rank_colour(r) for r in (1, 2, 3)}
    assert path.stat().st_size < 2_000_000


def test_many_tiny_tasks_are_merged(tmp_path):
    t0 = time.perf_counter()
    rec = Recorder()
    rec(RunStart(50_000, 4, "threads", time=t0))
    kinds = ("product", "accumulate", "store", "")
    for i in range(50_000):
        w, k = i % 4, i // 4
        s = t0 + k * 1e-4
        rec(TaskEnd(("x", i), f"op{i % 7}", w, s, s + 9e-5, 1000,
                    kinds[(i // 8 if w < 2 else i // 4) % 4], held=(i % 100) * 1000))
    rec(RunEnd("done", 50_000, 1.3, peak_bytes=99_000))
    path = write_report(tmp_path / "big.html", [rec.data()])
    size = path.stat().st_size
    assert size < 2_000_000, size
    doc = parse(path)
    rects = doc.find("rect", "task")
    assert 0 < len(rects) < 10_000
    counts = [int(m.group(1)) for t in doc.texts("rect", "task")
              for m in [re.match(r"(\d+) tasks", t)] if m]
    singles = sum(1 for t in doc.texts("rect", "task") if "key: " in t)
    assert sum(counts) + singles == 50_000
    assert all(k in legend(doc) for k in ("product", "accumulate", "store", "no kind"))
    assert "50000" in doc.texts("td")
    (memory,) = doc.find("polyline", "memory")
    assert len(memory[1]["points"].split()) <= report.MAX_MEMORY_POINTS + 2
    # The memory line keeps the highest value of each bucket.
    ys = [float(p.split(",")[1]) for p in memory[1]["points"].split()]
    assert min(ys) < 20  # near the top of a chart of height 180


def test_below_the_threshold_every_task_is_drawn(tmp_path):
    t0 = time.perf_counter()
    rec = Recorder()
    rec(RunStart(3000, 2, "threads", time=t0))
    for i in range(3000):
        rec(TaskEnd(i, "op", i % 2, t0 + i * 1e-5, t0 + i * 1e-5 + 1e-6, 8, "map"))
    doc = parse(write_report(tmp_path / "r.html", [rec.data()]))
    assert len(doc.find("rect", "task")) == 3000


def test_empty_recordings(tmp_path):
    rec = Recorder()
    rec(RunStart(0, 2, "threads", time=time.perf_counter()))
    rec(RunEnd("done", 0, 0.0))
    for data in (rec.data(), Recorder().data()):
        path = write_report(tmp_path / "empty.html", [data])
        doc = parse(path)
        assert "No task ran." in doc.texts("p")
        assert not doc.find("rect", "task") and not doc.find("svg")


def test_escaping(tmp_path):
    rec = Recorder()
    rec(RunStart(1, 1, "threads", time=time.perf_counter()))
    rec(TaskEnd(("<k>", 0), "<script>alert(1)</script>", 0, 1.0, 1.5, 10, "<b>&", held=10))
    path = write_report(tmp_path / "x.html", [rec.data()], title="<i>t</i>",
                        summary="a < b && <script>")
    text = path.read_text(encoding="utf-8")
    assert "<script>" not in text and "<b>" not in text and "<i>" not in text
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in text
    doc = parse(path)
    assert doc.texts("pre") == ["a < b && <script>"]
    assert "<b>&" in legend(doc)
    assert doc.texts("title")[0] == "<i>t</i>"


@pytest.mark.parametrize("recordings, message", [
    ([], "empty"),
    ("run", "list"),
    ([1, 2], r"recordings\[0\] is a int"),
    ([{"tasks": []}], "not made by Recorder.data"),
    ([{**Recorder().data(), "version": 99}], "version 99"),
    ([{**Recorder().data(), "tasks": None}], "'tasks'"),
    ([Recorder().data(), Recorder().data()], "two recordings of rank 0"),
])
def test_bad_recordings(tmp_path, recordings, message):
    with pytest.raises(ValueError, match=message):
        write_report(tmp_path / "r.html", recordings)
    assert list(tmp_path.iterdir()) == []


def test_missing_directory(tmp_path):
    missing = tmp_path / "no" / "such"
    with pytest.raises(FileNotFoundError, match=re.escape(str(missing))):
        write_report(missing / "r.html", [Recorder().data()])


def test_failure_while_writing_leaves_nothing(tmp_path, monkeypatch):
    data = rank_recording(0, 4, time.perf_counter())
    old = tmp_path / "old.html"
    old.write_text("old report")
    written = []

    def broken(*args):
        written.extend(p.name for p in tmp_path.iterdir())
        raise RuntimeError("disk on fire")
        yield ""

    monkeypatch.setattr(report, "memory_chart", broken)
    for name in ("new.html", "old.html"):
        with pytest.raises(RuntimeError, match="disk on fire"):
            write_report(tmp_path / name, [data])
    # The report was being written to a temporary file beside it...
    assert any(n.endswith(".tmp") for n in written)
    # ...which is gone; the earlier report is untouched and no new one appeared.
    assert sorted(p.name for p in tmp_path.iterdir()) == ["old.html"]
    assert old.read_text() == "old report"


def test_report_option_writes_the_report_of_a_threads_run(tmp_path):
    import tilegraph as tg

    path = tmp_path / "run.html"
    a = tg.random.random((120, 120), chunks=40, seed=2)
    (a @ a).compute(report=path, workers=2)
    text = path.read_text()
    assert text.startswith("<!DOCTYPE html>") and "tasks per kind" in text
    assert text.count('class="task"') >= 9


def test_recorder_is_importable_beside_write_report():
    """Callers import both names from the report module (and from the package)."""
    import tilegraph.diagnostics as diagnostics

    assert report.Recorder is Recorder is diagnostics.Recorder
    assert diagnostics.write_report is write_report
