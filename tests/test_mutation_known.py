"""benchmarks/mutation.py's KNOWN survivors against the sources and
docs/MUTATION.md: every explained mutant still names a site (an edit of its
code asks for the mutant to be run and explained again), and the docs'
survivors table is KNOWN, word for word."""

import glob
import os

from conftest import benchmark_module

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_every_known_survivor_names_a_site_of_the_current_sources():
    m = benchmark_module("mutation")
    files = sorted(p for g in m.TARGETS for p in glob.glob(g, root_dir=ROOT))
    keys = {s.key() for f in files for s in m.sites(f)}
    assert [k for k in m.KNOWN if k not in keys] == []


def test_the_docs_survivors_table_is_known(capsys):
    m = benchmark_module("mutation")
    assert m.main(["--known"]) == 0
    table = capsys.readouterr().out
    with open(os.path.join(ROOT, "docs", "MUTATION.md")) as f:
        docs = f.read()
    assert table in docs
    assert docs.count("\n| drsftp/") == len(m.KNOWN)  # no row that KNOWN lacks
