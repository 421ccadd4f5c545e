"""How an emulated cluster (:mod:`tilegraph.testing.cluster`) is made: the link parameters
(:func:`parse_latency`, :func:`parse_bandwidth`), the choice of its subnet, its directories,
its network (a switch's bridge, a veth link per host shaped with ``tc``, the outside's link),
each host's mount and UTS namespaces, and the launch agent through which ``mpiexec`` enters
the hosts. Each step is a function of the bed being made."""

from __future__ import annotations

import contextlib
import ipaddress
import json
import math
import os
import re
import shlex
import subprocess
from typing import TYPE_CHECKING, Any

from tilegraph.testing.machine import (
    PRIVATE_DIRS,
    RUN_ROOT,
    ClusterError,
    process_start,
    sh,
)

if TYPE_CHECKING:
    from tilegraph.testing.cluster import Cluster
    from tilegraph.testing.records import Host

SUBNET_POOL = ipaddress.IPv4Network("10.231.0.0/16")  # beds take a free /24 of it


_TIME_UNITS = {"s": 1.0, "ms": 1e-3, "us": 1e-6, "µs": 1e-6}
_RATE_UNITS = {"bit": 1.0, "kbit": 1e3, "mbit": 1e6, "gbit": 1e9, "tbit": 1e12}


def parse_latency(value: Any) -> float:
    """Seconds from a number of seconds or a string such as ``"0.2ms"``, ``"200us"`` or
    ``"1s"`` (``None``: 0).

    >>> parse_latency("0.2ms"), parse_latency("150us"), parse_latency(None)
    (0.0002, 0.00015, 0.0)
    """
    if value is None:
        return 0.0
    if isinstance(value, bool):
        raise TypeError(f"latency must be seconds or a string such as '0.2ms', got {value!r}")
    if isinstance(value, (int, float)):
        seconds = float(value)
    elif isinstance(value, str):
        m = re.fullmatch(r"\s*([0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?)\s*(s|ms|us|µs)\s*",
                         value)
        if m is None:
            raise ValueError(f"latency {value!r} is not a time such as '0.2ms', '200us' or "
                             "'1s'")
        seconds = float(m[1]) * _TIME_UNITS[m[2]]
    else:
        raise TypeError(f"latency must be seconds or a string such as '0.2ms', got "
                        f"{type(value).__name__}")
    if not math.isfinite(seconds) or seconds < 0 or seconds > 10:
        raise ValueError(f"latency must be between 0 and 10 s, got {value!r}")
    return round(seconds, 9)


def parse_bandwidth(value: Any) -> float | None:
    """Bits per second from a number or a string such as ``"1gbit"``, ``"100mbit"`` or
    ``"500kbit"`` (bits, as ``tc`` writes them; ``None``: unlimited).

    >>> parse_bandwidth("1gbit"), parse_bandwidth("2.5mbit"), parse_bandwidth(None)
    (1000000000.0, 2500000.0, None)
    """
    if value is None:
        return None
    if isinstance(value, bool):
        raise TypeError(f"bandwidth must be bits per second or a string such as '1gbit', "
                        f"got {value!r}")
    if isinstance(value, (int, float)):
        rate = float(value)
    elif isinstance(value, str):
        m = re.fullmatch(r"\s*([0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?)\s*([a-zA-Z]+)(?:/s)?\s*",
                         value)
        unit = m[2].lower() if m else ""
        if m is None or unit not in _RATE_UNITS:
            raise ValueError(f"bandwidth {value!r} is not a rate in bits such as '1gbit', "
                             "'100mbit' or '500kbit'")
        rate = float(m[1]) * _RATE_UNITS[unit]
    else:
        raise TypeError(f"bandwidth must be bits per second or a string such as '1gbit', got "
                        f"{type(value).__name__}")
    if not math.isfinite(rate) or rate < 8000 or rate > 1e12:
        raise ValueError(f"bandwidth must be between 8kbit and 1tbit, got {value!r}")
    return rate


