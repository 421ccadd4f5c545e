"""The task queue and the runtime state of the serverless engine, in a Redis-protocol server.

Every key starts with the pool's namespace ``ns`` (default ``"tg"``) and a colon; a namespace
is a name without a colon (:func:`check_namespace`), so the keys of one (``team:*``) are never
those of another (``team-b:*``). A run's keys carry its id ``rid`` as well, so runs on one
server never see each other's keys, and a run's keys are all removed when it ends
(:func:`delete_run`). A run whose driver died (killed, its machine gone) is removed by the
next run on its namespace and by ``tilegraph clean --redis URL`` (:func:`remove_dead_runs`):
its record names the driver's host, process and start time, and its heartbeat.

A server holds no pickle that is trusted as it is: a task's error is stored with its MAC
(:mod:`tilegraph.runtime.serverless.auth`), and the fields of a run that a worker acts on
(the store it opens, the source it reads) are signed by the driver.

==========================  ====================================================================
key                         meaning
==========================  ====================================================================
``ns:ready``                sorted set of ready tasks ``rid|task``, score = priority (lower first;
                            a run's scores start at its sequence number x 2^26, so earlier runs
                            go first)
``ns:leases``               sorted set of leased tasks ``rid|task``, score = lease expiry (the
                            server's clock, seconds)
``ns:lease``                hash ``rid|task`` -> ``worker|score``: who holds the lease, and the
                            priority to requeue the task with
``ns:avoid``                hash ``rid|task`` -> worker: a backup copy of a straggling task, in the
                            ready set while its first copy still runs, is not for that worker
``ns:wake``                 list of tokens, one per task made ready: idle workers block on it
                            (BLPOP) instead of polling the queue
``ns:workers``              hash worker id -> JSON (pid, host, started, task, rss, seen)
``ns:seq``                  run counter
``ns:runs``                 set of live run ids
``ns:run:rid``              hash: ``state`` (running, failed, cancelled), ``kind``, ``store``,
                            ``blob`` (the key of the run's task source in the store),
                            ``retries``, ``sig`` (the MAC of kind, store, blob and retries:
                            a worker opens no store a forged record names), ``ndone``,
                            ``error`` (a pickled exception with its MAC), ``errtask``,
                            the driver: ``host`` (:func:`tilegraph.debris.host_id`), ``pid``,
                            ``pstart`` (when it started), ``seen`` (its last heartbeat, the
                            server's clock)
``ns:rid:done``             set of finished tasks (a duplicate completion changes nothing)
``ns:rid:cnt``              hash task -> parents finished; the task is ready when it reaches
                            the task's number of parents (created on first use: nothing is
                            initialised per task, so an implicit DAG is never expanded)
``ns:rid:att``              hash task -> failed attempts (kernel errors)
``ns:rid:used``             hash object -> consumers finished; when it reaches the object's
                            consumer count, the object is deleted (the driver's outputs are
                            never counted), so the store holds the live blocks only
``ns:rid:lost``             hash task -> expired leases (a worker died or stalled)
``ns:rid:want``             list of finished tasks the driver waits for, and ``!fail``
``ns:rid:ev``               stream of events (task start, end, retry, expiry, failure)
==========================  ====================================================================

Transitions are Lua scripts, each atomic on the server: :data:`TAKE` (pop the best ready
task and lease it), :data:`RENEW`, :data:`COMPLETE` (a task's output is stored: count it
done once, make its children ready when their counters reach their parent counts, and
name the inputs no unfinished task reads any more),
:data:`FAIL` (requeue for a retry, or fail the run), :data:`RECLAIM` (requeue the tasks
whose lease expired), :data:`BACKUP` (offer a second copy of a task that runs much longer
than its kind does: the first completion counts, the other changes nothing), and
:data:`STEP`, a worker's one round trip per task: the completions of its finished tasks,
a reclaim when due, and the take of its next task(s), so that a child made ready by a
completion can be taken by the worker that holds its input in memory.
"""

from __future__ import annotations

import os
import re
import time
from dataclasses import dataclass
from typing import Any

from tilegraph.debris import host_id, pid_alive, process_start
from tilegraph.runtime.serverless.auth import (
    PASSWORD_ENV,
    Credentials,
    IntegrityError,
    Signer,
    split_url,
)

