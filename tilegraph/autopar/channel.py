"""How values and messages travel between autopar's driving process and its worker
processes: values pickled with protocol 5 and their buffers out of band (a script's own
functions by their code, modules by name), messages framed on a pipe, and
:class:`Channel`, the driving process's end of one worker (sends queued on a thread of
their own, replies resolving Futures)."""

from __future__ import annotations

import importlib
import io
import itertools
import marshal
import pickle
import queue
import sys
import threading
import types
from collections.abc import Callable
from concurrent.futures import Future
from multiprocessing.connection import Connection
from typing import Any


def _rebuild_function(code: bytes, name: str, defaults: Any, kwdefaults: Any) -> Any:
    main = sys.modules["__main__"]
    fn = types.FunctionType(marshal.loads(code), main.__dict__, name, defaults)
    fn.__kwdefaults__ = kwdefaults
    return fn


class _Pickler(pickle.Pickler):
    """Modules travel by name; functions of the script by their code (by name they would
    be looked up in the receiving process's namespace, where a function defined by a step
    that ran elsewhere does not exist yet)."""

    def reducer_override(self, obj: Any) -> Any:
        if isinstance(obj, types.ModuleType):
            return importlib.import_module, (obj.__name__,)
        if isinstance(obj, types.FunctionType) and obj.__module__ == "__main__" and \
                obj.__closure__ is None:
            return _rebuild_function, (marshal.dumps(obj.__code__), obj.__name__,
                                       obj.__defaults__, obj.__kwdefaults__)
        return NotImplemented


def dumps_values(values: dict[str, Any]) -> list[Any]:
    """``[data, *buffers]`` of ``values``, pickle protocol 5 with out-of-band buffers."""
    buffers: list[pickle.PickleBuffer] = []
    out = io.BytesIO()
    _Pickler(out, protocol=5, buffer_callback=buffers.append).dump(values)
    return [out.getbuffer(), *[b.raw() for b in buffers]]


def send_message(conn: Connection, obj: Any, frames: list[Any] = ()) -> None:  # type: ignore[assignment]
    sizes = [memoryview(f).nbytes for f in frames]
    conn.send_bytes(pickle.dumps((obj, sizes), protocol=5))
    for f in frames:
        conn.send_bytes(f)


def receive_message(conn: Connection) -> tuple[Any, list[bytearray]]:
    obj, sizes = pickle.loads(conn.recv_bytes())
    frames = []
    for n in sizes:
        buf = bytearray(n)
        if n:
            conn.recv_bytes_into(buf)
        else:
            conn.recv_bytes()
        frames.append(buf)
    return obj, frames



class Channel:
    """The parent's end of one worker process: messages are queued and sent by a thread
    (a send never blocks the caller), replies are read by another thread and resolve the
    request's Future. A small request made with ``inline=True`` when nothing is queued is
    sent by the caller itself (one thread hand-off less per step; the order of messages is
    kept by ``_send_lock`` and the count of ``queued`` ones). When the process is lost,
    ``on_lost(index)`` is called first and then every pending request fails with the error
    it returns."""

    def __init__(self, index: int, conn: Connection, proc: Any,
                 on_lost: Callable[[int], BaseException]):
        self.index, self.conn, self.proc = index, conn, proc
        self._on_lost = on_lost
        self._lock = threading.Lock()
        self._pending: dict[int, Future] = {}
        self._tokens = itertools.count(1)
        self._lost: BaseException | None = None
        self._box: queue.SimpleQueue = queue.SimpleQueue()
        self._send_lock = threading.Lock()
        self._queued = 0   # messages in the box or being sent by the sender thread
        self._broken = False
        self._sender = threading.Thread(target=self._send_loop, daemon=True,
                                        name=f"tilegraph-step-send-{index}")
        self._receiver = threading.Thread(target=self._receive_loop, daemon=True,
                                          name=f"tilegraph-step-recv-{index}")
        self._sender.start()
        self._receiver.start()

    def post(self, msg: tuple, frames: list[Any] = (),  # type: ignore[assignment]
             inline: bool = False) -> None:
        with self._send_lock:
            if inline and self._queued == 0:
                if not self._broken:
                    try:
                        send_message(self.conn, msg, frames)
                    except (OSError, EOFError, ValueError):
                        self._broken = True   # the receiver sees the end and reports it
                return
            self._queued += 1
            self._box.put((msg, list(frames)))

    def request(self, op: str, *payload: Any, frames: list[Any] = (),  # type: ignore[assignment]
                inline: bool = False) -> Future:
        fut: Future = Future()
        with self._lock:
            if self._lost is not None:
                fut.set_exception(self._lost)
                return fut
            token = next(self._tokens)
            self._pending[token] = fut
        self.post((op, token, *payload), frames, inline=inline)
        return fut

    def close(self) -> None:
        self.post(("stop", None))
        self._box.put(None)

    def _send_loop(self) -> None:
        while True:
            item = self._box.get()
            if item is None:
                return
            try:
                if not self._broken:
                    send_message(self.conn, *item)
            except (OSError, EOFError, ValueError):
                self._broken = True
            finally:
                with self._send_lock:
                    self._queued -= 1

    def _receive_loop(self) -> None:
        while True:
            try:
                (token, payload), frames = receive_message(self.conn)
            except (EOFError, OSError, ValueError):
                break
            with self._lock:
                fut = self._pending.pop(token, None)
            if fut is not None:
                fut.set_result((payload, frames))
        error = self._on_lost(self.index)
        with self._lock:
            self._lost = error
            pending, self._pending = self._pending, {}
        for fut in pending.values():
            fut.set_exception(error)

    def join(self, timeout: float) -> None:
        self._sender.join(timeout)
        self._receiver.join(timeout)
