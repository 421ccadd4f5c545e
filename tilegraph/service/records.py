"""The record of a service job: its fields (:class:`Job`), the ``jobs`` table of SQLite that
keeps them (:class:`JobStore`), and the checks of everything read back (a stored record, a
job's progress file): each field is checked and mended, and what fails is left out with the
reason, since another process may have written it (:mod:`tilegraph.service.protect`)."""

from __future__ import annotations

import json
import math
import re
import sqlite3
import time
from dataclasses import dataclass, field
from typing import Any

from tilegraph.service import protect

STATES = ("queued", "running", "done", "failed", "cancelled")
FINISHED = ("done", "failed", "cancelled")
MAX_CURRENT = 4096  # workers in a progress's "current" (more: the field is not taken)
MAX_SUMMARY_LINES = 50  # lines of one plan summary kept
MAX_LINE_CHARS = 4000  # characters of a line of a plan summary, of a current task's name
MAX_SUMMARIES = 20  # plan summaries kept (as the runner keeps them)
JOB_ID = re.compile(r"[0-9a-f]{12}")

_COLUMNS = {
    "id": "TEXT PRIMARY KEY", "kind": "TEXT", "name": "TEXT", "state": "TEXT",
    "created": "REAL", "started": "REAL", "finished": "REAL", "tasks_done": "INTEGER",
    "tasks_total": "INTEGER", "runs": "INTEGER", "held_bytes": "INTEGER",
    "peak_bytes": "INTEGER", "spilled_bytes": "INTEGER", "error": "TEXT",
    "traceback": "TEXT", "returncode": "INTEGER", "pid": "INTEGER", "plan": "TEXT",
    "args": "TEXT", "outputs": "TEXT",
}


@dataclass
class Job:
    """One job's record (the columns of the ``jobs`` table) and, while it runs, its
    process and the tasks its workers run now."""

    id: str
    kind: str  # "script" or "compute"
    name: str
    state: str = "queued"
    created: float = 0.0
    started: float | None = None
    finished: float | None = None
    tasks_done: int = 0
    tasks_total: int = 0
    runs: int = 0
    held_bytes: int = 0
    peak_bytes: int = 0
    spilled_bytes: int = 0
    error: str | None = None
    traceback: str | None = None
    returncode: int | None = None
    pid: int | None = None
    plan: list[list[str]] = field(default_factory=list)
    args: list[str] = field(default_factory=list)
    outputs: list[str] = field(default_factory=list)
    # not stored: the live part
    current: dict[str, str] = field(default_factory=dict)
    proc: Any = None
    cancelling: bool = False
    plan_bytes: int = 0  # of a compute job's plan, which its runner checks

    def row(self) -> dict[str, Any]:
        """The record as a row of the ``jobs`` table."""
        return {k: (json.dumps(getattr(self, k)) if k in ("plan", "args", "outputs")
                    else getattr(self, k)) for k in _COLUMNS}

    @classmethod
    def from_row(cls, row: sqlite3.Row) -> Job:
        """The job of a row of the ``jobs`` table, each field checked (ValueError naming
        the field and the problem): a record someone else wrote is never trusted."""
        values = {k: row[k] for k in _COLUMNS}
        return cls(**checked_record(values))

    def public(self) -> dict[str, Any]:
        """The record as the API gives it."""
        end = self.finished or (time.time() if self.started else None)
        total = self.tasks_total
        progress = 1.0 if self.state == "done" else (
            min(1.0, self.tasks_done / total) if total else 0.0)
        return {
            "id": self.id, "kind": self.kind, "name": self.name, "state": self.state,
            "created": self.created, "started": self.started, "finished": self.finished,
            "elapsed": (end - self.started) if self.started and end else None,
            "tasks_done": self.tasks_done, "tasks_total": total, "progress": progress,
            "runs": self.runs, "held_bytes": self.held_bytes, "peak_bytes": self.peak_bytes,
            "spilled_bytes": self.spilled_bytes, "error": self.error,
            "traceback": self.traceback, "returncode": self.returncode, "plan": self.plan,
            "args": self.args, "outputs": self.outputs,
        }


def _finite(value: Any, name: str, optional: bool = False) -> float | None:
    if value is None and optional:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or \
            not math.isfinite(value):
        raise ValueError(f"{name} must be a finite number, got {value!r}")
    return float(value)


def _count(value: Any, name: str, optional: bool = False) -> int | None:
    if value is None and optional:
        return None
    if type(value) is not int or not -2**63 <= value < 2**63:
        raise ValueError(f"{name} must be an integer, got {value!r}")
    return value


def _text(value: Any, name: str, optional: bool = True) -> str | None:
    if value is None and optional:
        return None
    if not isinstance(value, str):
        raise ValueError(f"{name} must be text, got {type(value).__name__}")
    return protect.mend(value)


def _json_list(value: Any, name: str) -> list[Any]:
    if value is None:
        return []
    if not isinstance(value, str):
        raise ValueError(f"{name} must be JSON text, got {type(value).__name__}")
    try:
        out = protect.loads_json(value.encode("utf-8", "surrogatepass"))
    except protect.BadInput as exc:
        raise ValueError(f"{name}: {exc}") from None
    if not isinstance(out, list):
        raise ValueError(f"{name} must be a JSON list")
    return out