RUN_SCORE = 1 << 26  # priorities of one run fit below this
EVENTS_MAXLEN = 200_000
MAX_LOST = 5  # expired leases of one task that fail its run (a task that kills workers)
RUN_TIMEOUT = 60.0  # seconds without a heartbeat after which another host's driver is dead

_NOW = """
local function server_now()
  local t = redis.call('TIME')
  return tonumber(t[1]) + tonumber(t[2]) / 1e6
end
-- the state of a run, read once per script
local run_states = {}
local function run_state(ns, rid)
  local st = run_states[rid]
  if st == nil then
    st = redis.call('HGET', ns .. ':run:' .. rid, 'state') or false
    run_states[rid] = st
  end
  return st
end
"""

# take(): pop the best ready task this worker may run and lease it, when at least
# min_ready tasks are ready; {member, score} or false. A worker about to wait finds the
# queue empty: the wake tokens left are stale (each was pushed with a task now taken),
# and are dropped so that its BLPOP blocks until a task is made ready.
_TAKE_FN = """
local function take(ns, worker, lease, min_ready, maxlen, now)
  local ready = ns .. ':ready'
  local nready = redis.call('ZCARD', ready)
  if nready < math.max(min_ready, 1) then
    if nready == 0 and min_ready <= 1 then redis.call('DEL', ns .. ':wake') end
    return false
  end
  local skipped = {}
  local got = false
  while true do
    local popped = redis.call('ZPOPMIN', ready)
    if #popped == 0 then break end
    local member, score = popped[1], popped[2]
    local sep = string.find(member, '|', 1, true)
    local rid, task = string.sub(member, 1, sep - 1), string.sub(member, sep + 1)
    if run_state(ns, rid) == 'running'
       and redis.call('SISMEMBER', ns .. ':' .. rid .. ':done', task) == 0 then
      local avoid = redis.call('HGET', ns .. ':avoid', member)
      if avoid == worker then
        table.insert(skipped, score)   -- the backup of this worker's own straggler
        table.insert(skipped, member)
      else
        if avoid then redis.call('HDEL', ns .. ':avoid', member) end
        redis.call('ZADD', ns .. ':leases', now + lease, member)
        redis.call('HSET', ns .. ':lease', member, worker .. '|' .. score)
        redis.call('XADD', ns .. ':' .. rid .. ':ev', 'MAXLEN', '~', maxlen, '*',
                   'e', 's', 't', task, 'w', worker, 'at', string.format('%.6f', now))
        got = {member, score}
        break
      end
    end
  end
  if #skipped > 0 then redis.call('ZADD', ready, unpack(skipped)) end
  return got
end
"""

TAKE = _NOW + _TAKE_FN + """
local lease, min_ready = tonumber(ARGV[3]), tonumber(ARGV[4])
return take(ARGV[1], ARGV[2], lease, min_ready, ARGV[5], server_now())
"""

BACKUP = """
local ns, member, maxlen = ARGV[1], ARGV[2], ARGV[3]
local owner = redis.call('HGET', ns .. ':lease', member)
if not owner then return 0 end
local sep = string.find(member, '|', 1, true)
local rid, task = string.sub(member, 1, sep - 1), string.sub(member, sep + 1)
if redis.call('HGET', ns .. ':run:' .. rid, 'state') ~= 'running'
   or redis.call('SISMEMBER', ns .. ':' .. rid .. ':done', task) == 1
   or redis.call('ZSCORE', ns .. ':ready', member) then
  return 0
end
local bar = string.find(owner, '|', 1, true)
local who, score = string.sub(owner, 1, bar - 1), string.sub(owner, bar + 1)
redis.call('HSET', ns .. ':avoid', member, who)
redis.call('ZADD', ns .. ':ready', score, member)
redis.call('RPUSH', ns .. ':wake', 1)
redis.call('XADD', ns .. ':' .. rid .. ':ev', 'MAXLEN', '~', maxlen, '*', 'e', 'b', 't', task,
           'w', who)
return 1
"""

RENEW = _NOW + """
local ns, worker, lease = ARGV[1], ARGV[2], tonumber(ARGV[3])
local now = server_now()
local n = 0
for k = 4, #ARGV do
  local owner = redis.call('HGET', ns .. ':lease', ARGV[k])
  if owner and string.sub(owner, 1, #worker + 1) == worker .. '|' then
    redis.call('ZADD', ns .. ':leases', 'XX', now + lease, ARGV[k])
    n = n + 1
  end
end
return n
"""

