"""tools/mutation.py's KNOWN survivors against the sources and
docs/MUTATION.md: every explained mutant still names a site (an edit of its
code asks for the mutant to be run and explained again), and the docs'
survivors table is KNOWN, word for word."""

import glob
import importlib.util
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def tool():
    """tools/mutation.py loaded as module ``mutation`` (a script, not a package)."""
    spec = importlib.util.spec_from_file_location("mutation", os.path.join(ROOT, "tools", "mutation.py"))
    module = importlib.util.module_from_spec(spec)
    sys.modules["mutation"] = module  # (its dataclasses look their module up)
    spec.loader.exec_module(module)
    return module


def test_every_known_survivor_names_a_site_of_the_current_sources():
    m = tool()
    files = sorted(p for g in m.TARGETS for p in glob.glob(g, root_dir=ROOT))
    keys = {s.key() for f in files for s in m.sites(f)}
    assert [k for k in m.KNOWN if k not in keys] == []


def test_the_docs_survivors_table_is_known(capsys):
    m = tool()
    assert m.main(["--known"]) == 0
    table = capsys.readouterr().out
    with open(os.path.join(ROOT, "docs", "MUTATION.md")) as f:
        docs = f.read()
    assert table in docs
    assert docs.count("\n| drsftp/") == len(m.KNOWN)  # no row that KNOWN lacks
