"""Trees of many small files on loopback: drsftp beside GridFTP and lftp, with
the time and peak memory of both ends (docs/BENCHMARKS.md, "Small files").

Every entry is a real program against a real server on 127.0.0.1, the tree on
tmpfs, so what is measured is the per-file cost of the two ends, not a path:
drsftp's client against `drsftp serve`, `globus-url-copy -r -cd -fast -cc 8`
against `globus-gridftp-server` and against `drsftp serve`, `lftp mirror -P 8`
against `drsftp serve`.  A fresh server per run, so its peak memory is that
run's.  Entries alternate (every entry's first run, then the second...), and
each tree that arrives is compared byte for byte with its source.
"""

from __future__ import annotations

import fcntl
import os
import random
import re
import shutil
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass

from ...netem.link import stop_process
from ..common.tunings import DRSFTP, PASSWORD, USER

GRIDFTP = "/usr/sbin/globus-gridftp-server"
GUC_FLAGS = ["-r", "-cd", "-fast", "-cc", "8"]  # the GridFTP command: a tree, 8 sessions, cached channels
SAMPLE_EVERY = 0.02  # seconds between memory samples


@dataclass(frozen=True)
class Entry:
    """One column: which server, which direction, and the client's command."""

    name: str
    server: str  # "drsftp" | "gridftp"
    direction: str  # "get" | "put"
    argv: Callable[[Ends], list[str]]
    program: str  # what must be installed
    description: str


@dataclass
class Ends:
    """Where one run's ends are: the server's port and the trees' paths."""

    port: int
    served: str  # the server's root (drsftp) or "/" (GridFTP names absolute paths)
    source: str  # absolute path of the source tree
    dest: str  # absolute path of the destination tree (made by the client)

    def drs_url(self, path: str) -> str:
        return f"ftp://{USER}:{PASSWORD}@127.0.0.1:{self.port}/{os.path.relpath(path, self.served)}/"

    def gsi_url(self, path: str) -> str:
        return f"ftp://127.0.0.1:{self.port}{path}/"


def _guc(server: str, direction: str) -> Entry:
    """globus-url-copy's tree command against SERVER ("gridftp": its own, "drsftp")."""
    def argv(c: Ends) -> list[str]:
        remote = c.gsi_url if server == "gridftp" else c.drs_url
        ends = [remote(c.source), f"file://{c.dest}/"] if direction == "get" else [f"file://{c.source}/",
                                                                                 remote(c.dest)]
        return ["globus-url-copy", *GUC_FLAGS, *ends]
    where = "from" if direction == "get" else "to"
    name = "globus-gridftp-server" if server == "gridftp" else "drsftp serve"
    return Entry(f"guc-{direction}-{server}", server, direction, argv, "globus-url-copy",
                 f"globus-url-copy {' '.join(GUC_FLAGS)} {where} {name}")


ENTRIES = {e.name: e for e in (
    Entry("drsftp-get", "drsftp", "get", lambda c: [*DRSFTP, "get", "-r", "-q", c.drs_url(c.source), c.dest + "/"],
          "python3", "drsftp get -r from drsftp serve"),
    Entry("drsftp-put", "drsftp", "put", lambda c: [*DRSFTP, "put", "-r", "-q", c.source + "/", c.drs_url(c.dest)],
          "python3", "drsftp put -r to drsftp serve"),
    _guc("gridftp", "get"), _guc("gridftp", "put"), _guc("drsftp", "get"), _guc("drsftp", "put"),
    Entry("lftp-mirror8", "drsftp", "get",
          lambda c: ["lftp", "-u", f"{USER},{PASSWORD}", "-p", str(c.port), "-e",
                     f"set ftp:ssl-allow no; mirror -P 8 {os.path.relpath(c.source, c.served)} {c.dest}; bye",
                     "127.0.0.1"],
          "lftp", "lftp mirror -P 8 from drsftp serve"),
)}
DEFAULT_ENTRIES = tuple(ENTRIES)
# what each direction's ratio divides by: GridFTP's own client and server
REFERENCE = {"get": "guc-get-gridftp", "put": "guc-put-gridftp"}


@dataclass
class SmallConfig:
    counts: list[int]
    entries: list[str]
    reps: int = 3
    size: int = 1024  # a file's size is drawn from 0..size bytes
    per_dir: int = 1000  # files in one directory
    workdir: str = "/dev/shm"  # tmpfs: the disk is not what is measured
    max_time: float = 1800.0
    listing: int | None = None  # also list a directory of this many entries (the server's memory)
    log: Callable[[str], object] = print
    keep: bool = False