_RELEASE = """
local function release(ns, member, worker)
  local owner = redis.call('HGET', ns .. ':lease', member)
  if owner and string.sub(owner, 1, #worker + 1) == worker .. '|' then
    redis.call('ZREM', ns .. ':leases', member)
    redis.call('HDEL', ns .. ':lease', member)
  end
  return owner
end
"""

# complete(): task ARGV[p], ARGV[p + 1] (rid, task) is stored; its fields follow: bytes,
# t0, t1, wanted ('1'/'0'), then n and n x (child, parents of child, priority), then m and
# m x (input object, its consumers). Returns the result ({1, freed objects...}; 0: a
# duplicate completion; -1: the run ended), the position after its fields and the number
# of children it made ready (the caller wakes that many workers).
_COMPLETE_FN = """
local function complete(ns, worker, maxlen, p)
  local woken = 0
  local rid, task = ARGV[p], ARGV[p + 1]
  local n = tonumber(ARGV[p + 6])
  local at = p + 7 + 3 * n
  local m = tonumber(ARGV[at] or '0')
  local after = at + 1 + 2 * m
  release(ns, rid .. '|' .. task, worker)
  local runkey = ns .. ':run:' .. rid
  if run_state(ns, rid) ~= 'running' then return -1, after, 0 end
  local pre = ns .. ':' .. rid
  if redis.call('SADD', pre .. ':done', task) == 0 then return 0, after, 0 end
  for k = 0, n - 1 do
    local child = ARGV[p + 7 + 3 * k]
    if redis.call('HINCRBY', pre .. ':cnt', child, 1) == tonumber(ARGV[p + 8 + 3 * k]) then
      redis.call('ZADD', ns .. ':ready', ARGV[p + 9 + 3 * k], rid .. '|' .. child)
      woken = woken + 1
    end
  end
  redis.call('HINCRBY', runkey, 'ndone', 1)
  if ARGV[p + 5] == '1' then redis.call('RPUSH', pre .. ':want', task) end
  redis.call('XADD', pre .. ':ev', 'MAXLEN', '~', maxlen, '*', 'e', 'd', 't', task,
             'w', worker, 'b', ARGV[p + 2], 't0', ARGV[p + 3], 't1', ARGV[p + 4])
  -- the inputs every consumer of which has now finished: their objects may go
  local free = {1}
  for k = 1, m do
    local obj, uses = ARGV[at + 2 * k - 1], tonumber(ARGV[at + 2 * k])
    if redis.call('HINCRBY', pre .. ':used', obj, 1) == uses then
      table.insert(free, obj)
    end
  end
  return free, after, woken
end

-- one wake token per task made ready, for the workers blocked on ns:wake (at most 256)
local function wake(ns, n)
  if n <= 0 then return end
  local tokens = {}
  for k = 1, math.min(n, 256) do tokens[k] = 1 end
  if redis.call('RPUSH', ns .. ':wake', unpack(tokens)) > 256 then
    redis.call('LTRIM', ns .. ':wake', -256, -1)
  end
end
"""

# ARGV: ns, rid, task, worker, bytes, t0, t1, wanted, maxlen, n, children..., m, inputs...
COMPLETE = _NOW + _RELEASE + _COMPLETE_FN + """
local ns, rid, task, worker, maxlen = ARGV[1], ARGV[2], ARGV[3], ARGV[4], ARGV[9]
local nbytes, t0, t1, wanted = ARGV[5], ARGV[6], ARGV[7], ARGV[8]
-- complete()'s order from position 4: rid, task, bytes, t0, t1, wanted, n, ...
ARGV[4], ARGV[5], ARGV[6], ARGV[7], ARGV[8], ARGV[9] = rid, task, nbytes, t0, t1, wanted
local res, _, woken = complete(ns, worker, maxlen, 4)
wake(ns, woken)
return res
"""

