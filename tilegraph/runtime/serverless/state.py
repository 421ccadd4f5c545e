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
than its kind does: the first completion counts, the other changes nothing), and
:data:`STEP`, a worker's one round trip per task: the completions of its finished tasks,
a reclaim when due, and the take of its next task(s), so that a child made ready by a
completion can be taken by the worker that holds its input in memory.
"""

from __future__ import annotations

import os
from typing import Any

RUN_SCORE = 1 << 26  # priorities of one run fit below this
EVENTS_MAXLEN = 200_000
MAX_LOST = 5  # expired leases of one task that fail its run (a task that kills workers)

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
