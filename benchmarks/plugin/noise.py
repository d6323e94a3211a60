"""Noisy neighbours for benchmarks: busy processes that share the machine with a measurement.

::

    from noise import noisy_neighbours

    with noisy_neighbours(spinners=1, streamers=1):
        ...  # measure here, with one process spinning on a core and one streaming memory

A *spinner* is ``while True: pass`` (one core busy, no memory traffic); a *streamer* copies a
large numpy array into another in a loop (``streamer_mib`` each, default 256 MiB, so twice
that resident), which keeps a core busy and loads the memory bus and the shared caches.
Both run at the default priority. On a 2-core machine, one spinner and one streamer beside
a measuring process make more busy processes than cores.

The context manager returns once every neighbour runs (a streamer has allocated and touched
its arrays) and kills and waits for all of them on the way out, whatever ends the block:
an exception, ``KeyboardInterrupt``, or a failure while starting them. No process is left
behind.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager

SPINNER = "while True:\n    pass\n"

STREAMER = """\
import sys
import numpy as np
n = int(sys.argv[1]) * 2**20 // 8
src = np.ones(n)
dst = np.empty_like(src)
np.copyto(dst, src)
print("ready", flush=True)
while True:
    np.copyto(dst, src)
"""

START_TIMEOUT_S = 60.0


def _stop(processes: list[subprocess.Popen[bytes]]) -> None:
    for proc in processes:
        if proc.poll() is None:
            proc.kill()
    for proc in processes:
        proc.wait()
        if proc.stdout is not None:
            proc.stdout.close()


@contextmanager
def noisy_neighbours(
    spinners: int = 1, streamers: int = 1, *, streamer_mib: int = 256
) -> Iterator[list[int]]:
    """Run ``spinners`` CPU spinners and ``streamers`` memory streamers for the block; yields
    their process ids. Raises RuntimeError if a streamer dies or fails to start in time."""
    if spinners < 0 or streamers < 0 or streamer_mib <= 0:
        raise ValueError(f"bad neighbours: {spinners=}, {streamers=}, {streamer_mib=}")
    processes: list[subprocess.Popen[bytes]] = []
    try:
        for _ in range(spinners):
            processes.append(
                subprocess.Popen(
                    [sys.executable, "-c", SPINNER],
                    stdin=subprocess.DEVNULL,
                    stdout=subprocess.DEVNULL,
                )
            )
        for _ in range(streamers):
            proc = subprocess.Popen(
                [sys.executable, "-c", STREAMER, str(streamer_mib)],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
            )
            processes.append(proc)
        for proc in processes:
            if proc.stdout is None:
                continue
            line = _readline(proc, START_TIMEOUT_S)
            if line.strip() != b"ready":
                raise RuntimeError(
                    f"memory streamer {proc.pid} did not start (exit status {proc.poll()})"
                )
        for proc in processes:
            if proc.poll() is not None:
                raise RuntimeError(f"neighbour {proc.pid} ended at once ({proc.returncode})")
        yield [proc.pid for proc in processes]
        for proc in processes:
            if proc.poll() is not None:
                raise RuntimeError(
                    f"neighbour {proc.pid} died during the block (exit status "
                    f"{proc.returncode}): the measurement was not as noisy as planned"
                )
    finally:
        _stop(processes)


def _readline(proc: subprocess.Popen[bytes], timeout_s: float) -> bytes:
    """One line of ``proc``'s stdout, or b"" after ``timeout_s`` or at end of file."""
    import selectors

    assert proc.stdout is not None
    with selectors.DefaultSelector() as selector:
        selector.register(proc.stdout, selectors.EVENT_READ)
        if not selector.select(timeout_s):
            return b""
    return proc.stdout.readline()
