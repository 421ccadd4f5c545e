"""A run that tests stop with signals (tests/runtime/test_signals.py, test_mpi.py): a
rechunk staged through its intermediate store on disk under a small memory limit, then a
slow step, so that the staged files are on disk while the test sends its signal.

``python staged_job.py SPILL_DIR PID_DIR [HANDLER]``: writes a file named by its pid in
PID_DIR, then runs; HANDLER installs a SIGTERM handler of the script's own first
(``exit``: records the signal and exits with status 7; ``record``: records it and carries
on) or restores the default action of SIGINT (``dfl-int``).
"""

from __future__ import annotations

import os
import signal
import sys
import time

import tilegraph as tg


def main(spill: str, pids: str, handler: str = "none") -> None:
    def record(signum, frame):
        with open(os.path.join(pids, "handled"), "a") as f:
            f.write(f"{signum}\n")
        if handler == "exit":
            raise SystemExit(7)

    if handler in ("exit", "record"):
        signal.signal(signal.SIGTERM, record)
    elif handler == "dfl-int":
        signal.signal(signal.SIGINT, signal.SIG_DFL)
    open(os.path.join(pids, str(os.getpid())), "w").close()
    with tg.config.set(memory_limit="4MiB", spill_dir=spill):
        x = tg.random.random((1000, 1000), chunks=(1000, 20), seed=0)
        total = x.rechunk((20, 1000)).map_blocks(slow).sum().compute()
    print("DONE", float(total), flush=True)


def slow(block):
    time.sleep(0.05)
    return block


if __name__ == "__main__":
    main(*sys.argv[1:])
