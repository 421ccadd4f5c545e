"""The test bed of emulated hosts itself: hosts reach each other and nothing else is shared,
links are shaped as asked, the interface counters count what crossed, and nothing is left
behind on close, on SIGTERM, on Ctrl-C, or after its owner was killed (``cleanup()``)."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import tempfile
import time

import pytest

from tilegraph.debris import pid_alive
from tilegraph.testing import cluster as tc
from tilegraph.testing.cluster import Cluster, ClusterError

from .conftest import SEND, SINK, UNAVAILABLE, needs_cluster

pytestmark = pytest.mark.cluster
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _bed_parts(pid: int) -> list[str]:
    return [p for (owner, _k), parts in tc.leftovers().items() if owner == pid for p in parts]


def _mounts_of(directory: str) -> list[str]:
    with open("/proc/self/mountinfo") as f:
        return [line for line in f if directory in line]


@needs_cluster
def test_hosts_reach_each_other_by_address_and_name(bed):
    sink = bed.run(0, [sys.executable, "-c", SINK, bed.address(0), "7101"],
                   stdout=subprocess.PIPE, text=True)
    assert sink.stdout.readline().strip() == "listening"
    bed.call(2, [sys.executable, "-c", SEND, "host0", "7101", "1000"])  # by its name
    assert sink.stdout.readline().strip() == "1000"
    sink.wait(10)
    names = bed.python(1, "import socket; print(socket.gethostname(), "
                          "socket.gethostbyname('host2'))").stdout.split()
    assert names == ["host1", bed.address(2)]
    # the outside reaches the hosts too (a driver here)
    sink = bed.run(1, [sys.executable, "-c", SINK, bed.address(1), "7102"],
                   stdout=subprocess.PIPE, text=True)
    assert sink.stdout.readline().strip() == "listening"
    with socket.create_connection((bed.address(1), 7102), timeout=10) as s:
        s.sendall(b"y" * 10)
    assert sink.stdout.readline().strip() == "10"
    sink.wait(10)


@needs_cluster
def test_tmp_and_shm_are_private_and_the_shared_directory_is_shared(bed):
    name = f"private-{os.getpid()}-{time.monotonic_ns()}"
    for d in ("/tmp", "/var/tmp", "/dev/shm"):
        bed.call(1, ["sh", "-c", f"echo one > {d}/{name}"])
        assert bed.call(1, ["cat", f"{d}/{name}"]).stdout == "one\n"
        for other in (0, 2):
            assert bed.call(other, ["test", "-e", f"{d}/{name}"], check=False).returncode == 1
        assert not os.path.exists(f"{d}/{name}")  # nor the outside
    shared = os.path.join(bed.shared, name)
    bed.call(1, ["sh", "-c", f"echo two > {shared}"])
    assert [bed.call(h, ["cat", shared]).stdout for h in (0, 2)] == ["two\n", "two\n"]
    with open(shared) as f:
        assert f.read() == "two\n"
    # no host reaches the bed's namespace files (it could enter another host through them)
    for path in (bed.hosts[1].netns_path, bed.hosts[1].mnt):
        entered = bed.call(0, ["nsenter", f"--net={path}", "true"], check=False)
        assert entered.returncode != 0, path


@needs_cluster
def test_bandwidth_is_applied_and_the_counters_count_what_crossed():
    n = 2_000_000
    with Cluster(hosts=2, bandwidth="16mbit") as c:
        sink = c.run(0, [sys.executable, "-c", SINK, c.address(0), "7103"],
                     stdout=subprocess.PIPE, text=True)
        assert sink.stdout.readline().strip() == "listening"
        before = c.traffic()
        seconds = float(c.call(1, [sys.executable, "-c", SEND, c.address(0), "7103",
                                   str(n)]).stdout)
        assert sink.stdout.readline().strip() == str(n)
        sink.wait(10)
        moved = c.traffic() - before
    rate = n * 8 / seconds
    assert 0.5 * 16e6 < rate < 1.15 * 16e6, f"{rate / 1e6:.1f} Mbit/s through a 16 Mbit/s link"
    # the payload and its TCP/IP/Ethernet headers (about 4.5% with 1500-byte frames), once
    assert n <= moved.tx[1] < 1.08 * n and n <= moved.rx[0] < 1.08 * n
    assert moved.tx[0] < 0.05 * n and moved.rx[1] < 0.05 * n  # acknowledgements
    assert moved.sent == moved.tx[0] + moved.tx[1]


@pytest.mark.skipif(UNAVAILABLE is not None or not tc.netem_available(),
                    reason="needs emulated hosts and the netem queueing discipline")
def test_latency_is_applied():
    source = ("import socket, sys, time\n"
              "s = socket.create_connection((sys.argv[1], 7104), timeout=10)\n"
              "s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)\n"
              "rtts = []\n"
              "for _ in range(10):\n"
              "    t = time.perf_counter(); s.sendall(b'p'); s.recv(1)\n"
              "    rtts.append(time.perf_counter() - t)\n"
              "print(sorted(rtts)[5])\n")
    echo = ("import socket, sys\n"
            "srv = socket.create_server((sys.argv[1], 7104)); print('listening', flush=True)\n"
            "c, _ = srv.accept()\n"
            "c.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)\n"
            "while (b := c.recv(1)):\n"
            "    c.sendall(b)\n")
    with Cluster(hosts=2, latency="5ms") as c:
        srv = c.run(0, [sys.executable, "-c", echo, c.address(0)], stdout=subprocess.PIPE,
                    text=True)
        assert srv.stdout.readline().strip() == "listening"
        rtt = float(c.call(1, [sys.executable, "-c", source, c.address(0)]).stdout)
    assert 0.009 < rtt < 0.05  # 5 ms each way


@pytest.mark.skipif(UNAVAILABLE is not None or tc.netem_available(),
                    reason="this kernel has netem (the latency test runs instead)")
def test_a_latency_without_netem_is_refused_naming_what_is_missing():
    before = tc.leftovers()
    with pytest.raises(ClusterError, match="netem") as info:
        Cluster(hosts=2, latency="1ms")
    assert "CONFIG_NET_SCH_NETEM" in str(info.value)
    assert tc.leftovers() == before  # refused before anything was made


@needs_cluster
def test_close_leaves_no_namespace_link_mount_directory_or_process():
    c = Cluster(hosts=2, shared=True, tmp="disk")
    procs = [c.run(h, ["sleep", "600"]) for h in (0, 1)]
    orphan = c.run(1, ["sh", "-c", "sleep 600 & echo $!"], stdout=subprocess.PIPE, text=True)
    grandchild = int(orphan.stdout.readline())  # outlives its parent unless killed
    orphan.wait(10)
    assert c.pids(1) and grandchild in c.pids(1)
    parts = tc.leftovers()[os.getpid(), c.k]
    assert any(p.startswith("network namespace") for p in parts)
    assert any(p.startswith("link") for p in parts)
    c.close()
    assert all(p.poll() is not None for p in procs)
    assert not pid_alive(grandchild)  # (a zombie until init reaps it)
    assert (os.getpid(), c.k) not in tc.leftovers()
    assert not _mounts_of(c.dir) and not os.path.exists(c.dir)
    assert not os.path.exists(c.data_dir)
    c.close()  # again: nothing to do
    with pytest.raises(ClusterError, match="closed"):
        c.run(0, ["true"])


@needs_cluster
def test_signal_handlers_are_the_process_s_own_again_once_its_beds_are_closed():
    before = {sig: signal.getsignal(sig) for sig in (signal.SIGTERM, signal.SIGHUP)}
    c = Cluster(hosts=1)
    if before[signal.SIGTERM] is signal.SIG_DFL:  # no other bed open: this one installs
        assert signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL
    c.close()
    assert {sig: signal.getsignal(sig) for sig in before} == before


_OWNER = """
import subprocess, sys, time
sys.path.insert(0, {root!r})
from tilegraph.testing.cluster import Cluster
c = Cluster(hosts=2, shared=True)
p = c.run(1, ["sh", "-c", "sleep 600 & echo $!"], stdout=subprocess.PIPE, text=True)
print(c.k, p.stdout.readline().strip(), flush=True)
{then}
"""


def _owner(then: str) -> tuple[subprocess.Popen, int, int]:
    proc = subprocess.Popen([sys.executable, "-c", _OWNER.format(root=ROOT, then=then)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    line = proc.stdout.readline().split()
    assert len(line) == 2, proc.stderr.read()
    return proc, int(line[0]), int(line[1])


@needs_cluster
def test_cleanup_removes_what_a_killed_owner_left_and_never_a_live_bed(bed):
    proc, _k, orphan = _owner("time.sleep(600)")
    assert _bed_parts(proc.pid)
    assert proc.pid not in [pid for (pid, _k) in tc.leftovers() if pid == os.getpid()]
    assert tc.cleanup(dry_run=True) == []  # its owner lives: not touched
    proc.kill()
    proc.wait()
    assert pid_alive(orphan)  # left running on its host
    would = tc.cleanup(dry_run=True)
    assert would and all(f"{proc.pid}-" in p or f"tgc{proc.pid}k" in p for p in would)
    assert _bed_parts(proc.pid)
    removed = tc.cleanup()
    assert any("network namespace" in p for p in removed)
    assert not _bed_parts(proc.pid)
    assert not pid_alive(orphan)
    assert not _mounts_of(f"{tc.RUN_ROOT}/{proc.pid}-")
    # the module's live bed was not touched
    assert bed.call(1, ["hostname"]).stdout == "host1\n"


@needs_cluster
def test_cleanup_leaves_alone_what_another_user_put_under_a_beds_name(tmp_path):
    """The temp dir is everyone's: a link named as a dead bed's data directory (to ``/``,
    whose mounts must not be touched, or to a directory of files) and a directory of another
    user under such a name are not the bed's."""
    dead = subprocess.Popen(["true"])
    dead.wait()
    tmp = tempfile.gettempdir()
    victim = tmp_path / "victim"
    victim.mkdir()
    (victim / "keep").write_text("x")
    link = os.path.join(tmp, f"{tc.DATA_PREFIX}{dead.pid}-1")
    theirs = os.path.join(tmp, f"{tc.DATA_PREFIX}{dead.pid}-2")
    os.symlink(str(victim), link)
    os.mkdir(theirs)
    os.chown(theirs, 65534, 65534)
    try:
        assert (dead.pid, 1) not in tc.leftovers() and (dead.pid, 2) not in tc.leftovers()
        tc.cleanup()
        assert os.path.islink(link) and (victim / "keep").exists()
        assert os.path.isdir(theirs)
        with open("/proc/self/mountinfo") as f:
            assert " /proc " in f.read()  # no mount of the machine was touched
    finally:
        os.unlink(link)
        os.rmdir(theirs)