def choose_subnet(subnet: str | None, hosts: int) -> ipaddress.IPv4Network:
    """``subnet`` checked against the IPv4 networks in use on this machine (its
    addresses and routes, and the other beds'), or the first free /24 of
    :data:`SUBNET_POOL`."""
    used = []
    for kind in ("addr", "route"):
        try:
            out = json.loads(sh(["ip", "-j", "-4", kind], "reading addresses") or "[]")
        except (ClusterError, ValueError):
            out = []
        for item in out:
            for a in item.get("addr_info", []) if kind == "addr" else [item]:
                text = (f"{a['local']}/{a['prefixlen']}" if kind == "addr"
                        else a.get("dst", ""))
                with contextlib.suppress(ValueError):
                    if text and text != "default":
                        used.append(ipaddress.IPv4Network(text, strict=False))
    with contextlib.suppress(OSError):
        for n in os.listdir(RUN_ROOT):
            with contextlib.suppress(OSError, ValueError):
                with open(os.path.join(RUN_ROOT, n, "subnet")) as f:
                    used.append(ipaddress.IPv4Network(f.read().strip()))
    if subnet is not None:
        try:
            net = ipaddress.IPv4Network(subnet)
        except ValueError as exc:
            raise ValueError(f"subnet={subnet!r} is not an IPv4 network: {exc}") from None
        if net.num_addresses - 3 < hosts:
            raise ValueError(f"subnet {net} holds fewer than {hosts} hosts and the "
                             "outside")
        clash = [u for u in used if u.overlaps(net) and u.prefixlen > 0]
        if clash:
            raise ValueError(f"subnet {net} overlaps {clash[0]}, in use on this machine")
        return net
    if hosts > 253:
        raise ValueError("more than 253 hosts need subnet=")
    for net in SUBNET_POOL.subnets(new_prefix=24):
        if not any(u.overlaps(net) and u.prefixlen > 0 for u in used):
            return net
    raise ClusterError(f"no free /24 network in {SUBNET_POOL} for the bed's addresses; "
                       "give subnet=")


def make_dirs(bed: Cluster, own_shared: bool) -> None:
    """The bed's directory (its owner, subnet, logs and ``/etc/hosts``), and in the temp
    dir the shared directory made for it (``own_shared``) and each host's disk
    directories (``tmp="disk"``)."""
    os.makedirs(bed.dir, mode=0o700)
    with open(os.path.join(bed.dir, "owner"), "w") as f:
        f.write(f"{bed.pid} {process_start(bed.pid) or ''}\n")
    with open(os.path.join(bed.dir, "subnet"), "w") as f:
        f.write(f"{bed.subnet}\n")
    # a bind of the directory onto itself, private: namespace files can be bound in it
    sh(["mount", "--bind", bed.dir, bed.dir], "making the bed's directory")
    sh(["mount", "--make-private", bed.dir], "making the bed's directory")
    os.mkdir(os.path.join(bed.dir, "logs"), 0o700)
    lines = ["127.0.0.1\tlocalhost", "::1\tlocalhost ip6-localhost ip6-loopback"]
    lines += [f"{h.address}\t{h.name}" for h in bed.hosts]
    lines.append(f"{bed.outside_address}\toutside")
    with open(os.path.join(bed.dir, "hosts"), "w") as f:
        f.write("\n".join(lines) + "\n")
    os.chmod(os.path.join(bed.dir, "hosts"), 0o644)
    if own_shared or bed.tmp == "disk":
        os.mkdir(bed.data_dir, 0o700)
    if own_shared:
        os.mkdir(bed.shared, 0o700)
    if bed.tmp == "disk":
        for h in bed.hosts:
            for d in PRIVATE_DIRS:
                path = os.path.join(bed.data_dir, h.name, d.replace("/", "_"))
                os.makedirs(path)
                os.chmod(path, 0o1777)


def no_ipv6(netns: str | None) -> None:
    """IPv6 off (its router solicitations would count as traffic)."""
    script = ("for f in /proc/sys/net/ipv6/conf/*/disable_ipv6; do echo 1 > $f; done "
              "2>/dev/null; true")
    argv = ["sh", "-c", script]
    if netns is not None:
        argv = ["nsenter", f"--net=/run/netns/{netns}", *argv]
    sh(argv, "turning IPv6 off")


