"""A real service on a free loopback port, started once for the test session, with its
token and a client (more servers, for restarts, are started by the tests)."""

from __future__ import annotations

import pytest
from _service import TOKEN, Server


@pytest.fixture(scope="session")
def server(tmp_path_factory):
    pytest.importorskip("starlette")
    pytest.importorskip("uvicorn")
    srv = Server(tmp_path_factory.mktemp("service") / "data", "--workers", "2",
                 "--max-jobs", "3")
    yield srv
    srv.stop()


@pytest.fixture
def client(server):
    import tilegraph

    return tilegraph.Client(server.url, token=TOKEN)


@pytest.fixture
def script(tmp_path):
    """Write a script file: ``script(source, name='job.py') -> path``."""

    def write(source: str, name: str = "job.py") -> str:
        path = tmp_path / name
        path.write_text(source)
        return str(path)

    return write
