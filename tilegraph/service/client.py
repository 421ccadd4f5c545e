"""The Python client of the service (standard-library HTTP only: no web stack needed,
imported when the first request is made).

>>> import tilegraph
>>> client = tilegraph.Client("http://127.0.0.1:8786", token="0123456789abcdef")
>>> client.address
'http://127.0.0.1:8786'
"""

from __future__ import annotations

import io
import json
import os
import time
import urllib.parse
from typing import Any

import numpy as np


class ServiceError(RuntimeError):
    """The service answered with an error: ``status`` is the HTTP status."""

    def __init__(self, status: int, message: str):
        super().__init__(f"HTTP {status}: {message}")
        self.status = status


class JobFailed(RuntimeError):
    """A job ended failed or cancelled; ``job`` is its record (with ``traceback``)."""

    def __init__(self, job: dict[str, Any]):
        detail = f"\n{job['traceback']}" if job.get("traceback") else ""
        super().__init__(f"job {job['id']} {job['state']}: {job.get('error')}{detail}")
        self.job = job


class Client:
    """A connection to a tilegraph service at ``address`` (``http(s)://host:port``) with its
    ``token`` (default: ``$TILEGRAPH_TOKEN``); ``timeout``: seconds per HTTP request;
    ``cafile``: the certificate (PEM) that signed an https service's, when it is not one
    the system trusts (a self-signed one)."""

    def __init__(self, address: str, token: str | None = None, timeout: float = 60.0,
                 cafile: str | None = None):
        if not isinstance(address, str):
            raise TypeError(f"address must be a URL string, got {type(address).__name__}")
        parts = urllib.parse.urlsplit(address)
        if parts.scheme not in ("http", "https") or not parts.netloc:
            raise ValueError(f"address must be an http:// or https:// URL, got {address!r}")
        token = token if token is not None else os.environ.get("TILEGRAPH_TOKEN")
        if not token or not isinstance(token, str):
            raise ValueError("a token is needed: pass token=... (printed by `tilegraph "
                             "serve`) or set TILEGRAPH_TOKEN")
        if not (isinstance(timeout, (int, float)) and timeout > 0):
            raise ValueError(f"timeout must be a positive number of seconds, got {timeout!r}")
        self._context = None
        if cafile is not None:
            import ssl

            if not os.path.isfile(cafile):
                raise FileNotFoundError(f"no such certificate file: {cafile!r}")
            self._context = ssl.create_default_context(cafile=cafile)
        self.address = f"{parts.scheme}://{parts.netloc}"
        self._token = token
        self.timeout = float(timeout)
        self._max_body: int | None = None

    def __repr__(self) -> str:
        return f"Client({self.address!r})"

    # -- HTTP ----------------------------------------------------------------------------------

    def _request(self, method: str, path: str, body: bytes | None = None,
                 content_type: str | None = None) -> bytes:
        import urllib.error  # here: `import tilegraph` does not pay for HTTP and TLS
        import urllib.request

        req = urllib.request.Request(self.address + path, data=body, method=method)
        req.add_header("Authorization", f"Bearer {self._token}")
        if content_type:
            req.add_header("Content-Type", content_type)
        try:
            with urllib.request.urlopen(req, timeout=self.timeout,
                                        context=self._context) as resp:
                return resp.read()
        except urllib.error.HTTPError as exc:
            raw = exc.read()
            try:
                message = json.loads(raw)["error"]
            except (ValueError, KeyError, TypeError):
                message = raw.decode("utf-8", "replace") or exc.reason
            if exc.code == 401:
                message = "unauthorized: the token is missing or wrong"
            raise ServiceError(exc.code, str(message)) from None

    def _json(self, method: str, path: str, body: Any = None) -> Any:
        data = None if body is None else json.dumps(body).encode()
        return json.loads(self._request(method, path, data,
                                        "application/json" if data else None))

    @staticmethod
    def _id(job_id: Any) -> str:
        if isinstance(job_id, dict):
            job_id = job_id.get("id")
        if not isinstance(job_id, str) or not job_id.isalnum():
            raise ValueError(f"a job id is a string of letters and digits, got {job_id!r}")
        return job_id

    # -- jobs ----------------------------------------------------------------------------------

    def submit(self, path: str, args: list[str] | tuple[str, ...] = (),
               outputs: list[str] | tuple[str, ...] = ()) -> str:
        """Submit the Python script at ``path`` (run with ``args``; ``outputs``: files it
        writes, relative to its directory, returned by :meth:`result`); returns the job id."""
        if not isinstance(path, (str, os.PathLike)) or not os.path.isfile(path):
            raise FileNotFoundError(f"no such script: {path!r}")
        with open(path, encoding="utf-8") as f:
            source = f.read()
        body = json.dumps({
            "script": source, "name": os.path.basename(os.fspath(path)),
            "args": [str(a) for a in args], "outputs": [str(o) for o in outputs]}).encode()
        self._check_size(len(body), f"the submission of {path}")
        return json.loads(self._request("POST", "/api/jobs", body, "application/json"))["id"]

    def jobs(self) -> list[dict[str, Any]]:
        """Every job's record."""
        return self._json("GET", "/api/jobs")

    def job(self, job_id: str) -> dict[str, Any]:
        """One job's record: state, tasks done/total, bytes held/spilled, timings, error."""
        return self._json("GET", f"/api/jobs/{self._id(job_id)}")

    def cancel(self, job_id: str) -> dict[str, Any]:
        """Cancel a job; returns its record."""
        return self._json("DELETE", f"/api/jobs/{self._id(job_id)}")

    def purge(self, job_id: str) -> None:
        """Remove a finished job from the service: its record, results and events."""
        self._request("DELETE", f"/api/jobs/{self._id(job_id)}?purge=1")

    def info(self) -> dict[str, Any]:
        """The service's version, pool, jobs at once and request body limit."""
        return self._json("GET", "/api/info")

    def _check_size(self, nbytes: int, what: str) -> None:
        if self._max_body is None:
            self._max_body = int(self.info()["max_body"])
        if nbytes > self._max_body:
            raise ValueError(f"{what} is {nbytes:,} bytes, more than the service accepts "
                             f"({self._max_body:,} bytes, its --max-body): make the inputs "
                             "on the service side (e.g. tg.random, files it can read) or "
                             "raise the limit")

    def workers(self) -> list[dict[str, Any]]:
        """The pool's workers."""
        return self._json("GET", "/api/workers")

    def wait(self, job_id: str, timeout: float | None = None,
             poll: float = 0.1) -> dict[str, Any]:
        """Wait until the job ends; its record (TimeoutError after ``timeout`` seconds)."""
        job_id = self._id(job_id)
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            job = self.job(job_id)
            if job["state"] in ("done", "failed", "cancelled"):
                return job
            if deadline is not None and time.monotonic() > deadline:
                raise TimeoutError(f"job {job_id} is still {job['state']} after {timeout} s")
            time.sleep(poll)

    def result(self, job_id: str) -> Any:
        """A script job's result (``stdout``, ``stderr``, ``files``), or a computation's
        arrays (a list of NumPy arrays)."""
        job_id = self._id(job_id)
        if self.job(job_id)["kind"] == "compute":
            return _arrays(self._request("GET", f"/api/jobs/{job_id}/result"))
        return self._json("GET", f"/api/jobs/{job_id}/result")

    def file(self, job_id: str, name: str) -> bytes:
        """The bytes of a file a script job declared in ``outputs``."""
        quoted = urllib.parse.quote(name)
        return self._request("GET", f"/api/jobs/{self._id(job_id)}/files/{quoted}")

    def compute(self, *arrays: Any, timeout: float | None = None) -> tuple:
        """Compute tilegraph arrays on the service: planned here, run there; a tuple of
        NumPy results as :func:`tilegraph.compute` gives (non-Array arguments are returned
        as they are). A failed job raises :class:`JobFailed` with its traceback."""
        from tilegraph.array.core import Array
        from tilegraph.array.lowering import plan_arrays
        from tilegraph.array.sparse import SparseArray

        for a in arrays:
            if isinstance(a, SparseArray):
                raise TypeError("Client.compute takes dense tilegraph Arrays; compute a "
                                "sparse array with .todense() or locally")
        targets = [a._compute_target() for a in arrays if isinstance(a, Array)]
        values: list[Any] = []
        if targets:
            payload = _dumps(plan_arrays(targets))
            self._check_size(len(payload), "the plan (with the data of its inputs)")
            reply = json.loads(self._request("POST", "/api/jobs", payload,
                                             "application/octet-stream"))
            job = self.wait(reply["id"], timeout)
            if job["state"] != "done":
                raise JobFailed(job)
            values = _arrays(self._request("GET", f"/api/jobs/{reply['id']}/result"))
        it = iter(values)
        return tuple(next(it) if isinstance(a, Array) else a for a in arrays)


def _dumps(obj: Any) -> bytes:
    """Pickled with cloudpickle when it is installed (functions defined in ``__main__`` or
    lambdas in the plan), else with pickle."""
    try:
        import cloudpickle
    except ImportError:
        import pickle

        return pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
    return cloudpickle.dumps(obj)


def _arrays(data: bytes) -> list[Any]:
    with np.load(io.BytesIO(data), allow_pickle=False) as z:
        out = [z[f"arr_{i}"] for i in range(len(z.files))]
    return [a[()] if a.ndim == 0 else a for a in out]