def shape(bed: Cluster, netns: str | None, dev: str) -> None:
    """The bed's link latency (half each way) and bandwidth on ``dev``'s way out."""
    if not bed.latency and bed.bandwidth is None:
        return
    tc = ["tc"] if netns is None else ["ip", "netns", "exec", netns, "tc"]
    if bed.latency:
        argv = [*tc, "qdisc", "replace", "dev", dev, "root", "netem", "delay",
                f"{round(bed.latency / 2 * 1e6)}us", "limit", "100000"]
        if bed.bandwidth is not None:
            argv += ["rate", f"{int(bed.bandwidth)}bit"]
    else:
        rate_bytes = bed.bandwidth / 8
        burst = max(64 << 10, int(rate_bytes / 250))
        argv = [*tc, "qdisc", "replace", "dev", dev, "root", "tbf", "rate",
                f"{int(bed.bandwidth)}bit", "burst", str(burst), "latency", "100ms"]
    sh(argv, f"shaping {dev}")


def make_network(bed: Cluster) -> None:
    """The switch (a namespace with a bridge), each host's namespace linked to it by a
    veth pair and addressed, the outside's link when the bed has one, each shaped."""
    sw = bed.switch
    prefix = bed.subnet.prefixlen
    sh(["ip", "netns", "add", sw], "making the switch")
    no_ipv6(sw)
    sh(["ip", "-n", sw, "link", "set", "lo", "up"], "making the switch")
    sh(["ip", "-n", sw, "link", "add", "br0", "type", "bridge", "forward_delay", "0",
        "stp_state", "0"], "making the switch's bridge")
    sh(["ip", "-n", sw, "link", "set", "br0", "up"], "making the switch's bridge")
    for h in bed.hosts:
        sh(["ip", "netns", "add", h.netns], f"making {h.name}")
        no_ipv6(h.netns)
        port = f"h{h.index}"
        sh(["ip", "-n", sw, "link", "add", port, "type", "veth", "peer", "name", "eth0",
            "netns", h.netns], f"linking {h.name}")
        sh(["ip", "-n", sw, "link", "set", port, "master", "br0", "up"],
           f"linking {h.name}")
        sh(["ip", "-n", h.netns, "addr", "add", f"{h.address}/{prefix}", "dev", "eth0"],
           f"addressing {h.name}")
        sh(["ip", "-n", h.netns, "link", "set", "eth0", "up"], f"linking {h.name}")
        sh(["ip", "-n", h.netns, "link", "set", "lo", "up"], f"linking {h.name}")
        shape(bed, h.netns, "eth0")
        shape(bed, sw, port)
    if bed.outside_link is not None:
        link = bed.outside_link
        sh(["ip", "link", "add", link, "type", "veth", "peer", "name", "out", "netns",
            sw], "linking the outside")
        with contextlib.suppress(OSError):
            with open(f"/proc/sys/net/ipv6/conf/{link}/disable_ipv6", "w") as f:
                f.write("1")
        sh(["ip", "-n", sw, "link", "set", "out", "master", "br0", "up"],
           "linking the outside")
        sh(["ip", "addr", "add", f"{bed.outside_address}/{prefix}", "dev", link],
           "addressing the outside")
        sh(["ip", "link", "set", link, "up"], "linking the outside")
        shape(bed, None, link)
        shape(bed, sw, "out")


