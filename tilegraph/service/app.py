"""The service's ASGI application: the HTTP API, the live event streams and the dashboard.

Built on Starlette served by uvicorn: a small, maintained ASGI toolkit that gives what the
service needs (routing, streaming responses for Server-Sent Events, lifespan hooks, a test
client) and no more; uvicorn is its usual production server. FastAPI would add pydantic for
a handful of JSON bodies the service checks itself, and aiohttp brings its own server
rather than the ASGI standard. The OpenAPI description of the API is at
``/api/openapi.json`` (written out below, with the API).

Every request, the dashboard included, needs the token: ``Authorization: Bearer TOKEN``,
or ``?token=TOKEN`` in the URL (how the dashboard's address carries it, as Jupyter's does,
and how the browser's ``EventSource`` sends it). A request without it, or with another,
gets 401 and nothing else, before its body is read; a plan sent by the client is
deserialised only by the job's process, after authentication, and only with the MAC the
service sealed it with (:mod:`tilegraph.service.protect`). Request bodies larger than
``max_body`` bytes are refused (413).

Every bad request gets 400 with a JSON body ``{"error": ..., "field": ...}`` naming the
field and the problem, and leaves nothing behind (no record, no directory): a body that is
not UTF-8 JSON or nests deeper than ``MAX_JSON_DEPTH``, names with NUL, control characters,
lone surrogates or path separators, names over ``MAX_NAME_BYTES`` bytes, wrong types, too
many or too long arguments. Every JSON answer is written in ASCII (escapes for the rest), so
no stored text can make an answer fail to encode. What a job's process wrote is read with
bounds: standard output and error up to ``MAX_TEXT_BYTES`` each (the last ones), events
checked one by one before they are streamed (``MAX_EVENT_BYTES`` each, JSON objects with a
``type``, no carriage return that could split a Server-Sent Event).
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import json
import os
import re
import stat
from collections.abc import AsyncIterator
from importlib import resources
from typing import Any
from urllib.parse import parse_qs

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import (
    FileResponse,
    HTMLResponse,
    JSONResponse,
    Response,
    StreamingResponse,
)
from starlette.routing import Route

from tilegraph.service import protect
from tilegraph.service.jobs import DEFAULT_KEEP, JobManager, tail_text
from tilegraph.service.protect import MAX_JSON_DEPTH, MAX_NAME_BYTES, BadInput
from tilegraph.service.records import FINISHED

DEFAULT_MAX_BODY = 256 << 20  # bytes of a request body (a script, a plan with its inputs)
STREAM_POLL = 0.25  # seconds between reads of a running job's event file by a stream
STREAM_CHUNK = 1 << 20  # most bytes of events in one message of a stream
MAX_EVENT_BYTES = 1 << 20  # one event (a line of events.jsonl); longer ones are skipped
HEARTBEAT = 15.0  # seconds between comments on an idle stream (keeps proxies from closing it)
BULKY = ("plan", "traceback", "args", "outputs")  # left out of brief job lists
MAX_ARGS = 4096  # arguments of a script
MAX_ARGS_BYTES = 256 << 10  # their bytes (UTF-8) together
MAX_OUTPUTS = 1024  # declared outputs of a script
MAX_TEXT_BYTES = 16 << 20  # of a job's standard output or error in its result (the last)
_NUMBER = re.compile(r"[0-9]{1,18}")
__all__ = ["MAX_JSON_DEPTH", "MAX_NAME_BYTES", "create_app"]


class BodyTooLarge(Exception):
    pass


class JSONAnswer(JSONResponse):
    """A JSON answer in ASCII: text that is not valid UTF-8 (a lone surrogate) is escaped,
    never an error."""

    def render(self, content: Any) -> bytes:
        return json.dumps(content, ensure_ascii=True, allow_nan=False,
                          separators=(",", ":")).encode("ascii")


class TokenAuth:
    """ASGI middleware: every HTTP request needs the token (Bearer header or ``token``
    query parameter); anything else gets 401 and an empty body."""

    def __init__(self, app: Any, token: str):
        self.app = app
        self.token = token.encode()

    def _allowed(self, scope: dict[str, Any]) -> bool:
        for name, value in scope.get("headers", ()):
            if name == b"authorization":
                scheme, _, given = value.partition(b" ")
                if scheme.lower() == b"bearer" and hmac.compare_digest(given.strip(),
                                                                       self.token):
                    return True
        query = scope.get("query_string", b"")
        if b"token=" in query:
            for given in parse_qs(query.decode("latin-1")).get("token", []):
                if hmac.compare_digest(given.encode("latin-1"), self.token):
                    return True
        return False

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "http" and not self._allowed(scope):
            await send({"type": "http.response.start", "status": 401,
                        "headers": [(b"content-length", b"0"),
                                    (b"www-authenticate", b"Bearer")]})
            await send({"type": "http.response.body", "body": b""})
            return
        await self.app(scope, receive, send)


async def _read_body(request: Request, limit: int) -> bytes:
    length = request.headers.get("content-length")
    if length is not None and length.isascii() and length.isdigit() and int(length) > limit:
        raise BodyTooLarge
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise BodyTooLarge
        chunks.append(chunk)
    return b"".join(chunks)


def _error(status: int, message: str, field: str | None = None) -> JSONResponse:
    body = {"error": message} if field is None else {"error": message, "field": field}
    return JSONAnswer(body, status_code=status)


def _number(text: str | None) -> int | None:
    """The non-negative integer ``text`` writes in ASCII digits (at most 18), or None."""
    return int(text) if text is not None and _NUMBER.fullmatch(text) else None


def _inside(work: str, name: str) -> str | None:
    """The real path of output ``name`` of a job whose directory is ``work``, if it is a
    file there (links are followed only while they stay inside the directory)."""
    root = os.path.realpath(work)
    path = os.path.realpath(os.path.join(work, name))
    if os.path.commonpath([root, path]) != root or not os.path.isfile(path):
        return None
    return path


def _check_script(body: Any) -> tuple[str, bytes, list[str], list[str]]:
    """The name, source, arguments and declared outputs of a script submission, or
    :class:`BadInput` naming the field that is wrong and how."""
    if not isinstance(body, dict):
        raise BadInput("body", "the body must be a JSON object with 'script' (the source)")
    unknown = sorted(set(body) - {"script", "name", "args", "outputs"})
    if unknown:
        shown = ", ".join(unknown[:10]) + (", ..." if len(unknown) > 10 else "")
        raise BadInput(unknown[0], f"unknown field(s) {shown}; known: script, name, args, "
                                   "outputs")
    source = body.get("script")
    if not isinstance(source, str) or not source.strip():
        raise BadInput("script", "'script' must be the script's source text (a non-empty "
                                 "string)")
    protect.check_text(source, "script")
    name = protect.check_script_name(body.get("name", "script.py"), "name")
    args = body.get("args", [])
    if not isinstance(args, list):
        raise BadInput("args", "'args' must be a list of strings")
    if len(args) > MAX_ARGS:
        raise BadInput("args", f"'args' has {len(args)} items; at most {MAX_ARGS}")
    for i, a in enumerate(args):
        if not isinstance(a, str):
            raise BadInput(f"args[{i}]", f"'args' must be a list of strings; args[{i}] is "
                                         f"{type(a).__name__}")
        protect.check_text(a, f"args[{i}]", nul=False)
    size = sum(len(a.encode()) + 1 for a in args)
    if size > MAX_ARGS_BYTES:
        raise BadInput("args", f"'args' take {size} bytes; at most {MAX_ARGS_BYTES}")
    outputs = body.get("outputs", [])
    if not isinstance(outputs, list):
        raise BadInput("outputs", "'outputs' must be a list of file paths relative to the "
                                  "script's directory")
    if len(outputs) > MAX_OUTPUTS:
        raise BadInput("outputs", f"'outputs' has {len(outputs)} items; at most "
                                  f"{MAX_OUTPUTS}")
    checked = []
    for i, o in enumerate(outputs):
        if not isinstance(o, str):
            raise BadInput(f"outputs[{i}]", "'outputs' must be a list of file paths relative "
                                            f"to the script's directory; outputs[{i}] is "
                                            f"{type(o).__name__}")
        checked.append(protect.check_relative_path(o, f"outputs[{i}]"))
    return name, source.encode(), args, checked


class _Service:
    """The request handlers of :func:`create_app`, one method per route, over the job
    manager, the pool and the body limit they share."""

    def __init__(self, manager: JobManager, pool: Any, max_body: int) -> None:
        self.manager = manager
        self.pool = pool
        self.max_body = max_body

    def job_or_404(self, request: Request) -> Any:
        return self.manager.get(request.path_params["job_id"])

    async def dashboard(self, request: Request) -> Response:
        page = resources.files("tilegraph.service").joinpath("dashboard.html").read_text()
        return HTMLResponse(page, headers={"cache-control": "no-store",
                                           "referrer-policy": "no-referrer"})

    async def openapi(self, request: Request) -> Response:
        return JSONAnswer(OPENAPI)

    async def info(self, request: Request) -> Response:
        from tilegraph import __version__

        return JSONAnswer({"version": __version__, "pool": self.pool.kind,
                           "description": self.pool.describe(),
                           "max_jobs": self.manager.max_jobs, "max_body": self.max_body,
                           "job_processes": self.manager.processes,
                           "max_name_bytes": MAX_NAME_BYTES})

    async def list_jobs(self, request: Request) -> Response:
        q = request.query_params
        limit = q.get("limit")
        if limit is not None and not _number(limit):
            return _error(400, f"limit must be a positive integer, got {limit!r}", "limit")
        brief = q.get("brief", "0")
        if brief not in ("0", "1"):
            return _error(400, f"brief must be 0 or 1, got {brief!r}", "brief")
        jobs = sorted(self.manager.jobs.values(), key=lambda j: j.created, reverse=True)
        if limit is not None:
            jobs = jobs[:int(limit)]
        if brief == "1":
            return JSONAnswer([{k: v for k, v in j.public().items() if k not in BULKY}
                               for j in jobs])
        return JSONAnswer([j.public() for j in jobs])

    async def submit(self, request: Request) -> Response:
        try:
            body = await _read_body(request, self.max_body)
        except BodyTooLarge:
            return _error(413, f"the request body is larger than the limit of {self.max_body} "
                               "bytes")
        ctype = request.headers.get("content-type", "").split(";")[0].strip()
        try:
            if ctype == "application/octet-stream":
                if not body:
                    raise BadInput("body", "the body must be a pickled plan made by "
                                           "tilegraph.Client.compute")
                name = protect.check_name(request.query_params.get("name", "compute"),
                                          "name")
                job = self.manager.submit_plan(body, name)
            elif ctype == "application/json":
                name, source, args, outputs = _check_script(protect.loads_json(body))
                job = self.manager.submit_script(name, source, args, outputs)
            else:
                return _error(415, "submit a script as application/json or a plan as "
                                   "application/octet-stream", "content-type")
        except BadInput as exc:
            return _error(400, str(exc), exc.field)
        except OSError as exc:
            return _error(500, f"the service could not store the job: {exc.strerror}")
        return JSONAnswer({"id": job.id, "state": job.state}, status_code=201)

    async def get_job(self, request: Request) -> Response:
        job = self.job_or_404(request)
        if job is None:
            return _error(404, f"no job {request.path_params['job_id']!r}")
        return JSONAnswer(job.public())

    async def cancel(self, request: Request) -> Response:
        job = self.job_or_404(request)
        if job is None:
            return _error(404, f"no job {request.path_params['job_id']!r}")
        purge = request.query_params.get("purge", "0")
        if purge not in ("0", "1"):
            return _error(400, f"purge must be 0 or 1, got {purge!r}", "purge")
        if purge == "1":
            try:
                self.manager.purge(job)
            except ValueError as exc:
                return _error(409, str(exc))
            return Response(status_code=204)
        await self.manager.cancel(job)
        return JSONAnswer(job.public())

    async def result(self, request: Request) -> Response:
        job = self.job_or_404(request)
        if job is None:
            return _error(404, f"no job {request.path_params['job_id']!r}")
        d = self.manager.job_dir(job.id)
        if job.kind == "compute":
            if job.state != "done":
                return _error(409, f"job {job.id} is {job.state}: it has no arrays"
                              + (f" ({job.error})" if job.error else ""))
            path = os.path.join(d, "result.npz")
            try:
                regular = stat.S_ISREG(os.lstat(path).st_mode)
            except OSError:
                regular = False
            if not regular:  # missing, or a link someone put there: not served
                return _error(404, f"job {job.id} has no result file (or not a regular "
                                   "one)")
            return FileResponse(path, media_type="application/octet-stream")
        if job.state not in FINISHED:
            return _error(409, f"job {job.id} is {job.state}; its result comes when it ends")
        work = os.path.join(d, "work")
        files = {}
        for name in job.outputs:
            path = _inside(work, name)
            if path is not None:
                files[name] = {"size": os.path.getsize(path),
                               "url": f"/api/jobs/{job.id}/files/{name}"}
        return JSONAnswer({"id": job.id, "state": job.state,
                           "stdout": _text(os.path.join(d, "stdout.txt")),
                           "stderr": _text(os.path.join(d, "stderr.txt")),
                           "files": files,
                           "missing": [n for n in job.outputs if n not in files]})

    async def get_file(self, request: Request) -> Response:
        job = self.job_or_404(request)
        if job is None:
            return _error(404, f"no job {request.path_params['job_id']!r}")
        try:
            name = protect.check_relative_path(request.path_params["name"], "name")
        except BadInput as exc:
            return _error(400, str(exc), exc.field)
        if name not in job.outputs:
            return _error(404, f"{name!r} is not a declared output of job {job.id}")
        if job.state not in FINISHED:
            return _error(409, f"job {job.id} is {job.state}; its files come when it ends")
        work = os.path.join(self.manager.job_dir(job.id), "work")
        path = _inside(work, name)
        if path is None:
            if os.path.lexists(os.path.join(work, name)):
                return _error(403, f"{name!r} of job {job.id} leads out of the job's "
                                   "directory (a link): it is not served")
            return _error(404, f"job {job.id} did not write {name!r}")
        return FileResponse(path, media_type="application/octet-stream")

    async def events(self, request: Request) -> Response:
        job = self.job_or_404(request)
        if job is None:
            return _error(404, f"no job {request.path_params['job_id']!r}")
        path = os.path.join(self.manager.job_dir(job.id), "events.jsonl")
        start = request.headers.get("last-event-id") or request.query_params.get("from", "0")
        offset = _number(start)
        if offset is None:
            return _error(400, f"the stream resumes from a byte offset (Last-Event-ID or "
                               f"from=), got {start!r}", "from")
        return StreamingResponse(_event_stream(job, path, offset),
                                 media_type="text/event-stream",
                                 headers={"cache-control": "no-store",
                                          "x-accel-buffering": "no"})

    async def workers(self, request: Request) -> Response:
        try:
            found = self.pool.workers(self.manager.running())
        except Exception as exc:
            return _error(503, f"the pool did not answer: {type(exc).__name__}: {exc}")
        try:
            return JSONAnswer(found)
        except (TypeError, ValueError) as exc:  # a value JSON cannot hold (NaN, bytes)
            return _error(503, f"the pool's answer is not JSON: {exc}")

    def routes(self) -> list[Route]:
        return [
            Route("/", self.dashboard),
            Route("/api/openapi.json", self.openapi),
            Route("/api/info", self.info),
            Route("/api/jobs", self.list_jobs, methods=["GET"]),
            Route("/api/jobs", self.submit, methods=["POST"]),
            Route("/api/jobs/{job_id}", self.get_job, methods=["GET"]),
            Route("/api/jobs/{job_id}", self.cancel, methods=["DELETE"]),
            Route("/api/jobs/{job_id}/result", self.result),
            Route("/api/jobs/{job_id}/files/{name:path}", self.get_file),
            Route("/api/jobs/{job_id}/events", self.events),
            Route("/api/workers", self.workers),
        ]


def create_app(data_dir: str, pool: Any, token: str, *, max_jobs: int = 2,
               max_body: int = DEFAULT_MAX_BODY, keep: int | None = DEFAULT_KEEP) -> Any:
    """The service as an ASGI application: jobs kept in ``data_dir``, run on ``pool``
    (:mod:`tilegraph.service.pool`), at most ``max_jobs`` at once, every request
    authenticated with ``token``, request bodies of at most ``max_body`` bytes, the
    ``keep`` newest finished jobs kept (``None``: all)."""
    if not isinstance(token, str) or len(token) < 8:
        raise ValueError("the token must be a string of at least 8 characters")
    if isinstance(max_body, bool) or not isinstance(max_body, int) or max_body < 1:
        raise ValueError(f"max_body must be a positive number of bytes, got {max_body!r}")
    manager = JobManager(data_dir, pool, max_jobs, keep)

    @contextlib.asynccontextmanager
    async def lifespan(app: Any) -> AsyncIterator[None]:
        try:
            yield
        finally:
            await manager.shutdown()

    app = Starlette(routes=_Service(manager, pool, max_body).routes(), lifespan=lifespan)
    app.state.manager = manager
    return TokenAuth(app, token)


def _line_start(path: str, start: int) -> int:
    """``start`` if it is 0 or follows a newline of the file at ``path``, else the offset
    after the next newline (the file's size at most)."""
    if start <= 0:
        return 0
    try:
        with open(path, "rb") as f:
            size = f.seek(0, os.SEEK_END)
            start = min(start, size)
            f.seek(start - 1)
            while True:
                block = f.read(STREAM_CHUNK)
                if not block:
                    return f.tell()
                cut = block.find(b"\n")
                if cut >= 0:
                    return f.tell() - len(block) + cut + 1
    except FileNotFoundError:
        return 0


def _text(path: str) -> str:
    """A job's standard output or error: the last ``MAX_TEXT_BYTES`` of it, after a line
    saying how many bytes before them are left out."""
    text, before = tail_text(path, MAX_TEXT_BYTES)
    if before:
        cut = text.find("\n") + 1  # from a whole line on
        before += len(text[:cut].encode("utf-8"))
        text = f"[{before} bytes before are left out]\n" + text[cut:]
    return text


def _checked_events(lines: list[bytes]) -> list[str]:
    """The lines of an event file that are events: at most ``MAX_EVENT_BYTES``, without a
    carriage return, a JSON object with a string ``type`` (what a job's process, or someone
    else, wrote there is not trusted); as text."""
    out = []
    for raw in lines:
        if len(raw) > MAX_EVENT_BYTES or b"\r" in raw:
            continue
        text = raw.decode("utf-8", "replace")
        try:
            value = json.loads(text)
        except (ValueError, RecursionError):
            continue
        if isinstance(value, dict) and isinstance(value.get("type"), str):
            out.append(text)
    return out


async def _event_stream(job: Any, path: str, start: int = 0) -> AsyncIterator[str]:
    """Server-Sent Events of a job: each message's data is a JSON list of events (as the
    job's process wrote them), from byte ``start`` of its event file (the first event by
    default); ``event: end`` when the job has ended. Each message's ``id`` is the offset
    just after its events, so a client that reconnects (an ``EventSource`` sends it back as
    ``Last-Event-ID``) gets only what it has not seen. An offset that is not the start of an
    event, or beyond the file, starts at the next event."""
    offset, partial, skipping = _line_start(path, start), b"", False
    idle = 0.0
    yield f"event: state\ndata: {json.dumps(job.state)}\n\n"
    while True:
        ended = job.state in FINISHED
        data = b""
        with contextlib.suppress(OSError):
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
            with os.fdopen(fd, "rb") as f:
                f.seek(offset)
                data = f.read(STREAM_CHUNK)
        if data:
            offset += len(data)
            data = partial + data
            cut = data.rfind(b"\n") + 1
            partial = data[cut:]
            lines = data[:cut].split(b"\n")[:-1]
            if skipping and cut:  # the rest of an over-long event
                lines, skipping = lines[1:], False
            if len(partial) > MAX_EVENT_BYTES:  # no end in sight: skipped to its end
                partial, skipping = b"", True
            events = _checked_events(lines)
            if events:
                yield f"id: {offset - len(partial)}\ndata: [" + ",".join(events) + "]\n\n"
            idle = 0.0
            continue
        if ended:
            yield f"event: end\ndata: {json.dumps(job.state)}\n\n"
            return
        await asyncio.sleep(STREAM_POLL)
        idle += STREAM_POLL
        if idle >= HEARTBEAT:
            idle = 0.0
            yield ": idle\n\n"


def _op(summary: str, params: list[str] | None = None, body: str | None = None,
        responses: dict[str, str] | None = None) -> dict[str, Any]:
    op: dict[str, Any] = {"summary": summary, "security": [{"bearer": []}],
                          "responses": {"401": {"description": "missing or wrong token"},
                                        **{k: {"description": v}
                                           for k, v in (responses or {}).items()}}}
    if params:
        op["parameters"] = [{"name": p, "in": "path", "required": True,
                             "schema": {"type": "string"}} for p in params]
    if body:
        op["requestBody"] = {"description": body, "content": {
            "application/json": {"schema": {"$ref": "#/components/schemas/ScriptJob"}},
            "application/octet-stream": {"schema": {"type": "string", "format": "binary"}}}}
    return op


OPENAPI: dict[str, Any] = {
    "openapi": "3.0.3",
    "info": {"title": "tilegraph service", "version": "1"},
    "components": {
        "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
        "schemas": {
            "ScriptJob": {"type": "object", "required": ["script"], "properties": {
                "script": {"type": "string", "description": "the script's source"},
                "name": {"type": "string", "description": "its file name (*.py)"},
                "args": {"type": "array", "items": {"type": "string"}},
                "outputs": {"type": "array", "items": {"type": "string"},
                            "description": "files the script writes, relative to its "
                                           "directory, returned with the result"}}},
            "Job": {"type": "object", "properties": {k: {} for k in (
                "id", "kind", "name", "state", "created", "started", "finished", "elapsed",
                "tasks_done", "tasks_total", "progress", "runs", "held_bytes", "peak_bytes",
                "spilled_bytes", "error", "traceback", "returncode", "plan", "args",
                "outputs")}},
        },
    },
    "paths": {
        "/api/jobs": {
            "get": {**_op("the jobs' records, newest first (query: limit=N; brief=1 leaves "
                          "out plan, traceback, args and outputs)",
                          responses={"200": "a list of Job", "400": "a bad query"}),
                    "parameters": [
                        {"name": "limit", "in": "query", "schema": {"type": "integer"}},
                        {"name": "brief", "in": "query", "schema": {"type": "integer"}}]},
            "post": _op("submit a job: a script (JSON) or a plan made by "
                        "tilegraph.Client.compute (octet-stream)",
                        body="a ScriptJob, or a pickled plan",
                        responses={"201": "{id, state}",
                                   "400": "a bad submission: {error, field}",
                                   "413": "the body is over the size limit",
                                   "415": "another content type"}),
        },
        "/api/jobs/{job_id}": {
            "get": _op("a job's record: state, tasks done/total, bytes held/spilled, "
                       "timings, error and traceback", ["job_id"],
                       responses={"200": "a Job", "404": "no such job"}),
            "delete": {**_op("cancel a job: its tasks stop being taken, its blocks are freed; "
                             "with purge=1, remove a finished job (record and files)",
                             ["job_id"], responses={"200": "the Job", "204": "removed",
                                                    "404": "no such job",
                                                    "409": "purge of a job not ended"}),
                       "parameters": [
                           {"name": "job_id", "in": "path", "required": True,
                            "schema": {"type": "string"}},
                           {"name": "purge", "in": "query", "schema": {"type": "integer"}}]},
        },
        "/api/jobs/{job_id}/result": {
            "get": _op("a script's standard output and declared files; a plan's arrays "
                       "(.npz)", ["job_id"],
                       responses={"200": "the result", "409": "the job has not ended"}),
        },
        "/api/jobs/{job_id}/files/{name}": {
            "get": _op("a file a script declared", ["job_id", "name"],
                       responses={"200": "the file's bytes", "400": "a bad name",
                                  "404": "not declared or absent"}),
        },
        "/api/jobs/{job_id}/events": {
            "get": {**_op("Server-Sent Events: JSON lists of the job's typed run events "
                          "(RunStart, TaskStart, TaskEnd, Release, Spill, ..., RunEnd); "
                          "'end' when it ends; each message's id is a byte offset to resume "
                          "from (Last-Event-ID header or from=)", ["job_id"],
                          responses={"200": "text/event-stream", "400": "a bad offset"}),
                    "parameters": [
                        {"name": "job_id", "in": "path", "required": True,
                         "schema": {"type": "string"}},
                        {"name": "from", "in": "query", "schema": {"type": "integer"}}]},
        },
        "/api/workers": {
            "get": _op("the pool's workers: id, pid, host, task, lease_expires, rss, "
                       "started", responses={"200": "a list of workers"}),
        },
        "/api/info": {"get": _op("the version, the pool, the limits and how a job's "
                                 "processes are held", responses={"200": "info"})},
    },
}
