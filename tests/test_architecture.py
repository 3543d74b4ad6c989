"""The layout's rules, checked on the code's own imports (docs/DESIGN.md, "Shape").

Every import counts: at module level, inside functions, and under
TYPE_CHECKING (grimp reads them all)."""

import subprocess
import sys
from pathlib import Path

import grimp

ROOT = Path(__file__).resolve().parent.parent
MAX_LINES = 500  # a module does one thing; past this it does several


def _graph():
    return grimp.build_graph("drsftp", include_external_packages=False)


def _cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in edges.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            scc = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                scc.append(w)
                if w == v:
                    break
            if len(scc) > 1:
                found.append(sorted(scc))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return found


def test_no_import_cycle_between_modules():
    graph = _graph()
    modules = {m for m in graph.modules if m.startswith("drsftp")}
    edges = {m: {i for i in graph.find_modules_directly_imported_by(m) if i in modules} for m in modules}
    # a package's __init__ re-exporting its modules is no cycle of behaviour
    edges = {m: {i for i in deps if not m.startswith(i + ".")} for m, deps in edges.items()}
    assert _cycles(edges) == []


def test_the_cycle_finder_sees_a_cycle_through_three_modules():
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert _cycles({"a": {"b"}, "b": set()}) == []


def test_the_layer_contracts_hold():
    """pyproject.toml's [tool.importlinter] contracts: the sans-IO cores do no
    I/O and import no driver, netem stands alone, client and server share
    only the cores."""
    lint = Path(sys.executable).with_name("lint-imports")
    r = subprocess.run([str(lint), "--no-cache"], cwd=ROOT, capture_output=True, text=True, timeout=300,
                       check=False)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-2000:]
    assert "0 broken" in r.stdout


def test_no_source_file_over_500_lines():
    long = {str(p.relative_to(ROOT)): n for p in (ROOT / "drsftp").rglob("*.py")
            if (n := len(p.read_text().splitlines())) > MAX_LINES}
    assert long == {}