def setup_script(bed: Cluster, h: Host, tmp_size: int | None) -> str:
    """The commands that make ``h``'s mount namespace what the module docstring says.
    Directories of the outside that go to the host (its disk directories, the shared
    one) are first bound to stage directories in the bed's directory, which nothing
    covers, then moved into place, so that covering ``/tmp`` hides none of them."""
    q = shlex.quote
    lines = ["set -e", f"hostname {q(h.name)}",
             "mount -t sysfs -o nosuid,nodev,noexec sysfs /sys"]
    moves = []
    sources = []
    if bed.tmp == "disk":
        sources += [(os.path.join(bed.data_dir, h.name, d.replace("/", "_")), d)
                    for d in PRIVATE_DIRS]
    if bed.shared:
        sources.append((bed.shared, bed.shared))
    for n, (src, dest) in enumerate(sources):
        stage = os.path.join(bed.dir, f"stage-{h.name}-{n}")
        os.mkdir(stage, 0o700)
        lines.append(f"mount --bind {q(src)} {q(stage)}")
        moves.append((stage, dest))
    if bed.tmp == "tmpfs":
        size = "" if tmp_size is None else f",size={tmp_size}"
        lines += [f"mount -t tmpfs -o mode=1777,nosuid,nodev{size} tmpfs {q(d)}"
                  for d in PRIVATE_DIRS]
    for stage, dest in moves:
        lines += [f"mkdir -p {q(dest)}", f"mount --move {q(stage)} {q(dest)}"]
    hosts = os.path.join(bed.dir, "hosts")
    lines += [f"mount --bind {q(hosts)} /etc/hosts", "mount -o remount,bind,ro /etc/hosts",
              # the namespace files of every bed: a host must not enter another
              "umount -l /run/netns 2>/dev/null || true",
              f"for d in {q(RUN_ROOT)}/*/; do umount -l \"$d\" 2>/dev/null || true; done"]
    return "\n".join(lines) + "\n"


def make_mounts(bed: Cluster, h: Host, tmp_size: int | None) -> None:
    """``h``'s mount and UTS namespaces, made by :func:`setup_script` (a tmpfs of at most
    ``tmp_size`` bytes for each private directory, when the bed's ``tmp`` is one)."""
    for path in (h.mnt, h.uts):
        open(path, "w").close()
    script = setup_script(bed, h, tmp_size)
    try:
        proc = subprocess.run(
            ["nsenter", f"--net={h.netns_path}", "unshare", f"--mount={h.mnt}",
             f"--uts={h.uts}", "--propagation", "private", "sh", "-c", script],
            capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise ClusterError(f"making {h.name}'s mounts failed: {exc}") from exc
    if proc.returncode != 0:
        raise ClusterError(f"making {h.name}'s mounts failed ({proc.returncode}): "
                           f"{proc.stderr.strip()[-2000:]}")


def write_agent(bed: Cluster) -> str:
    """The launch agent mpiexec calls instead of ssh: ``agent HOST COMMAND...`` runs
    the command with ``sh -c`` on the host named (by address or name). As ssh's client
    does, it stays here while the command runs there; when the command ends because
    its host was lost (:meth:`~tilegraph.testing.cluster.Cluster.cut`), it waits, as ssh
    waits for a machine that stopped answering, until the host is plugged back (then it
    fails, as ssh does on a reset connection): mpiexec learns of a lost host no sooner than
    over a real network. Returns the agent's path, in the bed's directory."""
    cases = []
    for h in bed.hosts:
        enter = shlex.join(["nsenter", f"--net={h.netns_path}", f"--mount={h.mnt}",
                            f"--uts={h.uts}", "--wd=/", "--"])
        cut = shlex.quote(cut_mark(bed.dir, h))
        cases.append(f"  {h.address}|{h.name}) {enter} /bin/sh -c \"$*\"; status=$?; "
                     f"cut={cut} ;;")
    text = "\n".join([
        "#!/bin/sh",
        f"# mpiexec's launch agent for the emulated cluster {bed.tag}: enters a host's",
        "# namespaces where ssh would log in to it",
        "host=\"$1\"; shift",
        "case \"$host\" in", *cases,
        "  *) echo \"tilegraph cluster: no host $host in this bed\" >&2; exit 255 ;;",
        "esac",
        "if [ -e \"$cut\" ]; then",
        "  while [ -e \"$cut\" ]; do sleep 0.2; done",
        "  exit 255",
        "fi",
        "exit $status", ""])
    agent = os.path.join(bed.dir, "agent")
    fd = os.open(agent, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o700)
    with os.fdopen(fd, "w") as f:
        f.write(text)
    return agent


def cut_mark(bed_dir: str, h: Host) -> str:
    """The file whose presence tells the launch agent that ``h`` was cut (see
    :func:`write_agent`), in the bed's directory ``bed_dir``."""
    return os.path.join(bed_dir, f"cut-{h.name}")