def missing_programs(entries: list[str]) -> list[str]:
    need = {ENTRIES[n].program for n in entries} | {"drsftp"}
    if any(ENTRIES[n].server == "gridftp" for n in entries):
        need.add(GRIDFTP)
    need.discard("drsftp")
    need.discard("python3")
    return sorted(p for p in need if not (shutil.which(p) or os.path.exists(p)))


def make_tree(top: str, count: int, size: int, per_dir: int, seed: int = 41) -> int:
    """COUNT files of 0..SIZE bytes under TOP, PER_DIR to a directory, readable
    and writable by all (GridFTP's anonymous user is nobody); made once, kept
    between runs (a stamp names what is there).  Returns the bytes in all."""
    stamp = f"{top}.made"
    want = f"{count} {size} {per_dir} {seed}"
    made = _read(stamp).split("\n")
    if made[0] == want:
        return int(made[1])
    shutil.rmtree(top, ignore_errors=True)
    rnd = random.Random(seed)
    blob = rnd.randbytes(size + 4096)
    total = 0
    for i in range(count):
        d = os.path.join(top, f"d{i // per_dir:04d}")
        if i % per_dir == 0:
            os.makedirs(d, mode=0o777, exist_ok=True)
            os.chmod(d, 0o777)
        n = rnd.randint(0, size)
        start = rnd.randrange(4096)
        with open(os.path.join(d, f"f{i:07d}"), "wb") as f:
            f.write(blob[start:start + n])
        total += n
    os.chmod(top, 0o777)
    with open(stamp, "w") as f:
        f.write(f"{want}\n{total}\n")
    return total


def _read(path: str) -> str:
    try:
        with open(path) as f:
            return f.read()
    except OSError:
        return ""


def same_tree(a: str, b: str) -> str | None:
    """None if B holds exactly A's files, byte for byte; else what differs first."""
    for root, dirs, files in os.walk(a):
        rel = os.path.relpath(root, a)
        other = os.path.normpath(os.path.join(b, rel))
        try:
            theirs = set(os.listdir(other))
        except OSError:
            return f"{rel}/ is missing"
        if theirs != set(dirs) | set(files):
            extra, lost = theirs - set(dirs) - set(files), set(dirs) | set(files) - theirs
            return f"{rel}/: {len(lost)} entries missing, {len(extra)} extra"
        for name in files:
            with open(os.path.join(root, name), "rb") as f1, open(os.path.join(other, name), "rb") as f2:
                if f1.read() != f2.read():
                    return f"{os.path.join(rel, name)} differs"
    return None


class TreeMemory:
    """The peak RSS of a process and its descendants, sampled every SAMPLE_EVERY s."""

    def __init__(self, pid: int) -> None:
        import psutil

        self.proc = psutil.Process(pid)
        self.peak = 0

    def sample(self) -> None:
        import psutil

        try:
            procs = [self.proc, *self.proc.children(recursive=True)]
        except psutil.Error:
            return
        rss = 0
        for p in procs:
            try:
                rss += p.memory_info().rss
            except psutil.Error:
                pass
        self.peak = max(self.peak, rss)


def start_server(kind: str, root: str, log: str) -> tuple[subprocess.Popen, int]:
    """A fresh server on 127.0.0.1 and its port."""
    if kind == "drsftp":
        argv = [*DRSFTP, "serve", "--root", root, "--port", "0", "--user", USER, "--password", PASSWORD,
                "--max-connections-per-ip", "0"]
        pattern = r"listening on [^ ]*:(\d+)"
    else:
        argv = [GRIDFTP, "-aa", "-anonymous-user", "nobody", "-p", "0", "-control-interface", "127.0.0.1",
                "-data-interface", "127.0.0.1", "-fork", "-no-chdir", "-d", "error"]
        pattern = r"listening at [^:]+:(\d+)"
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=open(log, "ab"), text=True)  # noqa: SIM115
    line = proc.stdout.readline() if proc.stdout else ""
    m = re.search(pattern, line)
    if not m:
        stop_process(proc, 5)
        raise RuntimeError(f"{kind} server did not start: {line.strip() or 'no output'} (log: {log})")
    return proc, int(m.group(1))


