"""Jobs of the service: their records (SQLite in the data directory), their processes, and
what those report (progress, memory, the plan, the tasks running now).

Every job runs in its own process (``python -m tilegraph.service.runner``), in its own
process group and session, in its directory ``DATA/jobs/ID/`` (the script's working
directory is ``work/`` there), with its standard output and error in files, its events in
``events.jsonl`` and its progress in ``progress.json`` (see :mod:`tilegraph.service.runner`),
read four times a second; at a lower priority (``JOB_NICE``) than the service, whose answers stay
quick while jobs compute. At most ``max_jobs`` jobs run at once; the others wait, ``queued``. A
job's state goes ``queued -> running -> done | failed | cancelled``; the record is written
to SQLite on every change of state and every few seconds while it runs, so a restarted
service lists every job, and marks those it finds ``queued`` or ``running`` as failed with
the reason (killing what is left of a job's processes).

Finished jobs are kept, newest first, up to ``keep`` of them (with their directories):
when a job ends beyond that, the oldest finished jobs are removed, record and files, and
:meth:`JobManager.purge` removes one finished job on request.

Cancelling a running job sends Ctrl-C (SIGINT) to its process group: the run in it is
cancelled by the executor (no task is taken any more, its blocks are freed, a serverless run
removes its keys); SIGTERM follows after ``CANCEL_GRACE`` seconds, then SIGKILL. Once the
runner has ended (by itself or so), every process the job started is killed, in whatever
session or group it is (a cgroup per job, or the runner as subreaper: see
:mod:`tilegraph.service.reaper`), before the job is listed as ended.

What the service reads back is not trusted (:mod:`tilegraph.service.protect`): the data
directory must be private; a plan is sealed with a MAC under a secret drawn when the service
starts; the progress, error and records are read with size bounds and checked field by
field (a record that fails is left out of the list, and the service says so on standard
error when it starts). The record and its checks are in :mod:`tilegraph.service.records`.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import secrets
import shutil
import signal
import stat
import sys
import time
from typing import Any

from tilegraph.service import protect, reaper
from tilegraph.service.reaper import JOB_MARK, end_marked
from tilegraph.service.records import FINISHED, Job, JobStore, checked_progress, checked_record

CANCEL_GRACE = 3.0  # seconds between SIGINT, SIGTERM and SIGKILL of a cancelled job
POLL_SECONDS = 0.25  # how often a running job's event file is read
SAVE_SECONDS = 2.0  # how often a running job's progress is written to the database
DEFAULT_KEEP = 1000  # finished jobs kept (records and files); older ones are removed
TAIL_BYTES = 64 * 1024  # of standard error, kept as the error of a job that left no traceback
JOB_NICE = 5  # jobs' processes run at a lower priority than the service that answers the API
MAX_PROGRESS_BYTES = 4 << 20  # a job's progress file larger than this is not read
MAX_ERROR_BYTES = 4 << 20  # nor its error file

class JobManager:
    """Submits, runs, watches and cancels the jobs of one service (in its event loop)."""

    def __init__(self, data_dir: str, pool: Any, max_jobs: int = 2,
                 keep: int | None = DEFAULT_KEEP):
        if isinstance(max_jobs, bool) or not isinstance(max_jobs, int) or max_jobs < 1:
            raise ValueError(f"max_jobs must be a positive integer, got {max_jobs!r}")
        if keep is not None and (isinstance(keep, bool) or not isinstance(keep, int)
                                 or keep < 1):
            raise ValueError(f"keep must be a number of finished jobs >= 1 (or None: all), "
                             f"got {keep!r}")
        self.keep = keep
        self.data_dir = protect.private_data_dir(data_dir)
        jobs_dir = os.path.join(self.data_dir, "jobs")
        with contextlib.suppress(FileExistsError):
            os.mkdir(jobs_dir, 0o700)
        if not os.path.isdir(jobs_dir) or os.path.islink(jobs_dir):
            raise ValueError(f"{jobs_dir} is not a directory (a link or a file)")
        self._lock = _lock_dir(self.data_dir)
        self.pool = pool
        self.max_jobs = max_jobs
        self.secret = protect.new_secret()  # seals plans; drawn anew at every start
        self.cgroups = reaper.cgroup_parent()
        self.cgroup_prefix = reaper.cgroup_prefix(self.data_dir)
        try:
            self.store = JobStore(os.path.join(self.data_dir, "jobs.sqlite"))
        except ValueError:
            self._lock.close()
            raise
        self.jobs: dict[str, Job] = {}
        self.pending: list[str] = []
        self.tasks: set[asyncio.Task] = set()
        self.left_out: list[str] = []
        self._recover()
        self._prune()

    @property
    def processes(self) -> str:
        """How the processes of a job are held and ended, in words."""
        if self.cgroups is not None:
            return f"cgroup v2 per job, below {self.cgroups}"
        return "runner as child subreaper, descendants tracked"

    # -- records -------------------------------------------------------------------------------

    def _recover(self) -> None:
        """Load every valid job record (the others are left out, said on standard error);
        those left queued or running by a stopped service are failed, and what is left of
        their processes is killed."""
        jobs, self.left_out = self.store.load()
        for line in self.left_out:
            print(f"tilegraph service: a job record in {self.store.path} is not valid and "
                  f"is left out: {line}", file=sys.stderr)
        if self.cgroups is not None:
            reaper.end_leftover_cgroups(self.cgroups, self.cgroup_prefix)
        jobs_dir = os.path.join(self.data_dir, "jobs")
        for name in os.listdir(jobs_dir):  # a submission a crash cut short
            if name.startswith(".new-"):
                shutil.rmtree(os.path.join(jobs_dir, name), ignore_errors=True)
        for job in jobs:
            if job.state in ("queued", "running"):
                if job.state == "running":
                    reaper.end_leftover(job.pid, self.job_dir(job.id))
                    end_marked(self._mark(job))
                    job.error = ("the service stopped while the job was running; it was "
                                 "marked failed when the service started again")
                else:
                    job.error = "the service stopped before the job started"
                job.state = "failed"
                job.finished = job.finished or time.time()
                self.store.save(job)
            self.jobs[job.id] = job

    def _prune(self) -> None:
        """Remove the oldest finished jobs beyond ``keep`` (records and directories)."""
        if self.keep is None:
            return
        finished = sorted((j for j in self.jobs.values() if j.state in FINISHED),
                          key=lambda j: (j.finished or j.created, j.created), reverse=True)
        old = [j.id for j in finished[self.keep:]]
        if old:
            self._remove(old)

    def _remove(self, job_ids: list[str]) -> None:
        self.store.delete(job_ids)   # the record first: a job is never listed without files
        for job_id in job_ids:
            self.jobs.pop(job_id, None)
            shutil.rmtree(self.job_dir(job_id), ignore_errors=True)

    def purge(self, job: Job) -> None:
        """Remove finished ``job``: its record and its directory (results, events)."""
        if job.state not in FINISHED:
            raise ValueError(f"job {job.id} is {job.state}: cancel it and wait for it to end "
                             "before removing it")
        self._remove([job.id])

    def job_dir(self, job_id: str) -> str:
        """The directory of job ``job_id``."""
        return os.path.join(self.data_dir, "jobs", job_id)

    def get(self, job_id: str) -> Job | None:
        """Job ``job_id``, or ``None``."""
        return self.jobs.get(job_id)

    def running(self) -> list[Job]:
        """The jobs running now."""
        return [j for j in self.jobs.values() if j.state == "running"]

    def _new_id(self) -> str:
        job_id = secrets.token_hex(6)
        while job_id in self.jobs or os.path.lexists(self.job_dir(job_id)):
            job_id = secrets.token_hex(6)
        return job_id

    def _new(self, job_id: str, kind: str, name: str, args: list[str], outputs: list[str],
             files: dict[str, bytes]) -> Job:
        """A new job with its directory holding ``files`` (relative paths), made whole
        under a hidden name and then renamed, so a failure leaves no directory behind."""
        job = Job(job_id, kind, name, created=time.time(), args=args, outputs=outputs)
        checked_record(job.row())  # what is stored must load again
        staging = os.path.join(self.data_dir, "jobs", f".new-{job_id}")
        try:
            os.mkdir(staging, 0o700)
            os.mkdir(os.path.join(staging, "work"), 0o700)
            for rel, data in files.items():
                fd = os.open(os.path.join(staging, rel),
                             os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
                with os.fdopen(fd, "wb") as f:
                    f.write(data)
            os.rename(staging, self.job_dir(job_id))
        except BaseException:
            shutil.rmtree(staging, ignore_errors=True)
            raise
        return job

    def submit_script(self, name: str, source: bytes, args: list[str],
                      outputs: list[str]) -> Job:
        """Queue a script job: ``source`` saved as ``work/NAME`` (a name checked by
        :func:`tilegraph.service.protect.check_script_name`)."""
        protect.check_script_name(name, "name")
        job = self._new(self._new_id(), "script", name, args, outputs,
                        {os.path.join("work", name): source})
        return self._queue(job)

    def submit_plan(self, payload: bytes, name: str = "compute") -> Job:
        """Queue a planned computation (pickled bytes, unpickled only by the job's process,
        and only with the MAC the service seals it with)."""
        protect.check_name(name, "name")
        job_id = self._new_id()
        job = self._new(job_id, "compute", name, [], [],
                        {"plan.pkl": protect.seal_plan(self.secret, job_id, payload)})
        job.plan_bytes = len(payload)
        return self._queue(job)

    def _queue(self, job: Job) -> Job:
        self.jobs[job.id] = job
        self.store.save(job)
        self.pending.append(job.id)
        self._dispatch()
        return job

    def _dispatch(self) -> None:
        while self.pending and len(self.running()) < self.max_jobs:
            job = self.jobs[self.pending.pop(0)]
            job.state = "running"
            job.started = time.time()
            task = asyncio.get_running_loop().create_task(self._run(job))
            self.tasks.add(task)
            task.add_done_callback(self.tasks.discard)

    # -- running -------------------------------------------------------------------------------

    def _command(self, job: Job, held: reaper.JobProcesses, key_fd: int | None
                 ) -> list[str]:
        cmd = [sys.executable, "-m", "tilegraph.service.runner", *held.runner_args()]
        workers = self.pool.job_workers()
        if workers is not None:
            cmd += ["--workers", str(workers)]
        if job.kind == "script":
            return [*cmd, "script", job.name, *job.args]
        return [*cmd, "--job", job.id, "--key-fd", str(key_fd), "--plan-bytes",
                str(job.plan_bytes), "compute", "plan.pkl", "result.npz"]

    async def _run(self, job: Job) -> None:
        d = self.job_dir(job.id)
        env = {**os.environ, **self.pool.env(), "TILEGRAPH_EVENTS":
               os.path.join(d, "events.jsonl"), "TILEGRAPH_PROGRESS":
               os.path.join(d, "progress.json"), "TILEGRAPH_ERROR_FILE":
               os.path.join(d, "error.json"), "PYTHONUNBUFFERED": "1"}
        env.pop("TILEGRAPH_TOKEN", None)  # a job never sees the service's token
        env.pop(reaper.CGROUP_ENV, None)
        env[JOB_MARK] = self._mark(job)  # inherited by whatever the job starts
        held = reaper.JobProcesses(self._mark(job), None if self.cgroups is None else
                                   os.path.join(self.cgroups, self.cgroup_prefix + job.id))
        code = None
        try:
            await asyncio.to_thread(held.prepare)
            code = await self._watch(job, d, env, held)
        except Exception as exc:  # the job could not be started or watched
            job.error = f"the service could not run the job: {type(exc).__name__}: {exc}"
        finally:
            job.proc = None
            job.current.clear()
            # whatever the job started ends with it (its group, a new session, a fork),
            # before it is listed as ended
            await asyncio.to_thread(held.end)
            if code is not None:
                self._read_progress(job)
                self._finish(job, code)
            elif job.cancelling:  # cancelled before its runner was started
                job.state = "cancelled"
                job.error = "cancelled before it started"
                job.finished = time.time()
            else:
                job.state = "failed"
                job.error = job.error or "the service stopped watching the job"
                job.finished = time.time()
            # the job is listed as finished from here: the oldest finished ones beyond the
            # limit go now, before this coroutine waits again (a client told the job is
            # done never lists more than the limit)
            self._prune()
            self.store.save(job)
            self._dispatch()

    async def _watch(self, job: Job, d: str, env: dict[str, str],
                     held: reaper.JobProcesses) -> int | None:
        """Start the job's runner and follow it until it exits; its exit status (``None``:
        the job was cancelled before its runner started)."""
        if job.cancelling:
            return None
        key_fd = None
        if job.kind == "compute":  # the secret that checks the plan's MAC, through a pipe
            key_fd, write_fd = os.pipe()
            os.write(write_fd, self.secret)
            os.close(write_fd)
        try:
            with open(os.path.join(d, "stdout.txt"), "wb") as out, \
                    open(os.path.join(d, "stderr.txt"), "wb") as err:
                proc = await asyncio.create_subprocess_exec(
                    *self._command(job, held, key_fd), cwd=d if job.kind == "compute" else
                    os.path.join(d, "work"), stdin=asyncio.subprocess.DEVNULL, stdout=out,
                    stderr=err, env=env, start_new_session=True,
                    pass_fds=() if key_fd is None else (key_fd,))
        finally:
            if key_fd is not None:
                os.close(key_fd)
        with contextlib.suppress(OSError):
            os.setpriority(os.PRIO_PROCESS, proc.pid, JOB_NICE)
        job.proc = proc
        job.pid = proc.pid
        held.started(proc.pid)
        self.store.save(job)
        if job.cancelling:  # cancelled while the runner was being started
            stopper = asyncio.get_running_loop().create_task(_stop_group(proc, signal.SIGINT))
            self.tasks.add(stopper)
            stopper.add_done_callback(self.tasks.discard)
        saved = time.monotonic()
        while True:
            try:
                await asyncio.wait_for(proc.wait(), POLL_SECONDS)
                break
            except TimeoutError:
                held.watch()
                self._read_progress(job)
                if time.monotonic() - saved > SAVE_SECONDS:
                    self.store.save(job)
                    saved = time.monotonic()
        return proc.returncode

    def _mark(self, job: Job) -> str:
        """The value of ``TILEGRAPH_JOB`` in the processes of ``job``: this service's data
        directory and the job's id."""
        return f"{self.data_dir}:{job.id}"

    def _finish(self, job: Job, code: int) -> None:
        d = self.job_dir(job.id)
        job.returncode = code
        job.finished = time.time()
        if job.cancelling:
            job.state = "cancelled"
            job.error = "cancelled"
            return
        if code == 0:
            job.state = "done"
            return
        job.state = "failed"
        record = protect.read_json_object(os.path.join(d, "error.json"), MAX_ERROR_BYTES)
        if record is not None and isinstance(record.get("error"), str) and \
                isinstance(record.get("traceback"), str):
            job.error = protect.mend(record["error"][:TAIL_BYTES])
            job.traceback = protect.mend(record["traceback"][-MAX_ERROR_BYTES:])
            return
        tail = _tail(os.path.join(d, "stderr.txt"))
        if code < 0:
            job.error = f"the job's process was killed by signal {-code}"
        else:
            job.error = f"the job's process exited with status {code}"
        job.traceback = tail or None

    def _read_progress(self, job: Job) -> None:
        """Take the progress the job's process last wrote (runs, tasks, bytes, the task of
        each worker, the plan summaries): at most ``MAX_PROGRESS_BYTES``, each field
        checked (:func:`checked_progress`); a file that is not a JSON object is ignored."""
        p = protect.read_json_object(os.path.join(self.job_dir(job.id), "progress.json"),
                                     MAX_PROGRESS_BYTES)
        if p is None:
            return
        for name, value in checked_progress(p).items():
            setattr(job, name, value)

    # -- cancel and stop -----------------------------------------------------------------------

    async def cancel(self, job: Job) -> None:
        """Cancel ``job``: a queued job never starts; a running one is interrupted and, if
        it does not stop, terminated then killed."""
        if job.state == "queued":
            with contextlib.suppress(ValueError):
                self.pending.remove(job.id)
            job.state = "cancelled"
            job.error = "cancelled before it started"
            job.finished = time.time()
            self.store.save(job)
            self._prune()
            return
        if job.state != "running" or job.cancelling:
            return
        job.cancelling = True
        if job.proc is not None:  # else its runner is being started: _watch stops it
            await _stop_group(job.proc, signal.SIGINT)

    async def shutdown(self) -> None:
        """Stop every job (the service is stopping): running ones are failed with that
        reason, queued ones too."""
        for job_id in self.pending:
            job = self.jobs[job_id]
            job.state = "failed"
            job.error = "the service stopped before the job started"
            job.finished = time.time()
            self.store.save(job)
        self.pending.clear()
        stopping = self.running()
        for job in stopping:
            job.error = "the service stopped while the job was running"
            job.cancelling = True  # a runner being started is stopped as it starts
        await asyncio.gather(*(_stop_group(j.proc, signal.SIGINT) for j in stopping
                               if j.proc is not None))
        if self.tasks:
            await asyncio.wait(list(self.tasks), timeout=3 * CANCEL_GRACE + reaper.KILL_WAIT)
        for job in stopping:
            job.state = "failed"
            job.error = "the service stopped while the job was running"
            job.traceback = None
            self.store.save(job)
        self.store.close()
        self._lock.close()