def checked_record(v: dict[str, Any]) -> dict[str, Any]:
    """The fields of a stored record, checked and mended (ValueError naming the first one
    that is wrong)."""
    if not isinstance(v["id"], str) or not JOB_ID.fullmatch(v["id"]):
        raise ValueError(f"id must be 12 hexadecimal digits, got {v['id']!r}")
    if v["kind"] not in ("script", "compute"):
        raise ValueError(f"kind must be script or compute, got {v['kind']!r}")
    if v["state"] not in STATES:
        raise ValueError(f"state must be one of {', '.join(STATES)}, got {v['state']!r}")
    try:
        if v["kind"] == "script":
            protect.check_script_name(v["name"], "name")
        else:
            protect.check_name(v["name"], "name")
    except protect.BadInput as exc:
        raise ValueError(str(exc)) from None
    out = {"id": v["id"], "kind": v["kind"], "state": v["state"], "name": v["name"],
           "created": _finite(v["created"], "created")}
    for k in ("started", "finished"):
        out[k] = _finite(v[k], k, optional=True)
    for k in ("tasks_done", "tasks_total", "runs", "held_bytes", "peak_bytes",
              "spilled_bytes"):
        out[k] = _count(v[k] if v[k] is not None else 0, k)
    out["returncode"] = _count(v["returncode"], "returncode", optional=True)
    out["pid"] = _count(v["pid"], "pid", optional=True)
    if out["pid"] is not None and out["pid"] <= 0:
        raise ValueError(f"pid must be positive, got {out['pid']}")
    out["error"] = _text(v["error"], "error")
    out["traceback"] = _text(v["traceback"], "traceback")
    plan = _checked_plan(_json_list(v["plan"], "plan"))
    if plan is None:
        raise ValueError("plan must be a list of lists of text")
    out["plan"] = plan
    args = _json_list(v["args"], "args")
    if not all(isinstance(a, str) for a in args):
        raise ValueError("args must be a list of text")
    out["args"] = [protect.mend(a) for a in args]
    outputs = _json_list(v["outputs"], "outputs")
    try:
        out["outputs"] = [protect.check_relative_path(o, f"outputs[{i}]")
                          for i, o in enumerate(outputs)]
    except protect.BadInput as exc:
        raise ValueError(str(exc)) from None
    return out


def _line(text: str) -> str:
    return protect.mend(text[:MAX_LINE_CHARS])


def _checked_plan(plan: Any) -> list[list[str]] | None:
    """Plan summaries (lists of lines), the last ``MAX_SUMMARIES`` with at most
    ``MAX_SUMMARY_LINES`` lines each; ``None`` if ``plan`` is not a list of lists of text."""
    if not isinstance(plan, list) or not all(
            isinstance(s, list) and all(isinstance(ln, str) for ln in s) for s in plan):
        return None
    return [[_line(ln) for ln in s[:MAX_SUMMARY_LINES]] for s in plan[-MAX_SUMMARIES:]]


def checked_progress(p: dict[str, Any]) -> dict[str, Any]:
    """The fields of a job's progress file that are right (counts: integers in
    0..2**63-1; ``current``: at most ``MAX_CURRENT`` workers, names and tasks as text;
    ``plan``: lists of lines), text mended and cut to ``MAX_LINE_CHARS``; the others are
    left out."""
    out: dict[str, Any] = {}
    for k in ("runs", "tasks_total", "tasks_done", "held_bytes", "peak_bytes",
              "spilled_bytes"):
        v = p.get(k)
        if type(v) is int and 0 <= v < 2**63:
            out[k] = v
    current = p.get("current")
    if isinstance(current, dict) and len(current) <= MAX_CURRENT and all(
            isinstance(t, str) for t in current.values()):
        out["current"] = {_line(w): _line(t) for w, t in current.items()}
    plan = _checked_plan(p.get("plan"))
    if plan is not None:
        out["plan"] = plan
    return out


class JobStore:
    """The ``jobs`` table of ``DATA/jobs.sqlite``."""

    def __init__(self, path: str):
        self.path = path
        try:
            self.db = sqlite3.connect(path, check_same_thread=False, isolation_level=None)
            self.db.row_factory = sqlite3.Row
            self.db.text_factory = lambda b: b.decode("utf-8", "replace")
            self.db.execute("PRAGMA journal_mode=WAL")
            self.db.execute("PRAGMA synchronous=NORMAL")
            cols = ", ".join(f"{k} {t}" for k, t in _COLUMNS.items())
            self.db.execute(f"CREATE TABLE IF NOT EXISTS jobs ({cols})")
            have = {r[1] for r in self.db.execute("PRAGMA table_info(jobs)")}
        except sqlite3.Error as exc:
            raise ValueError(f"the job records {path} cannot be read as a database: {exc}"
                             ) from None
        missing = sorted(set(_COLUMNS) - have)
        if missing:
            raise ValueError(f"the jobs table of {path} lacks the column(s) "
                             f"{', '.join(missing)}: it was not written by this service")

    def save(self, job: Job) -> None:
        """Write ``job``'s record (insert or replace)."""
        row = job.row()
        names = ", ".join(row)
        marks = ", ".join("?" for _ in row)
        self.db.execute(f"INSERT OR REPLACE INTO jobs ({names}) VALUES ({marks})",
                        list(row.values()))

    def load(self) -> tuple[list[Job], list[str]]:
        """Every valid job record, oldest first, and a line for each one left out (its id
        and what is wrong)."""
        jobs, bad = [], []
        try:
            rows = self.db.execute("SELECT * FROM jobs ORDER BY created").fetchall()
        except sqlite3.Error as exc:
            raise ValueError(f"the job records {self.path} cannot be read: {exc}") from None
        for r in rows:
            try:
                jobs.append(Job.from_row(r))
            except ValueError as exc:
                bad.append(f"{r['id']!r}: {exc}")
        return jobs, bad

    def delete(self, job_ids: list[str]) -> None:
        """Remove the records of ``job_ids``."""
        self.db.executemany("DELETE FROM jobs WHERE id = ?", [(i,) for i in job_ids])

    def close(self) -> None:
        """Close the database."""
        self.db.close()
