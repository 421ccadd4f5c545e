"""tilegraph.Client end to end against the real server: compute arrays planned here and
run there, submit scripts, list, wait, cancel, and bad input."""

from __future__ import annotations

import numpy as np
import pytest
from _service import TOKEN

import tilegraph as tg
from tilegraph.service.client import JobFailed, ServiceError

DTYPES = [np.float64, np.float32, np.int64, np.complex128]


def test_compute_matches_numpy(client):
    rng = np.random.default_rng(0)
    inputs, exprs = [], []
    for dtype in DTYPES:  # one plan (one job) for all dtypes
        a = (rng.standard_normal((11, 7)) * 10).astype(dtype)
        b = (rng.standard_normal((7, 5)) * 10).astype(dtype)
        x = tg.from_numpy(a, chunks=(4, 3))  # uneven edge blocks
        y = tg.from_numpy(b, chunks=(3, 2))
        inputs.append((a, b))
        exprs += [x @ y, x.sum(), x[:, 2], x]
    got = client.compute(*exprs)
    assert len(got) == 4 * len(DTYPES)
    for i, (a, b) in enumerate(inputs):
        prod, total, col, same = got[4 * i: 4 * i + 4]
        np.testing.assert_allclose(prod, a @ b, rtol=1e-5)
        assert prod.dtype == (a @ b).dtype and prod.shape == (11, 5)
        np.testing.assert_allclose(total, a.sum(), rtol=1e-5)
        assert np.ndim(total) == 0
        np.testing.assert_array_equal(col, a[:, 2])
        np.testing.assert_array_equal(same, a)
        assert same.dtype == a.dtype


def test_compute_one_block_zero_size_and_passthrough(client):
    one = tg.from_numpy(np.arange(6.0).reshape(2, 3), chunks=10)
    empty = tg.from_numpy(np.zeros((0, 4)), chunks=2)
    got = client.compute(one * 3, empty + 1, "kept", 7)
    np.testing.assert_array_equal(got[0], np.arange(6.0).reshape(2, 3) * 3)
    assert got[1].shape == (0, 4)
    assert got[2:] == ("kept", 7)
    assert client.compute() == ()


def test_compute_failure_raises_with_traceback(client):
    x = tg.from_numpy(np.arange(8.0), chunks=3)

    def boom(block):
        raise ArithmeticError(f"no block of {len(block)}")

    with pytest.raises(JobFailed, match="ArithmeticError: no block of 3") as info:
        client.compute(x.map_blocks(boom))
    assert info.value.job["state"] == "failed"
    assert "Traceback" in info.value.job["traceback"]


def test_submit_jobs_wait_result_cancel(client, script):
    path = script("import sys\nprint('hello', *sys.argv[1:])\n"
                  "open('out.txt', 'w').write('written')\n", name="hello.py")
    job_id = client.submit(path, args=["a", "b"], outputs=["out.txt"])
    job = client.wait(job_id, timeout=60)
    assert job["state"] == "done" and job["name"] == "hello.py"
    result = client.result(job_id)
    assert result["stdout"] == "hello a b\n"
    assert client.file(job_id, "out.txt") == b"written"
    assert job_id in [j["id"] for j in client.jobs()]
    slow = client.submit(script("import time\ntime.sleep(60)\n", name="slow.py"))
    client.cancel(slow)
    assert client.wait(slow, timeout=30)["state"] == "cancelled"
    slower = client.submit(script("import time\ntime.sleep(60)\n", name="s2.py"))
    with pytest.raises(TimeoutError, match="still"):
        client.wait(slower, timeout=0.2)
    client.cancel(slower)
    assert client.wait(slower, timeout=30)["state"] == "cancelled"
    assert isinstance(client.workers(), list)


def test_client_rejects_bad_input(server, client, tmp_path):
    with pytest.raises(ValueError, match="http:// or https:// URL"):
        tg.Client("127.0.0.1:8786", token=TOKEN)
    with pytest.raises(TypeError, match="address must be a URL string"):
        tg.Client(8786, token=TOKEN)
    with pytest.raises(ValueError, match="a token is needed"):
        tg.Client(server.url, token="")
    with pytest.raises(ValueError, match="timeout must be"):
        tg.Client(server.url, token=TOKEN, timeout=0)
    with pytest.raises(FileNotFoundError, match="no such script"):
        client.submit(str(tmp_path / "missing.py"))
    with pytest.raises(ValueError, match="a job id is"):
        client.job("../etc")
    with pytest.raises(ServiceError, match="HTTP 404: no job 'abcdef'") as info:
        client.job("abcdef")
    assert info.value.status == 404
    with pytest.raises(ServiceError, match="HTTP 401: unauthorized") as info:
        tg.Client(server.url, token="wrong-token-123").jobs()
    assert info.value.status == 401
    with pytest.raises(TypeError, match="dense tilegraph Arrays"):
        import scipy.sparse as sps

        client.compute(tg.from_scipy(sps.eye(4, format="csr"), chunks=2))


def test_client_refuses_a_plan_over_the_body_limit(client):
    from _service import MAX_BODY

    assert client.info()["max_body"] == MAX_BODY
    big = tg.from_numpy(np.zeros(MAX_BODY // 8 + 1000), chunks=10_000)
    with pytest.raises(ValueError, match=r"more than the service accepts \(1,000,000 bytes"):
        client.compute(big.sum())


def test_client_over_tls(tmp_path):
    import shutil
    import subprocess

    from _service import Server

    if shutil.which("openssl") is None:
        pytest.skip("openssl is needed to make a certificate")
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt",
                    "ec_paramgen_curve:prime256v1", "-nodes", "-days", "1",
                    "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1",
                    "-keyout", str(key), "-out", str(cert)], check=True, capture_output=True)
    # no TILEGRAPH_TOKEN: the service makes one and prints it with the dashboard's URL
    srv = Server(tmp_path / "data", "--certfile", str(cert), "--keyfile", str(key),
                 scheme="https", cafile=str(cert), token=None)
    try:
        assert f"dashboard: https://127.0.0.1:{srv.port}/?token={srv.token}" in srv.printed
        assert srv.token != TOKEN and len(srv.token) >= 24
        with pytest.raises(ServiceError, match="HTTP 401"):
            tg.Client(srv.url, token=TOKEN, cafile=str(cert)).jobs()
        secure = tg.Client(srv.url, token=srv.token, cafile=str(cert))
        assert secure.address.startswith("https://")
        x = tg.from_numpy(np.arange(10.0), chunks=4)
        (total,) = secure.compute(x.sum())
        assert total == 45.0
        with pytest.raises(Exception, match="CERTIFICATE_VERIFY_FAILED"):
            tg.Client(srv.url, token=TOKEN).jobs()  # not a certificate the system trusts
    finally:
        srv.stop()
    with pytest.raises(FileNotFoundError, match="no such certificate file"):
        tg.Client(srv.url, token=TOKEN, cafile=str(tmp_path / "none.pem"))