async def _stop_group(proc: Any, first: int) -> None:
    """Send ``first`` to the process group of ``proc``; SIGTERM, then SIGKILL, if it has not
    ended ``CANCEL_GRACE`` seconds after each."""
    for sig in (first, signal.SIGTERM, signal.SIGKILL):
        if proc.returncode is not None:
            break
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, sig)
        try:
            await asyncio.wait_for(asyncio.shield(proc.wait()), CANCEL_GRACE)
        except TimeoutError:
            continue
    # whatever else of the group is left (threads' children, a worker it started)
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)


def _lock_dir(data_dir: str) -> Any:
    """Hold ``DATA/service.lock`` while the service runs: a second service on the same data
    directory would fail the first one's running jobs as left behind."""
    import fcntl

    fd = os.open(os.path.join(data_dir, "service.lock"),
                 os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o600)
    f = os.fdopen(fd, "r+")
    try:
        fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        f.close()
        raise ValueError(f"another service uses the data directory {data_dir}; give each "
                         "service its own --data-dir") from None
    return f


def tail_text(path: str, limit: int = TAIL_BYTES) -> tuple[str, int]:
    """The last ``limit`` bytes of the regular file at ``path`` as text (invalid UTF-8
    replaced; a link is not followed) and how many bytes came before them."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return "", 0
    with os.fdopen(fd, "rb") as f:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return "", 0
        size = f.seek(0, os.SEEK_END)
        f.seek(max(0, size - limit))
        return f.read(limit).decode("utf-8", "replace"), max(0, size - limit)


def _tail(path: str) -> str:
    return tail_text(path)[0]
