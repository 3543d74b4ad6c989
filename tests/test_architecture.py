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


MAX_MODULES = 15  # a folder a reader takes in at a glance; past this it holds several packages
MIN_PREFIX = 3  # modules sharing a name prefix this long (jobcli, jobview, jobfleet) are a package by another name
FAMILY = 3  # ... when this many of them share it
# prefixes of one letter that name a feature (e: extended block mode, GFD.20)
FEATURE_LETTERS = ("e",)


def _folders():
    for d in sorted((ROOT / "drsftp").rglob("*")):
        if d.is_dir() and d.name != "__pycache__":
            yield str(d.relative_to(ROOT)), sorted(p.stem for p in d.glob("*.py") if p.stem != "__init__")


def prefix_families(modules: list[str]) -> dict[str, list[str]]:
    """Prefixes shared by FAMILY or more modules: MIN_PREFIX characters or more
    (the longest such prefix of each group), or one of FEATURE_LETTERS followed
    by a word (ereceive, esend, esession)."""
    groups: dict[frozenset[str], str] = {}
    for m in modules:
        for k in range(MIN_PREFIX, len(m) + 1):
            group = frozenset(x for x in modules if x.startswith(m[:k]))
            if len(group) >= FAMILY and len(m[:k]) > len(groups.get(group, "")):
                groups[group] = m[:k]
    for letter in FEATURE_LETTERS:
        group = frozenset(m for m in modules if m.startswith(letter) and len(m) >= 4 and m[1:] not in modules
                          and not any(m.startswith(p) for p in groups.values()))
        if len(group) >= FAMILY:
            groups[group] = letter
    return {prefix: sorted(group) for group, prefix in groups.items()}


def test_prefix_families_are_found():
    assert prefix_families(["job", "jobcli", "jobview", "plan"]) == {"job": ["job", "jobcli", "jobview"]}
    assert prefix_families(["ejob", "esend", "esession", "app"]) == {"e": ["ejob", "esend", "esession"]}
    assert prefix_families(["streams", "streamwindow", "sharing"]) == {}


def test_no_folder_too_big_or_holding_a_prefix_family():
    broken = {}
    for folder, modules in _folders():
        why = []
        if len(modules) > MAX_MODULES:
            why.append(f"{len(modules)} modules")
        why += [f"{prefix}*: {', '.join(group)}" for prefix, group in prefix_families(modules).items()]
        if why:
            broken[folder] = why
    assert broken == {}


def test_the_test_map_names_every_folder_and_every_test_file():
    """tests/MAP.md: a change to a folder finds its tests there."""
    import re

    text = (ROOT / "tests" / "MAP.md").read_text()
    rows = [line for line in text.splitlines() if line.startswith("| `") or line.startswith("| the ")]
    named_folders = {f for row in rows for f in re.findall(r"`([\w/]+)`", row.split("|")[1])}
    # a row's short names (`trees/job`) stand under the first full folder of the row
    full = set()
    for row in rows:
        names = re.findall(r"`([\w/]+)`", row.split("|")[1])
        base = next((n for n in names if n.startswith("drsftp")), "")
        for n in names:
            full.add(n if n.startswith("drsftp") else f"{base.rsplit('/', 1)[0] if '/' in base else base}/{n}")
    folders = {str(d.relative_to(ROOT)) for d in (ROOT / "drsftp").rglob("*")
               if d.is_dir() and d.name != "__pycache__" and any(d.glob("*.py"))} | {"drsftp"}
    assert folders - full == set(), f"folders not in tests/MAP.md: {sorted(folders - full)} (named: {named_folders})"
    listed = {t for row in rows for t in re.findall(r"test_\w+\.py", row.split("|")[2])}
    files = {p.name for p in (ROOT / "tests").glob("test_*.py")}
    assert files - listed == set(), f"test files not in tests/MAP.md: {sorted(files - listed)}"
    assert listed - files == set(), f"tests/MAP.md names missing files: {sorted(listed - files)}"
