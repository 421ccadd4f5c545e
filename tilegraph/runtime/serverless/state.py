"""The task queue and the runtime state of the serverless engine, in a Redis-protocol server.

Every key starts with the pool's namespace ``ns`` (default ``"tg"``); a run's keys carry its
id ``rid`` as well, so runs on one server never see each other's keys, and a run's keys are
all removed when it ends (:func:`delete_run`).

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
                            ``retries``, ``ndone``, ``error`` (a pickled exception),
                            ``errtask``, ``seen`` (the driver's last heartbeat)
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
than its kind does: the first completion counts, the other changes nothing).
"""

from __future__ import annotations

import os
from typing import Any

RUN_SCORE = 1 << 26  # priorities of one run fit below this
EVENTS_MAXLEN = 200_000
MAX_LOST = 5  # expired leases of one task that fail its run (a task that kills workers)

TAKE = """
local ns, worker, lease, min_ready = ARGV[1], ARGV[2], tonumber(ARGV[3]), tonumber(ARGV[4])
local ready = ns .. ':ready'
if min_ready > 1 and redis.call('ZCARD', ready) < min_ready then return false end
local t = redis.call('TIME')
local now = tonumber(t[1]) + tonumber(t[2]) / 1e6
local skipped = {}
local got = false
while true do
  local popped = redis.call('ZPOPMIN', ready)
  if #popped == 0 then break end
  local member, score = popped[1], popped[2]
  local sep = string.find(member, '|', 1, true)
  local rid, task = string.sub(member, 1, sep - 1), string.sub(member, sep + 1)
  if redis.call('HGET', ns .. ':run:' .. rid, 'state') == 'running'
     and redis.call('SISMEMBER', ns .. ':' .. rid .. ':done', task) == 0 then
    if redis.call('HGET', ns .. ':avoid', member) == worker then
      table.insert(skipped, score)   -- the backup of this worker's own straggler
      table.insert(skipped, member)
    else
      redis.call('HDEL', ns .. ':avoid', member)
      redis.call('ZADD', ns .. ':leases', now + lease, member)
      redis.call('HSET', ns .. ':lease', member, worker .. '|' .. score)
      redis.call('XADD', ns .. ':' .. rid .. ':ev', 'MAXLEN', '~', ARGV[5], '*',
                 'e', 's', 't', task, 'w', worker, 'at', string.format('%.6f', now))
      got = {member, score}
      break
    end
  end
end
if #skipped > 0 then redis.call('ZADD', ready, unpack(skipped)) end
return got
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

RENEW = """
local ns, worker, lease = ARGV[1], ARGV[2], tonumber(ARGV[3])
local t = redis.call('TIME')
local now = tonumber(t[1]) + tonumber(t[2]) / 1e6
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

COMPLETE = _RELEASE + """
local ns, rid, task, worker = ARGV[1], ARGV[2], ARGV[3], ARGV[4]
local member = rid .. '|' .. task
release(ns, member, worker)
local runkey = ns .. ':run:' .. rid
if redis.call('HGET', runkey, 'state') ~= 'running' then return -1 end
local pre = ns .. ':' .. rid
if redis.call('SADD', pre .. ':done', task) == 0 then return 0 end
local n = tonumber(ARGV[10])
for k = 0, n - 1 do
  local child = ARGV[11 + 3 * k]
  if redis.call('HINCRBY', pre .. ':cnt', child, 1) == tonumber(ARGV[12 + 3 * k]) then
    redis.call('ZADD', ns .. ':ready', ARGV[13 + 3 * k], rid .. '|' .. child)
    redis.call('RPUSH', ns .. ':wake', 1)
  end
end
redis.call('LTRIM', ns .. ':wake', -256, -1)
redis.call('HINCRBY', runkey, 'ndone', 1)
if ARGV[8] == '1' then redis.call('RPUSH', pre .. ':want', task) end
redis.call('XADD', pre .. ':ev', 'MAXLEN', '~', ARGV[9], '*', 'e', 'd', 't', task,
           'w', worker, 'b', ARGV[5], 't0', ARGV[6], 't1', ARGV[7])
-- the inputs every consumer of which has now finished: their objects may go
local free = {1}
local at = 11 + 3 * n
local m = tonumber(ARGV[at] or '0')
for k = 1, m do
  local obj, uses = ARGV[at + 2 * k - 1], tonumber(ARGV[at + 2 * k])
  if redis.call('HINCRBY', pre .. ':used', obj, 1) == uses then
    table.insert(free, obj)
  end
end
return free
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

RECLAIM = """
local ns, max_lost = ARGV[1], tonumber(ARGV[2])
local t = redis.call('TIME')
local now = tonumber(t[1]) + tonumber(t[2]) / 1e6
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
      redis.call('RPUSH', pre .. ':want', '!fail')
    else
      redis.call('ZADD', ns .. ':ready', score, member)
      redis.call('RPUSH', ns .. ':wake', 1)
    end
    redis.call('XADD', pre .. ':ev', 'MAXLEN', '~', ARGV[3], '*', 'e', 'x', 't', task,
               'w', who, 'n', tostring(lost))
  end
end
return #expired
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


def connect(url: str, timeout: float = 10.0) -> Any:
    """A redis-py connection to ``url``, checked with a PING: an unreachable server is a
    ``ConnectionError`` naming the URL, raised within ``timeout`` seconds."""
    import redis

    if not isinstance(url, str) or "://" not in url:
        raise ValueError(f"redis must be a URL such as 'redis://host:6379/0', got {url!r}")
    try:
        r = redis.Redis.from_url(url, socket_connect_timeout=timeout, socket_timeout=timeout * 3,
                                 health_check_interval=30)
        r.ping()
    except (redis.exceptions.ConnectionError, redis.exceptions.TimeoutError, OSError) as exc:
        raise ConnectionError(f"cannot reach the Redis server at {url}: {exc}") from exc
    except ValueError as exc:
        raise ValueError(f"bad Redis URL {url!r}: {exc}") from exc
    return r


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
    return list(r.scan_iter(match=f"{ns}:*", count=1000))


def default_namespace() -> str:
    return os.environ.get("TILEGRAPH_NAMESPACE", "tg")
