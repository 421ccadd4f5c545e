"""What the tests on emulated hosts share: whether this machine can make them (the reason
they are skipped when it cannot), a bed of 3 hosts per module, and small programs run on
the hosts."""

from __future__ import annotations

import pytest

from tilegraph.testing.cluster import Cluster, unavailable

UNAVAILABLE = unavailable()
needs_cluster = pytest.mark.skipif(UNAVAILABLE is not None,
                                   reason=f"no emulated hosts here: {UNAVAILABLE}")

# run on a host: accept one connection on PORT, read to its end, print the bytes read
SINK = """
import socket, sys
srv = socket.create_server((sys.argv[1], int(sys.argv[2])))
print("listening", flush=True)
conn, _ = srv.accept()
n = 0
while True:
    b = conn.recv(1 << 16)
    if not b:
        break
    n += len(b)
print(n, flush=True)
"""

# run on a host: send N bytes to HOST:PORT, print the seconds from the first byte to the
# sink's having them all (the connection closed after a half-close)
SEND = """
import socket, sys, time
host, port, n = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
for _ in range(100):
    try:
        s = socket.create_connection((host, port), timeout=10)
        break
    except OSError:
        time.sleep(0.05)
t = time.perf_counter()
s.sendall(b"x" * n)
s.shutdown(socket.SHUT_WR)
s.recv(1)
print(time.perf_counter() - t, flush=True)
"""


@pytest.fixture(scope="module")
def bed():
    """Three emulated hosts with a shared directory (``bed.shared``), for the module."""
    if UNAVAILABLE is not None:
        pytest.skip(f"no emulated hosts here: {UNAVAILABLE}")
    with Cluster(hosts=3, shared=True) as c:
        yield c