FAIL = _RELEASE + """
local ns, rid, task, worker = ARGV[1], ARGV[2], ARGV[3], ARGV[4]
local member = rid .. '|' .. task
local owner = release(ns, member, worker)
local runkey = ns .. ':run:' .. rid
if redis.call('HGET', runkey, 'state') ~= 'running' then return -1 end
local pre = ns .. ':' .. rid
if redis.call('SISMEMBER', pre .. ':done', task) == 1 then return 0 end
local att = redis.call('HINCRBY', pre .. ':att', task, 1)
if att <= tonumber(ARGV[5]) then
  local score = ARGV[8]
  redis.call('ZADD', ns .. ':ready', score, member)
  redis.call('RPUSH', ns .. ':wake', 1)
  redis.call('XADD', pre .. ':ev', 'MAXLEN', '~', ARGV[9], '*', 'e', 'r', 't', task,
             'w', worker, 'n', tostring(att), 'msg', ARGV[7])
  return 1
end
redis.call('HSET', runkey, 'state', 'failed', 'error', ARGV[6], 'errtask', task)
redis.call('RPUSH', pre .. ':want', '!fail')
redis.call('XADD', pre .. ':ev', 'MAXLEN', '~', ARGV[9], '*', 'e', 'f', 't', task,
           'w', worker, 'msg', ARGV[7])
return 2
"""

_RECLAIM_FN = """
local function reclaim(ns, max_lost, maxlen, now)
  local expired = redis.call('ZRANGEBYSCORE', ns .. ':leases', '-inf', now, 'LIMIT', 0, 200)
  for _, member in ipairs(expired) do
    local owner = redis.call('HGET', ns .. ':lease', member) or '?|0'
    local bar = string.find(owner, '|', 1, true)
    local who, score = string.sub(owner, 1, bar - 1), string.sub(owner, bar + 1)
    redis.call('ZREM', ns .. ':leases', member)
    redis.call('HDEL', ns .. ':lease', member)
    local sep = string.find(member, '|', 1, true)
    local rid, task = string.sub(member, 1, sep - 1), string.sub(member, sep + 1)
    local runkey = ns .. ':run:' .. rid
    local pre = ns .. ':' .. rid
    if redis.call('HGET', runkey, 'state') == 'running'
       and redis.call('SISMEMBER', pre .. ':done', task) == 0 then
      local lost = redis.call('HINCRBY', pre .. ':lost', task, 1)
      if lost >= max_lost then
        redis.call('HSET', runkey, 'state', 'failed', 'errtask', task, 'lost', tostring(lost))
        run_states[rid] = nil
        redis.call('RPUSH', pre .. ':want', '!fail')
      else
        redis.call('ZADD', ns .. ':ready', score, member)
        redis.call('RPUSH', ns .. ':wake', 1)
      end
      redis.call('XADD', pre .. ':ev', 'MAXLEN', '~', maxlen, '*', 'e', 'x', 't', task,
                 'w', who, 'n', tostring(lost))
    end
  end
  return #expired
end
"""

RECLAIM = _NOW + _RECLAIM_FN + """
return reclaim(ARGV[1], tonumber(ARGV[2]), ARGV[3], server_now())
"""

# One round trip of a worker: record its finished tasks, reclaim expired leases when asked,
# and take up to two tasks. ARGV: ns, worker, lease, maxlen, max_lost, reclaim ('1'/'0'),
# c (completions), then c x the fields of complete() (rid, task, bytes, t0, t1, wanted,
# n, children..., m, inputs...), then k (tasks to take) and k x min_ready (the first take
# of a worker with nothing in hand needs 1; a task taken ahead, while another of the
# worker's runs, needs 2: never hold a task another idle worker could run).
# Returns {results of the completions, taken tasks ({member, score} or 0)...}.
STEP = _NOW + _RELEASE + _TAKE_FN + _COMPLETE_FN + _RECLAIM_FN + """
local ns, worker, lease, maxlen = ARGV[1], ARGV[2], tonumber(ARGV[3]), ARGV[4]
local now = server_now()
local p = 8
local results = {}
local woken = 0
for c = 1, tonumber(ARGV[7]) do
  local res, w
  res, p, w = complete(ns, worker, maxlen, p)
  results[c] = res
  woken = woken + w
end
if ARGV[6] == '1' then reclaim(ns, tonumber(ARGV[5]), maxlen, now) end
local out = {results}
for k = 1, tonumber(ARGV[p]) do
  local got = take(ns, worker, lease, tonumber(ARGV[p + k]), maxlen, now)
  if not got then break end
  out[k + 1] = got
  woken = woken - 1
end
-- wake other workers only for the children this worker did not take itself
if woken > 0 then wake(ns, math.min(woken, redis.call('ZCARD', ns .. ':ready'))) end
return out
"""


