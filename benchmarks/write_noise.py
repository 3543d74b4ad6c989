"""How much writing a fresh file into the page cache costs, run after run.

    python benchmarks/write_noise.py [--size MiB] [--runs N] [--dir DIR]

Writes SIZE MiB of one 4 MiB buffer to a new file in DIR, deletes it, and
does that RUNS times (at most 50), printing the wall and system seconds of
each write.  No network: what this shows is the machine's noise under
every loopback figure whose receiver writes a file
(docs/BENCHMARKS.md#peer-cpu).
"""

import argparse
import os
import resource
import statistics
import tempfile
import time


def write_once(path: str, size: int, chunk: bytes) -> tuple[float, float]:
    sys0, t0 = resource.getrusage(resource.RUSAGE_SELF).ru_stime, time.monotonic()
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        left = size
        while left > 0:
            left -= os.write(fd, chunk[:left])
    finally:
        os.close(fd)
    return time.monotonic() - t0, resource.getrusage(resource.RUSAGE_SELF).ru_stime - sys0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--size", type=int, default=1024, help="MiB per file (default 1024)")
    ap.add_argument("--runs", type=int, default=10, help="files written one after another (default 10, at most 50)")
    ap.add_argument("--dir", default=None, help="where (default: the temporary directory)")
    a = ap.parse_args()
    chunk = bytes(4 << 20)
    walls, syss = [], []
    with tempfile.TemporaryDirectory(prefix="drs-writenoise-", dir=a.dir) as work:
        path = os.path.join(work, "x.bin")
        for run in range(min(max(a.runs, 1), 50)):
            wall, sys_s = write_once(path, a.size << 20, chunk)
            os.unlink(path)
            walls.append(wall)
            syss.append(sys_s)
            print(f"run {run + 1}: {wall:.2f} s wall, {sys_s:.2f} s system", flush=True)
            time.sleep(0.5)
    print(f"system s/GB: min {min(syss) / (a.size / 953.67):.2f}, median "
          f"{statistics.median(syss) / (a.size / 953.67):.2f}, max {max(syss) / (a.size / 953.67):.2f}")


if __name__ == "__main__":
    main()