@needs_cluster
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_sigterm_and_ctrl_c_remove_the_bed(sig):
    proc, _k, orphan = _owner("time.sleep(600)" if sig == signal.SIGTERM else
                              "with c:\n    time.sleep(600)")
    assert _bed_parts(proc.pid)
    proc.send_signal(sig)
    proc.wait(30)
    assert not _bed_parts(proc.pid)
    assert not pid_alive(orphan)
    if sig == signal.SIGTERM:
        assert proc.returncode == -signal.SIGTERM  # then it died of the signal, as before
    else:
        assert "KeyboardInterrupt" in proc.stderr.read()


@needs_cluster
def test_processes_on_hosts_die_with_the_process_that_made_the_bed(bed):
    child = subprocess.Popen(
        [sys.executable, "-c", "import sys, time\n"
         f"sys.path.insert(0, {ROOT!r})\n"
         "from tilegraph.testing.cluster import Cluster\n"
         "c = Cluster(hosts=1, outside=False)\n"
         "p = c.run(0, ['sleep', '600'])\n"
         "print(p.pid, flush=True)\n"
         "import os; os.kill(os.getpid(), 9)\n"], stdout=subprocess.PIPE, text=True)
    pid = int(child.stdout.readline())
    child.wait(30)
    for _ in range(100):
        if not pid_alive(pid):
            break
        time.sleep(0.05)
    assert not pid_alive(pid)
    tc.cleanup()
    assert not _bed_parts(child.pid)


