"""Helpers for the dataset tests: trees to copy and a deep comparison."""

import filecmp
import json
import os

from conftest import make_file


def tree_listing(root):
    """Every directory and file below root (relative paths; dirs end in /)."""
    out = set()
    for dirpath, dirnames, filenames in os.walk(root):
        rel = os.path.relpath(dirpath, root)
        for d in dirnames:
            out.add(os.path.normpath(os.path.join(rel, d)) + "/")
        for f in filenames:
            out.add(os.path.normpath(os.path.join(rel, f)))
    return out


def assert_same_tree(a, b):
    la, lb = tree_listing(a), tree_listing(b)
    assert la == lb, f"only in {a}: {sorted(la - lb)[:10]}; only in {b}: {sorted(lb - la)[:10]}"
    for rel in la:
        if not rel.endswith("/"):
            assert filecmp.cmp(os.path.join(a, rel), os.path.join(b, rel), shallow=False), rel


def make_tree(root, depth=25, files=12):
    """Names with spaces, non-ASCII and '..' inside them, empty files and
    directories, a deep chain, a 3 MiB file."""
    os.makedirs(root, exist_ok=True)
    names = ["plain.txt", "with space.txt", "ünïcødé ñ.bin", "a..b", "..dots", "trailing..",
             "-dash", " lead space", "empty.dat"]
    for i, name in enumerate(names):
        make_file(os.path.join(root, name), 0 if name == "empty.dat" else 1000 + 37 * i, seed=i)
    os.makedirs(os.path.join(root, "empty dir"))
    os.makedirs(os.path.join(root, "sub", "ünï dir", "empty"))
    for i in range(files):
        make_file(os.path.join(root, "sub", f"f{i:03}.bin"), 4096 * i, seed=100 + i)
    make_file(os.path.join(root, "sub", "ünï dir", "big.bin"), 3 << 20, seed=7)
    deep = os.path.join(root, "deep")
    for i in range(depth):
        deep = os.path.join(deep, f"l{i}")
    os.makedirs(deep)
    make_file(os.path.join(deep, "bottom.txt"), 10, seed=9)
    return root


def job_records(path):
    with open(path) as f:
        return json.load(f)


def by_status(records):
    out = {}
    for r in records["files"]:
        out.setdefault(r["status"], set()).add(r["path"])
    return out


def assert_on_reused_streams(ok, sessions):
    """Files on cached data channels (docs/DATASETS.md#cached): each
    session's first file opens its streams (``cached`` false), every later
    one rides streams an earlier file used (true); at most ``sessions``
    sessions carried files."""
    assert ok and all("cached" in x for x in ok), ok[:1]
    firsts = [x["path"] for x in ok if not x["cached"]]
    assert 1 <= len(firsts) <= sessions, firsts