# a driver's heartbeat: the run's state (nil: its keys are gone), and ``seen`` set to the
# server's clock while the run has a record
HEARTBEAT = """
local runkey = ARGV[1]
local st = redis.call('HGET', runkey, 'state')
if st then
  local t = redis.call('TIME')
  redis.call('HSET', runkey, 'seen', string.format('%.6f', tonumber(t[1]) + tonumber(t[2]) / 1e6))
end
return st
"""

# take over a namespace's claim that holds ARGV[2] (a dead pool's) with ARGV[3]
TAKE_OVER = """
if redis.call('GET', ARGV[1]) == ARGV[2] then
  redis.call('SET', ARGV[1], ARGV[3], 'EX', ARGV[4])
  return 1
end
return 0
"""


class Scripts:
    """The Lua transitions registered on one connection (``redis.Redis``)."""

    def __init__(self, r: Any):
        self.take = r.register_script(TAKE)
        self.renew = r.register_script(RENEW)
        self.complete = r.register_script(COMPLETE)
        self.fail = r.register_script(FAIL)
        self.reclaim = r.register_script(RECLAIM)
        self.backup = r.register_script(BACKUP)
        self.step = r.register_script(STEP)
        self.heartbeat = r.register_script(HEARTBEAT)


def connect(url: str, credentials: Credentials | None = None, timeout: float = 10.0) -> Any:
    """A redis-py connection to ``url``, authenticated with ``credentials`` (their
    password, else the URL's), checked with a PING: an unreachable server is a
    ``ConnectionError`` naming the URL (never its password), raised within ``timeout``
    seconds, and so is a server that refuses the password or wants one."""
    import redis

    if not isinstance(url, str) or "://" not in url:
        raise ValueError(f"redis must be a URL such as 'redis://host:6379/0', got {url!r}")
    bare, user, password = split_url(url)
    if credentials is not None and credentials.password is not None:
        user, password = credentials.username, credentials.password
    try:
        r = redis.Redis.from_url(bare, username=user, password=password,
                                 socket_connect_timeout=timeout, socket_timeout=timeout * 3,
                                 health_check_interval=30)
        r.ping()
    except redis.exceptions.AuthenticationError as exc:
        why = ("it needs a password and none was given" if password is None else
               "it refused the password (or user) given")
        raise ConnectionError(
            f"the Redis server at {bare} refused the connection: {why}; give the password "
            f"in {PASSWORD_ENV}, a credentials file (TILEGRAPH_CREDENTIALS, or a pool's "
            f"credentials=) or the URL ({type(exc).__name__})") from None
    except (redis.exceptions.ConnectionError, redis.exceptions.TimeoutError, OSError) as exc:
        raise ConnectionError(f"cannot reach the Redis server at {bare}: {exc}") from exc
    except redis.exceptions.ResponseError as exc:
        if "AUTH" in str(exc) or "password" in str(exc):
            raise ConnectionError(f"the Redis server at {bare} refused the connection: "
                                  f"{exc}") from None
        raise
    except ValueError as exc:
        raise ValueError(f"bad Redis URL {bare!r}: {exc}") from exc
    return r


_RUN_LABEL = b"tilegraph-run"
_ERROR_LABEL = b"tilegraph-error"
SIGNED_FIELDS = ("kind", "store", "blob", "retries")  # of a run's record, for its workers


def run_signature(signer: Signer, ns: str, rid: str, fields: dict[str, Any]) -> str:
    """The MAC (hex) of the fields of run ``rid``'s record that its workers act on."""
    parts = [f"{k}={fields[k]}".encode() + b"\0" for k in SIGNED_FIELDS]
    return signer.tag(_RUN_LABEL, f"{ns}:run:{rid}", *parts).hex()


def check_run(signer: Signer, ns: str, rid: str, info: dict[bytes, bytes], url: str) -> None:
    """Raise :class:`IntegrityError` naming the key unless the record ``info`` of run
    ``rid`` (from ``HGETALL``) carries the driver's signature of its fields."""
    try:
        fields = {k: info[k.encode()].decode() for k in SIGNED_FIELDS}
        sig = bytes.fromhex(info[b"sig"].decode())
    except (KeyError, ValueError, UnicodeDecodeError):
        raise IntegrityError(f"the run record {ns}:run:{rid} on {url} is not signed with the "
                             "pool's secret: its store and source are not opened") from None
    parts = [f"{k}={fields[k]}".encode() + b"\0" for k in SIGNED_FIELDS]
    signer.check(_RUN_LABEL, f"{ns}:run:{rid}", sig,
                 f"the run record {ns}:run:{rid} on {url}", *parts)


