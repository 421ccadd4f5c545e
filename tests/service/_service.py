"""A real service (``tilegraph serve`` in a subprocess) on a free loopback port."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TOKEN = "test-token-0123456789"
MAX_BODY = 1_000_000


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    """``tilegraph serve`` in a subprocess."""

    def __init__(self, data_dir: Path, *extra: str, local: bool = True, scheme: str = "http",
                 cafile: str | None = None, token: str | None = TOKEN,
                 env: dict[str, str] | None = None):
        """``token``: given as TILEGRAPH_TOKEN, or ``None``: the one the service makes,
        read from the dashboard URL it prints; ``env``: more environment variables of the
        service."""
        self.data_dir = data_dir
        self.token = token
        self.port = free_port()
        self.url = f"{scheme}://127.0.0.1:{self.port}"
        self.context = None
        if cafile is not None:
            import ssl

            self.context = ssl.create_default_context(cafile=cafile)
        extra_env = env or {}
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(
            [str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])]))
        env.pop("TILEGRAPH_TOKEN", None)
        if token is not None:
            env["TILEGRAPH_TOKEN"] = token
        env.update(extra_env)
        cmd = [sys.executable, "-m", "tilegraph.cli", "serve", "--port", str(self.port),
               "--data-dir", str(data_dir), "--max-body", str(MAX_BODY), *extra]
        if local:
            cmd.append("--local")
        self.log_path = data_dir.parent / f"{data_dir.name}-serve.log"
        self.log = open(self.log_path, "wb")
        self.proc = subprocess.Popen(cmd, env=env, stdout=self.log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 30
        while True:
            try:
                self.printed = self.log_path.read_text()
                if self.token is None and "?token=" in self.printed:
                    self.token = self.printed.split("?token=")[1].split()[0]
                self.get("/api/info")
                self.printed = self.log_path.read_text()  # printed before it listened
                break
            except (urllib.error.URLError, ConnectionError):
                if self.proc.poll() is not None or time.monotonic() > deadline:
                    self.log.flush()
                    text = (data_dir.parent / f"{data_dir.name}-serve.log").read_text()
                    raise RuntimeError(f"the service did not start:\n{text}") from None
                time.sleep(0.1)

    def request(self, method: str, path: str, body: bytes | None = None,
                ctype: str | None = None, token: object = ...
                ) -> tuple[int, bytes, dict]:
        """(status, body, headers) of a request, with this service's token unless
        ``token`` is given (``None``: no token)."""
        token = self.token if token is ... else token
        req = urllib.request.Request(self.url + path, data=body, method=method)
        if token is not None:
            req.add_header("Authorization", f"Bearer {token}")
        if ctype:
            req.add_header("Content-Type", ctype)
        try:
            with urllib.request.urlopen(req, timeout=30, context=self.context) as r:
                return r.status, r.read(), dict(r.headers)
        except urllib.error.HTTPError as exc:
            return exc.code, exc.read(), dict(exc.headers)

    def get(self, path: str) -> object:
        status, body, _ = self.request("GET", path)
        if status != 200:
            raise urllib.error.URLError(f"{path}: HTTP {status}")
        return json.loads(body)

    def stop(self, sig: int = signal.SIGINT) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()


