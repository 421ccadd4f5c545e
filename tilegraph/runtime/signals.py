"""A run stopped by a signal removes its files before the process ends.

SIGTERM (``kill``, a batch scheduler's stop, ``mpiexec`` stopping its ranks), SIGHUP (the
terminal closed) and SIGINT whose handler is the default end a Python process at once:
no ``finally`` runs, so a run stopped that way would leave its spill files and the
intermediate store of a staged rechunk on disk (hundreds of MB), until a later run or
``tilegraph clean`` removed them. While a run is in progress in the main thread,
:func:`stop_cleanly` makes such a signal raise :class:`Terminated` in the main thread
instead: the run is cancelled as Ctrl-C cancels it (the workers stop after their current
task; results are freed, spill files removed), the process's own spill and staging
directories are removed (:func:`tilegraph.debris.remove_own`), and the signal is then
delivered again with its default action, so the process ends as the signal would have
ended it (killed by SIGTERM: exit status 143 in a shell, -15 for ``subprocess``).

The handler only raises the exception, once (a second signal while the run stops is
remembered, not raised again); the cleaning happens in the main thread as the exception
unwinds, in ``finally`` blocks. Handlers of the user's own are left alone: a signal whose
handler is not the default (a Python function, ``SIG_IGN``, or Python's own handler of
SIGINT, which raises ``KeyboardInterrupt`` and so already cancels a run and cleans up)
keeps it, and it runs as it would have; an exception it raises cancels the run and cleans
up as Ctrl-C does. A run outside the main thread installs nothing (only the main thread
receives Python's signal handlers), and a run inside a run (a task that computes) uses
the outer run's handler.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
from collections.abc import Iterator

from tilegraph.debris import remove_own

STOPPING = ("SIGTERM", "SIGHUP", "SIGINT")  # signals whose default action is turned into
# a clean stop (SIGINT only when a handler of Python's or the user's is not installed)


class Terminated(BaseException):
    """The run was stopped by signal ``signum``; the process ends by that signal once the
    run has cleaned up. A ``BaseException``, like ``KeyboardInterrupt``: ``except
    Exception`` does not catch it."""

    def __init__(self, signum: int):
        super().__init__(f"the run was stopped by {signal.Signals(signum).name}")
        self.signum = signum

    def __reduce__(self) -> tuple:  # sent to the other ranks of an MPI run
        return (Terminated, (self.signum,))


_installed = False  # a run of the main thread has installed the handlers


@contextlib.contextmanager
def stop_cleanly() -> Iterator[None]:
    """Within: SIGTERM, SIGHUP and SIGINT whose handlers are the default raise
    :class:`Terminated` in the main thread; on leaving after such a signal, this process's
    spill and staging directories are removed and the process is ended by the signal.
    See the module docstring."""
    global _installed
    if _installed or threading.current_thread() is not threading.main_thread():
        yield
        return
    received: list[int] = []

    def handler(signum: int, frame: object) -> None:
        received.append(signum)
        if len(received) == 1:
            raise Terminated(signum)

    ours = []
    for name in STOPPING:
        sig = getattr(signal, name, None)
        if sig is None:
            continue
        try:
            if signal.getsignal(sig) is signal.SIG_DFL:
                signal.signal(sig, handler)
                ours.append(sig)
        except (OSError, ValueError):  # pragma: no cover - a signal this system refuses
            continue
    _installed = True
    try:
        yield
    finally:
        try:
            if received:
                remove_own()  # (a second signal meanwhile is only recorded)
        finally:
            _installed = False
            for sig in ours:
                if signal.getsignal(sig) is handler:
                    signal.signal(sig, signal.SIG_DFL)
            if received:
                os.kill(os.getpid(), received[0])  # the default action: the process ends
