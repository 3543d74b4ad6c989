"""The datasets the field and third-party benches move (docs/BENCHMARKS.md,
"Against the field"): their shapes and the trees made from them."""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass

MiB = 1 << 20


@dataclass(frozen=True)
class Workload:
    name: str
    files: tuple[tuple[str, int], ...]  # (path relative to the tree, size)

    @property
    def tree(self) -> bool:
        return len(self.files) > 1

    @property
    def bytes(self) -> int:
        return sum(n for _, n in self.files)


def workload(name: str, scale: float = 1.0) -> Workload:
    """big: one 512 MiB file; small: 200 x 1 MiB; mixed: one 256 MiB file and
    1,000 x 64 KiB (the datasets issue's three shapes); deep: small's files
    in 40 directories (what listing costs); ``scale`` shrinks sizes and
    counts for a quick run."""
    def n(x: int) -> int:
        return max(1, int(x * scale))
    if name == "big":
        return Workload(name, (("big.bin", n(512) * MiB),))
    if name == "small":
        return Workload(name, tuple((f"f{i:04d}.bin", MiB) for i in range(n(200))))
    if name == "mixed":
        return Workload(name, (("big.bin", n(256) * MiB),)
                        + tuple((f"s/f{i:04d}.bin", 64 << 10) for i in range(n(1000))))
    if name == "deep":
        return Workload(name, tuple((f"d{i % n(40):02d}/f{i:04d}.bin", MiB) for i in range(n(200))))
    raise ValueError(f"unknown workload {name!r} (big, small, mixed, deep)")


def make_tree(root: str, wl: Workload) -> str:
    """The workload under ROOT/<name>, world-readable (GridFTP's anonymous
    user reads as nobody); made once, kept between runs."""
    top = os.path.join(root, wl.name)
    stamp = os.path.join(root, f".{wl.name}.made")
    made = ""
    if os.path.exists(stamp):
        with open(stamp) as sf:
            made = sf.read()
    if made == repr(wl.files):
        return top if wl.tree else os.path.join(top, wl.files[0][0])
    shutil.rmtree(top, ignore_errors=True)
    block = os.urandom(MiB)
    for rel, size in wl.files:
        p = os.path.join(top, rel)
        os.makedirs(os.path.dirname(p), exist_ok=True)
        with open(p, "wb") as out:
            left = size
            while left > 0:
                out.write(block[:min(left, MiB)])
                left -= MiB
                block = block[1:] + block[:1]  # no two MiB alike
    for d, _, fs in os.walk(root):
        os.chmod(d, 0o755)
        for name in fs:
            os.chmod(os.path.join(d, name), 0o644)
    with open(stamp, "w") as sf:
        sf.write(repr(wl.files))
    return top if wl.tree else os.path.join(top, wl.files[0][0])