def seal_error(signer: Signer, ns: str, rid: str, blob: bytes) -> bytes:
    """A pickled error of run ``rid`` with its MAC, for the run's record."""
    return signer.seal(_ERROR_LABEL, f"{ns}:run:{rid}:error", blob)


def open_error(signer: Signer, ns: str, rid: str, sealed: bytes, url: str) -> memoryview:
    """The pickle :func:`seal_error` sealed, after its MAC is checked
    (:class:`IntegrityError` naming the key and the server otherwise)."""
    return signer.open(_ERROR_LABEL, f"{ns}:run:{rid}:error", sealed,
                       f"the error stored in {ns}:run:{rid} (field 'error') on {url}")


def driver_fields() -> dict[str, Any]:
    """The fields of a run's record that name its driver (this process)."""
    return {"host": host_id(), "pid": os.getpid(), "pstart": process_start(os.getpid()) or ""}


def run_keys(ns: str, rid: str) -> list[str]:
    """Every key of run ``rid`` besides its entries in the shared sorted sets."""
    pre = f"{ns}:{rid}"
    return [f"{ns}:run:{rid}", f"{pre}:done", f"{pre}:cnt", f"{pre}:att", f"{pre}:lost",
            f"{pre}:want", f"{pre}:ev", f"{pre}:used"]


def delete_run(r: Any, ns: str, rid: str) -> None:
    """Remove every key and queue entry of run ``rid`` (ready tasks, leases)."""
    prefix = f"{rid}|".encode()
    for zset in (f"{ns}:ready", f"{ns}:leases"):
        members = [m for m, _ in r.zscan_iter(zset, match=f"{rid}|*", count=1000)]
        for k in range(0, len(members), 1000):
            r.zrem(zset, *members[k:k + 1000])
    for table in (f"{ns}:lease", f"{ns}:avoid"):
        held = [m for m, _ in r.hscan_iter(table, match=f"{rid}|*", count=1000)
                if m.startswith(prefix)]
        if held:
            r.hdel(table, *held)
    r.delete(*run_keys(ns, rid))
    r.srem(f"{ns}:runs", rid)


def namespace_keys(r: Any, ns: str) -> list[bytes]:
    """Every key of namespace ``ns`` (what must be gone after a pool shuts down)."""
    check_namespace(ns)
    return list(r.scan_iter(match=f"{ns}:*", count=1000))


_NAMESPACE = re.compile(r"[A-Za-z0-9_.-]{1,64}")


def check_namespace(ns: Any, what: str = "namespace") -> str:
    """``ns`` if it is a namespace's name: 1 to 64 letters, digits, ``_``, ``.`` or ``-``.
    A colon separates a namespace from the rest of a key, so a name with one (``team:b``)
    would have keys that look like another namespace's (``team``'s); glob characters
    would match other namespaces' keys."""
    if not isinstance(ns, str) or not _NAMESPACE.fullmatch(ns):
        raise ValueError(
            f"{what} must be a name of 1 to 64 letters, digits, '_', '.' or '-' (no ':', "
            f"which separates a namespace from its keys, no spaces or glob characters), "
            f"got {ns!r}")
    return ns


def default_namespace() -> str:
    return check_namespace(os.environ.get("TILEGRAPH_NAMESPACE", "tg"), "TILEGRAPH_NAMESPACE")


@dataclass(frozen=True)
class DeadRun:
    """A run whose driver is gone: its namespace, id and why it is taken for dead."""

    namespace: str
    rid: str
    why: str


def _driver_gone(info: list[Any], now: float, timeout: float) -> str | None:
    """Why the driver of a run is taken for dead (``info``: its ``host, pid, pstart,
    seen``), or ``None``."""
    host, pid, pstart, seen = (v.decode() if isinstance(v, bytes) else v for v in info)
    try:
        seen_at = float(seen) if seen else 0.0
    except ValueError:
        seen_at = 0.0
    if host and host == host_id() and pid and pid.isdigit():
        name = host.split("/", 1)[0]
        if int(pid) == os.getpid():
            return None
        if not pid_alive(int(pid)):
            return f"its driver, process {pid} on {name}, is gone"
        if pstart and process_start(int(pid)) not in (None, pstart):
            return (f"its driver, process {pid} on {name}, is gone (that process id is "
                    "another process's now)")
        return None
    if now - seen_at > timeout:
        where = f"on {host.split('/', 1)[0]} " if host else ""
        ago = f"for {now - seen_at:.0f} s" if seen_at else "ever"
        return f"its driver {where}sent no heartbeat {ago} (more than {timeout:.0f} s)"
    return None