CONNECT = """
import socket, sys
try:
    socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=float(sys.argv[3]))
    print("connected")
except socket.timeout:
    print("timeout")
except OSError as exc:
    print(type(exc).__name__)
"""


@needs_cluster
def test_a_host_is_cut_reconnected_killed_and_lost(bed):
    sink = bed.run(1, [sys.executable, "-c", "import socket, time\n"
                       f"s = socket.create_server(({bed.address(1)!r}, 7301))\n"
                       "print('listening', flush=True)\ntime.sleep(600)"],
                   stdout=subprocess.PIPE, text=True)
    try:
        assert sink.stdout.readline().strip() == "listening"
        args = [bed.address(1), "7301"]
        assert bed.python(0, CONNECT, args=[*args, "5"]).stdout.strip() == "connected"
        assert bed.connected(1)
        bed.cut(1)
        try:
            assert not bed.connected(1)
            # nothing answers, not even a reset: the connection times out
            assert bed.python(0, CONNECT, args=[*args, "1"]).stdout.strip() == "timeout"
            assert sink.poll() is None  # the host's processes still run
        finally:
            bed.reconnect(1)
        assert bed.connected(1)
        assert bed.python(0, CONNECT, args=[*args, "5"]).stdout.strip() == "connected"
        killed = bed.kill(1)
        assert sink.pid in killed and sink.wait(10) == -signal.SIGKILL
        assert bed.pids(1) == []
        # a host that is up, with nothing listening, refuses at once
        assert bed.python(0, CONNECT, args=[*args, "5"]).stdout.strip() == \
            "ConnectionRefusedError"
        sleeper = bed.run(1, ["sleep", "600"])
        assert bed.lose(1) == [sleeper.pid] and not bed.connected(1)
        assert bed.python(0, CONNECT, args=[*args, "1"]).stdout.strip() == "timeout"
    finally:
        bed.reconnect(1)
        sink.kill()
        sink.wait()
    with pytest.raises(ValueError, match="host must be an index"):
        bed.cut(5)


