"""Every process a job starts ends with the job (when it finishes, is cancelled, or the
service stops), whatever session or process group it starts and whatever it does to its
environment.

One of two ways is chosen when the service starts (:func:`cgroup_parent`):

* **cgroup** (Linux cgroup v2, where the service's user may make a cgroup below its own,
  e.g. root, or a user given a delegated subtree): each job gets a cgroup
  ``tilegraph-job-TAG-ID`` below the service's own (``TAG`` names the data directory). The
  job's runner moves itself into it before it runs anything of the job, and a process
  cannot leave its cgroup by forking, starting a session or clearing its environment; when
  the job ends, writing ``cgroup.kill`` kills every process in it (and in cgroups below)
  at once, and the cgroup is removed. A service that starts again removes what a crash
  left of its jobs' cgroups the same way.
* **subreaper** (where no cgroup can be made, or ``TILEGRAPH_JOB_CGROUPS=0`` is in the
  service's environment): the runner makes itself a child subreaper
  (``PR_SET_CHILD_SUBREAPER``), so a process whose parent dies is adopted by the runner,
  not by init, and stays among its descendants; the runner kills its descendants when it
  ends. The service notes every descendant of the runner (pid and start time) each time it
  polls the job, and when the runner is gone it stops, then kills, each one still alive,
  their descendants, and every process whose environment carries the job's mark
  (``TILEGRAPH_JOB``). Known gaps: a process started less than a poll (0.25 s) before its
  runner was killed by SIGKILL, whose parents all died in that time, is not seen; an
  adopted orphan that exits stays a zombie until the runner ends (the runner cannot tell
  it from the job's own children, whose status the job may still wait for).

A job runs as the service's user; one that may write another cgroup's ``cgroup.procs``
(root may) can move itself out of its cgroup on purpose, and is not followed there.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import secrets
import signal
import time
from typing import Any

CGROUP_ENV = "TILEGRAPH_JOB_CGROUPS"  # "0": never make cgroups (the subreaper way)
JOB_MARK = "TILEGRAPH_JOB"  # in the environment of a job's processes: data dir and job id
KILL_WAIT = 5.0  # seconds to wait for a killed cgroup to empty
PR_SET_CHILD_SUBREAPER = 36


def _unescape(field: str) -> str:
    """A path of /proc/self/mountinfo (spaces and the like are octal escapes)."""
    for code, char in (("\\040", " "), ("\\011", "\t"), ("\\012", "\n"), ("\\134", "\\")):
        field = field.replace(code, char)
    return field


def own_cgroup() -> str | None:
    """The directory of this process's cgroup v2 in the mounted hierarchy, or ``None``
    (no cgroup v2 is mounted, or this process's cgroup is outside the mount)."""
    try:
        with open("/proc/self/cgroup", encoding="utf-8") as f:
            own = next((ln[3:].rstrip("\n") for ln in f if ln.startswith("0::")), None)
        with open("/proc/self/mountinfo", encoding="utf-8") as f:
            mounts = [ln.split(" - ", 1) for ln in f]
    except OSError:
        return None
    if own is None:
        return None
    for left, right in (m for m in mounts if len(m) == 2):
        if right.split()[:1] != ["cgroup2"]:
            continue
        fields = left.split()
        root, point = _unescape(fields[3]), _unescape(fields[4])
        if root == "/":
            rel = own
        elif own == root or own.startswith(root + "/"):
            rel = own[len(root):]
        else:
            continue
        return os.path.join(point, rel.lstrip("/"))
    return None


def cgroup_parent() -> str | None:
    """Where this service makes its jobs' cgroups (its own cgroup v2), if it may make one
    there that it can move processes into and kill; else ``None`` (the subreaper way).
    ``TILEGRAPH_JOB_CGROUPS=0`` in the environment says ``None`` too."""
    if os.environ.get(CGROUP_ENV, "1") == "0":
        return None
    parent = own_cgroup()
    if parent is None or not os.path.isdir(parent):
        return None
    probe = os.path.join(parent, f"tilegraph-probe-{os.getpid()}-{secrets.token_hex(4)}")
    try:
        os.mkdir(probe)
    except OSError:
        return None
    try:
        usable = (os.path.exists(os.path.join(probe, "cgroup.kill"))
                  and os.access(os.path.join(probe, "cgroup.procs"), os.W_OK))
    finally:
        with contextlib.suppress(OSError):
            os.rmdir(probe)
    return parent if usable else None


def cgroup_prefix(data_dir: str) -> str:
    """The start of the names of the cgroups of the jobs of the service on ``data_dir``."""
    return "tilegraph-job-" + hashlib.sha256(os.fsencode(data_dir)).hexdigest()[:12] + "-"


def _populated(path: str) -> bool:
    try:
        with open(os.path.join(path, "cgroup.events"), encoding="ascii") as f:
            return any(ln.strip() == "populated 1" for ln in f)
    except OSError:
        return False


def _remove_tree(path: str) -> bool:
    """Remove cgroup ``path`` and the cgroups below it (deepest first); whether it is
    gone."""
    for here, dirs, _ in os.walk(path, topdown=False):
        for d in dirs:
            with contextlib.suppress(OSError):
                os.rmdir(os.path.join(here, d))
    try:
        os.rmdir(path)
    except FileNotFoundError:
        return True
    except OSError:
        return False
    return True


def kill_cgroup(path: str, wait: float = KILL_WAIT) -> int:
    """Kill every process in cgroup ``path`` and below (``cgroup.kill``), wait up to
    ``wait`` seconds for it to empty, and remove it; the number of processes it held."""
    try:
        with open(os.path.join(path, "cgroup.procs"), encoding="ascii") as f:
            held = sum(1 for _ in f)
    except OSError:
        return 0
    with contextlib.suppress(OSError):
        with open(os.path.join(path, "cgroup.kill"), "w", encoding="ascii") as f:
            f.write("1")
    deadline = time.monotonic() + wait
    while _populated(path) and time.monotonic() < deadline:
        time.sleep(0.01)
    _remove_tree(path)
    return held


def end_leftover_cgroups(parent: str, prefix: str) -> int:
    """Kill and remove every cgroup in ``parent`` whose name starts with ``prefix`` (what a
    service that crashed left of its jobs); the number of processes killed."""
    try:
        names = [n for n in os.listdir(parent) if n.startswith(prefix)]
    except OSError:
        return 0
    return sum(kill_cgroup(os.path.join(parent, n)) for n in names)


def end_marked(mark: str) -> int:
    """Kill every process whose environment has ``TILEGRAPH_JOB=mark`` (the processes a
    job started that kept the variable); the number killed."""
    import psutil

    killed = 0
    for p in psutil.process_iter():
        try:
            if p.pid == os.getpid() or p.environ().get(JOB_MARK) != mark:
                continue
            p.kill()
            killed += 1
        except (psutil.Error, OSError):
            continue
    return killed


def _stop_and_kill(found: dict[int, Any]) -> int:
    """Stop every process of ``found`` (pid: psutil.Process, checked against pid reuse),
    add their descendants (stopped too, until none is new), then kill them all."""
    import psutil

    stopped: dict[int, Any] = {}
    todo = list(found.values())
    while todo:
        p = todo.pop()
        if p.pid in stopped or p.pid == os.getpid():
            continue
        try:
            p.suspend()
            stopped[p.pid] = p
            todo.extend(p.children(recursive=True))
        except psutil.Error:
            continue
    killed = 0
    for p in stopped.values():
        with contextlib.suppress(psutil.Error):
            p.kill()
            killed += 1
    return killed


class JobProcesses:
    """The processes of one job: where they are held (``cgroup``, or ``None`` for the
    subreaper way), how the runner is told (:meth:`runner_args`), what the service notes
    while the job runs (:meth:`watch`), and their end (:meth:`end`)."""

    def __init__(self, mark: str, cgroup: str | None):
        self.mark = mark
        self.cgroup = cgroup
        self.runner: Any = None
        self.seen: dict[int, Any] = {}

    def prepare(self) -> None:
        """Make the job's cgroup (after killing what an earlier life left in one of the
        same name)."""
        if self.cgroup is not None:
            if os.path.isdir(self.cgroup):
                kill_cgroup(self.cgroup)
            os.mkdir(self.cgroup)

    def runner_args(self) -> list[str]:
        """The runner's options that hold the job's processes."""
        return ["--cgroup", self.cgroup] if self.cgroup is not None else ["--subreaper"]

    def started(self, pid: int) -> None:
        """The runner is process ``pid``."""
        if self.cgroup is None:
            import psutil

            with contextlib.suppress(psutil.Error):
                self.runner = psutil.Process(pid)

    def watch(self) -> None:
        """Note the runner's descendants now (the subreaper way; nothing with a cgroup)."""
        if self.runner is None:
            return
        import psutil

        with contextlib.suppress(psutil.Error):
            for p in self.runner.children(recursive=True):
                self.seen.setdefault(p.pid, p)

    def end(self) -> int:
        """Kill every process of the job that is left (the runner included, if it still
        runs); the number killed."""
        if self.cgroup is not None:
            return kill_cgroup(self.cgroup)
        self.watch()
        found = dict(self.seen)
        if self.runner is not None:
            found[self.runner.pid] = self.runner
        killed = _stop_and_kill(found)
        return killed + end_marked(self.mark)


# -- in the runner ----------------------------------------------------------------------------


def join_cgroup(path: str) -> None:
    """Move this process into cgroup ``path`` (its children follow it there); OSError
    naming the cgroup if it cannot."""
    try:
        with open(os.path.join(path, "cgroup.procs"), "w", encoding="ascii") as f:
            f.write(str(os.getpid()))
    except OSError as exc:
        raise OSError(exc.errno, f"cannot join the job's cgroup {path}: {exc.strerror}"
                      ) from None


def become_subreaper() -> bool:
    """Make this process adopt its orphaned descendants (Linux's
    ``PR_SET_CHILD_SUBREAPER``); whether it could."""
    try:
        import ctypes

        return ctypes.CDLL(None, use_errno=True).prctl(PR_SET_CHILD_SUBREAPER, 1) == 0
    except (OSError, AttributeError):
        return False


def end_descendants() -> int:
    """Kill every descendant of this process (stopped first, so none forks away) and reap
    those it adopted; the number killed."""
    import psutil

    killed = _stop_and_kill({p.pid: p for p in psutil.Process().children(recursive=True)})
    with contextlib.suppress(ChildProcessError):
        while os.waitpid(-1, os.WNOHANG)[0]:
            pass
    return killed


def end_leftover(pid: int | None, job_dir: str) -> None:
    """Kill the process group of a job's runner that a stopped service left running (if
    process ``pid`` is still that runner: pids are reused)."""
    import psutil

    if not pid:
        return
    try:
        p = psutil.Process(pid)
        cmd, cwd = " ".join(p.cmdline()), p.cwd()
    except psutil.Error:
        return
    if "tilegraph.service.runner" in cmd and (cwd == job_dir
                                              or cwd.startswith(job_dir + os.sep)):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pid, signal.SIGKILL)