def run_one(cfg: SmallConfig, entry: Entry, count: int, source: str, total: int, rep: int) -> dict:
    base = os.path.join(cfg.workdir, "drs-smallfiles")
    served = base if entry.server == "drsftp" else "/"
    dest = os.path.join(base, f"dest-{entry.name}-{os.getpid()}")  # (another run's destinations are its own)
    shutil.rmtree(dest, ignore_errors=True)
    if entry.direction == "put":
        os.makedirs(dest, mode=0o777)
        os.chmod(dest, 0o777)
    result: dict = {"entry": entry.name, "direction": entry.direction, "files": count, "bytes": total, "rep": rep,
                    "server": entry.server}
    server, port = start_server(entry.server, base, os.path.join(base, f"server-{entry.name}.log"))
    try:
        ends = Ends(port=port, served=served, source=source, dest=dest)
        smem = TreeMemory(server.pid)
        t0 = time.monotonic()
        client = subprocess.Popen(entry.argv(ends), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        try:
            cmem = TreeMemory(client.pid)
            deadline = t0 + cfg.max_time
            while client.poll() is None and time.monotonic() < deadline:
                cmem.sample()
                smem.sample()
                time.sleep(SAMPLE_EVERY)
            if client.poll() is None:
                result["error"] = f"over {cfg.max_time:g} s"
        finally:  # (also on Ctrl-C: no client left running)
            if client.poll() is None:
                client.kill()
        code = client.wait()
        seconds = time.monotonic() - t0
        err = client.stderr.read().decode(errors="replace") if client.stderr else ""
        if client.stderr:
            client.stderr.close()
        result.update(seconds=seconds, client_peak_rss=cmem.peak, server_peak_rss=smem.peak, exit=code)
        if code != 0 and "error" not in result:
            result["error"] = f"exit {code}: {err.strip()[-300:]}"
        if "error" not in result:
            differs = same_tree(source, dest)
            if differs:
                result["error"] = f"tree not identical: {differs}"
    finally:
        stop_process(server, 10)
        if not cfg.keep:
            shutil.rmtree(dest, ignore_errors=True)
    result["ok"] = "error" not in result
    return result


class _LineCounter:
    """Counts a listing's lines, sampling the server's memory as they come."""

    def __init__(self, mem: TreeMemory) -> None:
        self.mem, self.lines = mem, 0
        self.t0 = self.last = time.monotonic()

    def __call__(self, _line: str) -> None:
        self.lines += 1
        now = time.monotonic()
        if now - self.last >= SAMPLE_EVERY:
            self.mem.sample()
            self.last = now


def list_directory(cfg: SmallConfig, entries: int) -> dict:
    """The server's peak memory while one client reads MLSD, LIST and NLST of a
    directory of ENTRIES empty files (sans data: only the listing is measured)."""
    import ftplib

    base = os.path.join(cfg.workdir, "drs-smallfiles")
    flat = os.path.join(base, f"flat-{entries}")
    stamp = flat + ".made"
    if _read(stamp) != str(entries):
        shutil.rmtree(flat, ignore_errors=True)
        os.makedirs(flat)
        for i in range(entries):
            open(os.path.join(flat, f"e{i:08d}"), "wb").close()
        with open(stamp, "w") as f:
            f.write(str(entries))
    out: dict = {"entries": entries}
    for command in ("MLSD", "LIST", "NLST"):
        server, port = start_server("drsftp", base, os.path.join(base, "server-listing.log"))
        try:
            mem = TreeMemory(server.pid)
            mem.sample()
            idle = mem.peak
            ftp = ftplib.FTP()
            ftp.connect("127.0.0.1", port, timeout=cfg.max_time)
            ftp.login(USER, PASSWORD)
            counter = _LineCounter(mem)
            ftp.retrlines(f"{command} {os.path.basename(flat)}", counter)
            ftp.quit()
            out[command.lower()] = {"seconds": time.monotonic() - counter.t0, "lines": counter.lines,
                                    "server_peak_rss": mem.peak, "server_idle_rss": idle}
        finally:
            stop_process(server, 10)
    return out


def run_smallfiles(cfg: SmallConfig) -> dict:
    base = os.path.join(cfg.workdir, "drs-smallfiles")
    os.makedirs(base, exist_ok=True)
    os.chmod(base, 0o777)
    runs: list[dict] = []
    try:
        for count in cfg.counts:
            source = os.path.join(base, f"tree-{count}")
            cfg.log(f"tree: {count:,} files of 0-{cfg.size} bytes under {source}")
            with open(source + ".lock", "w") as lock:  # one maker at a time; the others take its tree
                fcntl.flock(lock, fcntl.LOCK_EX)
                total = make_tree(source, count, cfg.size, cfg.per_dir)
            for rep in range(cfg.reps):  # interleaved: every entry once, then again
                for name in cfg.entries:
                    r = run_one(cfg, ENTRIES[name], count, source, total, rep)
                    runs.append(r)
                    state = f"{r['seconds']:7.2f} s" if r["ok"] else f"ERROR {r['error']}"
                    cfg.log(f"  {name:16} {count:>9,} #{rep + 1}: {state}  client "
                            f"{r['client_peak_rss'] / 2**20:.0f} MB, server {r['server_peak_rss'] / 2**20:.0f} MB")
        listing = list_directory(cfg, cfg.listing) if cfg.listing else None
    finally:
        if not cfg.keep:
            for name in os.listdir(base):
                if name.startswith("dest-") and name.endswith(f"-{os.getpid()}"):
                    shutil.rmtree(os.path.join(base, name), ignore_errors=True)
    return {"smallfiles": 1, "size": cfg.size, "per_dir": cfg.per_dir, "runs": runs, "listing": listing}


def table(data: dict) -> str:
    """A Markdown table: per count and entry, the median time [min-max], the
    ratio to GridFTP's own pair in that direction (>1: faster than it), the
    peak memory of both ends (MiB, the largest of the runs)."""
    import statistics

    cells: dict[tuple[int, str], list[dict]] = {}
    for r in data["runs"]:
        cells.setdefault((r["files"], r["entry"]), []).append(r)
    median = {k: statistics.median(r["seconds"] for r in v if r["ok"]) for k, v in cells.items()
              if any(r["ok"] for r in v)}
    lines = ["| files | entry | seconds | x GridFTP | client MiB | server MiB | ok |", "|---|---|---|---|---|---|---|"]
    order = {name: i for i, name in enumerate(ENTRIES)}
    for (count, name), runs in sorted(cells.items(), key=lambda kv: (kv[0][0], order.get(kv[0][1], len(order)))):
        ok = [r for r in runs if r["ok"]]
        ref = median.get((count, REFERENCE[runs[0]["direction"]]))
        if ok:
            secs = [r["seconds"] for r in ok]
            mid = median[(count, name)]
            shown = f"{mid:.2f} [{min(secs):.2f}-{max(secs):.2f}]"
            ratio = f"{ref / mid:.2f}" if ref else "-"
        else:
            shown, ratio = "-", "-"
        cmem = max(r["client_peak_rss"] for r in runs) / 2**20
        smem = max(r["server_peak_rss"] for r in runs) / 2**20
        lines.append(f"| {count:,} | {name} | {shown} | {ratio} | {cmem:.0f} | {smem:.0f} | {len(ok)}/{len(runs)} |")
    if data.get("listing"):
        lst = data["listing"]
        lines += ["", f"Listing one directory of {lst['entries']:,} entries (drsftp serve):", "",
                  "| command | seconds | lines | server MiB (idle) |", "|---|---|---|---|"]
        for command in ("mlsd", "list", "nlst"):
            c = lst[command]
            lines.append(f"| {command.upper()} | {c['seconds']:.2f} | {c['lines']:,} | "
                         f"{c['server_peak_rss'] / 2**20:.0f} ({c['server_idle_rss'] / 2**20:.0f}) |")
    return "\n".join(lines)


def plot(data: dict, path: str) -> str | None:
    """Time and peak memory (client, server) against the count, one line per
    entry, log-log: cost growth shows as the slope (1: linear)."""
    import statistics

    from ..common.plots import pyplot, save_figure

    plt = pyplot()
    if plt is None:
        return None
    fig, axes = plt.subplots(1, 3, figsize=(14, 4.2))
    order = [name for name in ENTRIES if any(r["entry"] == name for r in data["runs"])]
    for name in order:
        runs = [r for r in data["runs"] if r["entry"] == name]
        counts = sorted({r["files"] for r in runs})
        ok = {c: [r for r in runs if r["files"] == c and r["ok"]] for c in counts}
        xs = [c for c in counts if ok[c]]
        if not xs:
            continue
        style = "-" if name.startswith("drsftp") else "--"
        axes[0].plot(xs, [statistics.median(r["seconds"] for r in ok[c]) for c in xs], style, marker="o", label=name)
        for ax, key in ((axes[1], "client_peak_rss"), (axes[2], "server_peak_rss")):
            ax.plot(xs, [max(r[key] for r in ok[c]) / 2**20 for c in xs], style, marker="o", label=name)
    for ax, title in zip(axes, ("seconds (median)", "client peak RSS, MiB", "server peak RSS, MiB")):
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("files in the tree")
        ax.set_title(title, fontsize=9)
    return save_figure(plt, fig, axes, path)