def test_bad_arguments_are_refused_before_anything_is_made():
    for kwargs, error, match in [
            ({"hosts": 0}, ValueError, "hosts must be an integer from 1 to 200"),
            ({"hosts": True}, ValueError, "hosts must be"),
            ({"latency": "fast"}, ValueError, "is not a time such as"),
            ({"latency": -1}, ValueError, "between 0 and 10 s"),
            ({"bandwidth": "1gb"}, ValueError, "is not a rate in bits"),
            ({"bandwidth": 10}, ValueError, "between 8kbit and 1tbit"),
            ({"bandwidth": [1]}, TypeError, "bandwidth must be"),
            ({"tmp": "nfs"}, ValueError, "tmp must be 'tmpfs' or 'disk'"),
            ({"tmp_size": "1KB"}, ValueError, "at least 1 MiB"),
            ({"shared": "/no/such/dir"}, ValueError, "is not a directory"),
            ({"shared": "/proc"}, ValueError, "cannot be shared"),
            ({"shared": 3}, TypeError, "shared must be"),
            ({"subnet": "10.1.2.0/30", "hosts": 3}, ValueError, "holds fewer than 3 hosts"),
            ({"subnet": "banana"}, ValueError, "is not an IPv4 network")]:
        if "subnet" in kwargs and UNAVAILABLE is not None:
            continue  # checked once the machine can make a bed
        with pytest.raises(error, match=match):
            Cluster(**kwargs)
    assert tc.parse_latency("1.5ms") == 0.0015 and tc.parse_bandwidth("2gbit/s") == 2e9


@needs_cluster
def test_bad_use_of_a_bed_is_refused_naming_the_problem(bed):
    with pytest.raises(ValueError, match="host must be an index from 0 to 2"):
        bed.run(3, ["true"])
    with pytest.raises(TypeError, match="not a shell command line"):
        bed.run(0, "ls /tmp")
    with pytest.raises(TypeError, match="env must map strings to strings"):
        bed.run(0, ["true"], env={"A": 1})
    with pytest.raises(ValueError, match="log must be a plain file name"):
        bed.run(0, ["true"], log="../x")
    with pytest.raises(ClusterError, match="exited with 3"):
        bed.call(0, ["sh", "-c", "echo bad >&2; exit 3"])
    with pytest.raises(ValueError, match="ranks_per_host must be a positive integer"):
        bed.mpiexec_command(ranks_per_host=0)


def test_unavailable_says_why(monkeypatch):
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    reason = tc.unavailable()
    assert reason is not None and ("root" in reason or "Linux" in reason)