def remove_dead_runs(r: Any, ns: str, *, timeout: float = RUN_TIMEOUT, dry_run: bool = False,
                     scan: bool = False) -> list[DeadRun]:
    """Remove every run of namespace ``ns`` whose driver is gone: on this host (the same
    :func:`~tilegraph.debris.host_id`), its process is not alive or its id is another
    process's now; on another host, its heartbeat is older than ``timeout`` seconds (the
    server's clock). The live runs (``ns:runs``) are looked at, and with ``scan`` every
    run record of the namespace too (a driver killed while it made its record). Returns
    what was (``dry_run``: would be) removed."""
    check_namespace(ns)
    rids = {m.decode() for m in r.smembers(f"{ns}:runs")}
    if scan:
        prefix = f"{ns}:run:"
        rids |= {k.decode()[len(prefix):] for k in r.scan_iter(match=f"{prefix}*", count=1000)}
    if not rids:
        return []
    rids_list = sorted(rids)
    pipe = r.pipeline(transaction=False)
    for rid in rids_list:
        pipe.hmget(f"{ns}:run:{rid}", "host", "pid", "pstart", "seen")
    infos = pipe.execute()
    sec, usec = r.time()
    now = sec + usec / 1e6
    out = []
    for rid, info in zip(rids_list, infos, strict=True):
        why = _driver_gone(info, now, timeout)
        if why is None:
            continue
        if not dry_run:
            delete_run(r, ns, rid)
        out.append(DeadRun(ns, rid, why))
    return out


def namespaces(r: Any) -> list[str]:
    """The namespaces that have keys on the server ``r``."""
    found = set()
    for pattern in ("*:runs", "*:owner", "*:seq", "*:workers", "*:ready", "*:wake"):
        for key in r.scan_iter(match=pattern, count=1000):
            ns = key.decode(errors="replace").split(":", 1)[0]
            if _NAMESPACE.fullmatch(ns):
                found.add(ns)
    return sorted(found)


def clean_namespace(r: Any, ns: str, *, timeout: float = RUN_TIMEOUT, stale: float = 30.0,
                    dry_run: bool = False) -> tuple[list[DeadRun], list[str]]:
    """What ``tilegraph clean --redis`` removes from namespace ``ns``: the runs whose
    drivers are gone (:func:`remove_dead_runs`, every run record looked at), and, once
    no pool claims the namespace, no run is left in it and no worker lives (a worker of
    this host whose process is gone is dead; another one sent no heartbeat for ``stale``
    seconds), what its pool left (its run counter, wake list and the records of the dead
    workers). Returns the dead runs and the keys of the rest (``dry_run``: what would be
    removed)."""
    import json

    dead = remove_dead_runs(r, ns, timeout=timeout, dry_run=dry_run, scan=True)
    left: list[str] = []
    runs = {m.decode() for m in r.smembers(f"{ns}:runs")} - {d.rid for d in dead}
    if r.exists(f"{ns}:owner") or runs:
        return dead, left
    now = time.time()
    gone = []
    for wid, blob in r.hgetall(f"{ns}:workers").items():
        try:
            info = json.loads(blob)
            seen = float(info.get("seen", 0))
            here = info.get("hid") == host_id()
            pid = int(info.get("pid", 0))
        except (ValueError, TypeError, AttributeError):
            seen, here, pid = 0.0, False, 0
        if here and pid != os.getpid() and not pid_alive(pid):
            gone.append(wid)
        elif now - seen < stale:
            return dead, left  # a live worker keeps its namespace
        else:
            gone.append(wid)
    if gone:
        if not dry_run:
            r.hdel(f"{ns}:workers", *gone)
        left.append(f"{ns}:workers ({len(gone)} dead worker(s))")
    for key in (f"{ns}:seq", f"{ns}:wake"):
        if r.exists(key):
            if not dry_run:
                r.delete(key)
            left.append(key)
    return dead, left
