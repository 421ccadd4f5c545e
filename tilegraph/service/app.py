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
deserialised only by the job's process, after authentication. Request bodies larger than
``max_body`` bytes are refused (413).
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import json
import os
import re
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

from tilegraph.service.jobs import DEFAULT_KEEP, FINISHED, JobManager

DEFAULT_MAX_BODY = 256 << 20  # bytes of a request body (a script, a plan with its inputs)
STREAM_POLL = 0.25  # seconds between reads of a running job's event file by a stream
STREAM_CHUNK = 1 << 20  # most bytes of events in one message of a stream
HEARTBEAT = 15.0  # seconds between comments on an idle stream (keeps proxies from closing it)
_NAME = re.compile(r"^[A-Za-z0-9_.-]+\.py$")
BULKY = ("plan", "traceback", "args", "outputs")  # left out of brief job lists


class BodyTooLarge(Exception):
    pass


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
    if length is not None and length.isdigit() and int(length) > limit:
        raise BodyTooLarge
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise BodyTooLarge
        chunks.append(chunk)
    return b"".join(chunks)


def _error(status: int, message: str) -> JSONResponse:
    return JSONResponse({"error": message}, status_code=status)


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
    ValueError naming what is wrong."""
    if not isinstance(body, dict):
        raise ValueError("the body must be a JSON object with 'script' (the source)")
    unknown = sorted(set(body) - {"script", "name", "args", "outputs"})
    if unknown:
        raise ValueError(f"unknown field(s) {', '.join(unknown)}; known: script, name, args, "
                         "outputs")
    source = body.get("script")
    if not isinstance(source, str) or not source.strip():
        raise ValueError("'script' must be the script's source text (a non-empty string)")
    name = body.get("name", "script.py")
    if not isinstance(name, str) or not _NAME.match(name) or name.startswith("."):
        raise ValueError(f"'name' must be a file name ending in .py (letters, digits, "
                         f"'_', '-', '.'), got {name!r}")
    args = body.get("args", [])
    if not isinstance(args, list) or not all(isinstance(a, str) for a in args):
        raise ValueError("'args' must be a list of strings")
    outputs = body.get("outputs", [])
    if not isinstance(outputs, list) or not all(isinstance(o, str) for o in outputs):
        raise ValueError("'outputs' must be a list of file paths relative to the script's "
                         "directory")
    for o in outputs:
        norm = os.path.normpath(o)
        if not o or os.path.isabs(o) or norm.startswith("..") or norm == ".":
            raise ValueError(f"output {o!r} must be a path inside the script's directory")
    return name, source.encode(), args, [os.path.normpath(o) for o in outputs]


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

    def job_or_404(request: Request) -> Any:
        return manager.get(request.path_params["job_id"])

    async def dashboard(request: Request) -> Response:
        page = resources.files("tilegraph.service").joinpath("dashboard.html").read_text()
        return HTMLResponse(page, headers={"cache-control": "no-store",
                                           "referrer-policy": "no-referrer"})

    async def openapi(request: Request) -> Response:
        return JSONResponse(OPENAPI)

    async def info(request: Request) -> Response:
        from tilegraph import __version__

        return JSONResponse({"version": __version__, "pool": pool.kind,
                             "description": pool.describe(), "max_jobs": manager.max_jobs,
                             "max_body": max_body})

    async def list_jobs(request: Request) -> Response:
        q = request.query_params
        limit = q.get("limit")
        if limit is not None and not (limit.isdigit() and int(limit) > 0):
            return _error(400, f"limit must be a positive integer, got {limit!r}")
        brief = q.get("brief", "0")
        if brief not in ("0", "1"):
            return _error(400, f"brief must be 0 or 1, got {brief!r}")
        jobs = sorted(manager.jobs.values(), key=lambda j: j.created, reverse=True)
        if limit is not None:
            jobs = jobs[:int(limit)]
        if brief == "1":
            return JSONResponse([{k: v for k, v in j.public().items() if k not in BULKY}
                                 for j in jobs])
        return JSONResponse([j.public() for j in jobs])

    async def submit(request: Request) -> Response:
        try:
            body = await _read_body(request, max_body)
        except BodyTooLarge:
            return _error(413, f"the request body is larger than the limit of {max_body} "
                               "bytes")
        ctype = request.headers.get("content-type", "").split(";")[0].strip()
        if ctype == "application/octet-stream":
            if not body:
                return _error(400, "the body must be a pickled plan made by "
                                   "tilegraph.Client.compute")
            job = manager.submit_plan(body, request.query_params.get("name", "compute"))
        elif ctype == "application/json":
            try:
                try:
                    decoded = json.loads(body)
                except ValueError as exc:
                    raise ValueError(f"the body is not valid JSON: {exc}") from None
                name, source, args, outputs = _check_script(decoded)
            except ValueError as exc:
                return _error(400, str(exc))
            job = manager.submit_script(name, source, args, outputs)
        else:
            return _error(415, "submit a script as application/json or a plan as "
                               "application/octet-stream")
        return JSONResponse({"id": job.id, "state": job.state}, status_code=201)

    async def get_job(request: Request) -> Response:
        job = job_or_404(request)
        if job is None:
            return _error(404, f"no job {request.path_params['job_id']!r}")
        return JSONResponse(job.public())

    async def cancel(request: Request) -> Response:
        job = job_or_404(request)
        if job is None:
            return _error(404, f"no job {request.path_params['job_id']!r}")
        purge = request.query_params.get("purge", "0")
        if purge not in ("0", "1"):
            return _error(400, f"purge must be 0 or 1, got {purge!r}")
        if purge == "1":
            try:
                manager.purge(job)
            except ValueError as exc:
                return _error(409, str(exc))
            return Response(status_code=204)
        await manager.cancel(job)
        return JSONResponse(job.public())

    async def result(request: Request) -> Response:
        job = job_or_404(request)
        if job is None:
            return _error(404, f"no job {request.path_params['job_id']!r}")
        d = manager.job_dir(job.id)
        if job.kind == "compute":
            if job.state != "done":
                return _error(409, f"job {job.id} is {job.state}: it has no arrays"
                              + (f" ({job.error})" if job.error else ""))
            return FileResponse(os.path.join(d, "result.npz"),
                                media_type="application/octet-stream")
        if job.state not in FINISHED:
            return _error(409, f"job {job.id} is {job.state}; its result comes when it ends")
        work = os.path.join(d, "work")
        files = {}
        for name in job.outputs:
            path = _inside(work, name)
            if path is not None:
                files[name] = {"size": os.path.getsize(path),
                               "url": f"/api/jobs/{job.id}/files/{name}"}
        return JSONResponse({"id": job.id, "state": job.state,
                             "stdout": _text(os.path.join(d, "stdout.txt")),
                             "stderr": _text(os.path.join(d, "stderr.txt")),
                             "files": files,
                             "missing": [n for n in job.outputs if n not in files]})

    async def get_file(request: Request) -> Response:
        job = job_or_404(request)
        if job is None:
            return _error(404, f"no job {request.path_params['job_id']!r}")
        name = os.path.normpath(request.path_params["name"])
        if name not in job.outputs:
            return _error(404, f"{name!r} is not a declared output of job {job.id}")
        if job.state not in FINISHED:
            return _error(409, f"job {job.id} is {job.state}; its files come when it ends")
        work = os.path.join(manager.job_dir(job.id), "work")
        path = _inside(work, name)
        if path is None:
            if os.path.lexists(os.path.join(work, name)):
                return _error(403, f"{name!r} of job {job.id} leads out of the job's "
                                   "directory (a link): it is not served")
            return _error(404, f"job {job.id} did not write {name!r}")
        return FileResponse(path, media_type="application/octet-stream")

    async def events(request: Request) -> Response:
        job = job_or_404(request)
        if job is None:
            return _error(404, f"no job {request.path_params['job_id']!r}")
        path = os.path.join(manager.job_dir(job.id), "events.jsonl")
        start = request.headers.get("last-event-id") or request.query_params.get("from", "0")
        if not start.isdigit():
            return _error(400, f"the stream resumes from a byte offset (Last-Event-ID or "
                               f"from=), got {start!r}")
        return StreamingResponse(_event_stream(job, path, int(start)),
                                 media_type="text/event-stream",
                                 headers={"cache-control": "no-store",
                                          "x-accel-buffering": "no"})

    async def workers(request: Request) -> Response:
        try:
            found = pool.workers(manager.running())
        except Exception as exc:
            return _error(503, f"the pool did not answer: {type(exc).__name__}: {exc}")
        return JSONResponse(found)

    @contextlib.asynccontextmanager
    async def lifespan(app: Any) -> AsyncIterator[None]:
        try:
            yield
        finally:
            await manager.shutdown()

    routes = [
        Route("/", dashboard),
        Route("/api/openapi.json", openapi),
        Route("/api/info", info),
        Route("/api/jobs", list_jobs, methods=["GET"]),
        Route("/api/jobs", submit, methods=["POST"]),
        Route("/api/jobs/{job_id}", get_job, methods=["GET"]),
        Route("/api/jobs/{job_id}", cancel, methods=["DELETE"]),
        Route("/api/jobs/{job_id}/result", result),
        Route("/api/jobs/{job_id}/files/{name:path}", get_file),
        Route("/api/jobs/{job_id}/events", events),
        Route("/api/workers", workers),
    ]
    app = Starlette(routes=routes, lifespan=lifespan)
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
    try:
        with open(path, "rb") as f:
            return f.read().decode("utf-8", "replace")
    except OSError:
        return ""


async def _event_stream(job: Any, path: str, start: int = 0) -> AsyncIterator[str]:
    """Server-Sent Events of a job: each message's data is a JSON list of events (as the
    job's process wrote them), from byte ``start`` of its event file (the first event by
    default); ``event: end`` when the job has ended. Each message's ``id`` is the offset
    just after its events, so a client that reconnects (an ``EventSource`` sends it back as
    ``Last-Event-ID``) gets only what it has not seen. An offset that is not the start of an
    event, or beyond the file, starts at the next event."""
    offset, partial = _line_start(path, start), b""
    idle = 0.0
    yield f"event: state\ndata: {json.dumps(job.state)}\n\n"
    while True:
        ended = job.state in FINISHED
        data = b""
        with contextlib.suppress(FileNotFoundError):
            with open(path, "rb") as f:
                f.seek(offset)
                data = f.read(STREAM_CHUNK)
        if data:
            offset += len(data)
            data = partial + data
            cut = data.rfind(b"\n") + 1
            partial = data[cut:]
            lines = data[:cut].decode("utf-8", "replace").splitlines()
            if lines:
                yield f"id: {offset - len(partial)}\ndata: [" + ",".join(lines) + "]\n\n"
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
                        responses={"201": "{id, state}", "400": "a bad submission",
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
                       responses={"200": "the file's bytes", "404": "not declared or absent"}),
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
        "/api/info": {"get": _op("the version and the pool", responses={"200": "info"})},
    },
}
