"""``tilegraph serve``: the service on uvicorn, with its pool, its token and its address."""

from __future__ import annotations

import ipaddress
import os
import secrets
import sys
from typing import Any

DEFAULT_PORT = 8786


def is_loopback(host: str) -> bool:
    """Whether ``host`` is a loopback address (or ``localhost``)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def check_bind(host: str, certfile: str | None, keyfile: str | None, insecure: bool) -> None:
    """Refuse to serve a non-loopback address without TLS (``certfile`` and ``keyfile``)
    unless ``insecure`` says so: the token would cross the network in clear text."""
    if (certfile is None) != (keyfile is None):
        raise ValueError("TLS needs both --certfile and --keyfile")
    for path in (certfile, keyfile):
        if path is not None and not os.path.isfile(path):
            raise ValueError(f"no such file: {path}")
    if not is_loopback(host) and certfile is None and not insecure:
        raise ValueError(
            f"refusing to serve {host} without TLS: anyone on the network could read the "
            "token and run code; give --certfile and --keyfile, or --insecure if the "
            "network is trusted")


def serve(host: str = "127.0.0.1", port: int = DEFAULT_PORT, *, workers: int | None = None,
          redis: str | None = None, store: str | None = None, data_dir: str | None = None,
          local: bool = False, max_jobs: int = 2, max_body: int | None = None,
          certfile: str | None = None, keyfile: str | None = None, insecure: bool = False,
          keep: int | None = None, out: Any = None, **pool_options: Any) -> int:
    """Run the service until Ctrl-C: jobs on the serverless pool (or the threads backend with
    ``local``), records in ``data_dir`` (default ``./tilegraph-service``). The token is
    ``$TILEGRAPH_TOKEN`` or a new random one; the dashboard's URL with it is printed.
    ``keep``: finished jobs kept, newest first (default ``DEFAULT_KEEP``); ``pool_options``:
    the serverless pool's provisioner options (see :func:`tilegraph.service.pool.make_pool`).
    The data directory must be private (:func:`tilegraph.service.protect.private_data_dir`:
    made 0700; one that another user owns or can write is refused with ValueError)."""
    import uvicorn

    from tilegraph.service.app import DEFAULT_MAX_BODY, create_app
    from tilegraph.service.jobs import DEFAULT_KEEP
    from tilegraph.service.pool import make_pool
    from tilegraph.service.protect import private_data_dir

    out = out or sys.stdout
    check_bind(host, certfile, keyfile, insecure)
    if isinstance(port, bool) or not isinstance(port, int) or not 1 <= port <= 65535:
        raise ValueError(f"port must be an integer in 1..65535, got {port!r}")
    # private, before anything else starts (tilegraph.service.protect.private_data_dir)
    data_dir = private_data_dir(data_dir or "tilegraph-service")
    token = os.environ.get("TILEGRAPH_TOKEN") or secrets.token_urlsafe(24)
    pool = make_pool(local, workers, redis, store, **pool_options)
    try:
        app = create_app(data_dir, pool, token, max_jobs=max_jobs,
                         max_body=max_body or DEFAULT_MAX_BODY,
                         keep=keep if keep is not None else DEFAULT_KEEP)
        config = uvicorn.Config(app, host=host, port=port, log_level="warning",
                                access_log=False, ssl_certfile=certfile,
                                ssl_keyfile=keyfile, timeout_graceful_shutdown=5,
                                lifespan="on")
        server = uvicorn.Server(config)
        scheme = "https" if certfile else "http"
        shown = f"[{host}]" if ":" in host else host
        print(f"tilegraph service: {pool.describe()}; data in {data_dir}", file=out)
        print(f"dashboard: {scheme}://{shown}:{port}/?token={token}", file=out, flush=True)
        try:
            server.run()
        except KeyboardInterrupt:  # Ctrl-C is how the service is stopped: no traceback
            pass
    finally:
        pool.close()
    return 0
