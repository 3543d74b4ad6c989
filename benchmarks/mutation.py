"""Mutation testing of the sans-IO cores, outside the suite (docs/MUTATION.md).

Applies one small change at a time to drsftp/tuning/*.py and drsftp/ftp/*.py
(a comparison, an arithmetic or boolean operator, a numeric constant, min/max,
a ``not``) in a temporary copy of the tree, runs the fast unit tests against
the copy and reports the mutants no test kills ("survivors").  The working
tree is never touched.

    python benchmarks/mutation.py                 # every file, every site
    python benchmarks/mutation.py --files drsftp/tuning/drs.py --max-seconds 600
    python benchmarks/mutation.py --list          # the sites only, no runs

Exit status 0 when every mutant is killed or listed in KNOWN (explained as
harmless in docs/MUTATION.md), 1 otherwise.
"""

from __future__ import annotations

import argparse
import ast
import glob
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TARGETS = ("drsftp/tuning/*.py", "drsftp/ftp/*.py")
TESTS = ("tests/test_mutation_kills.py", "tests/test_tuning_pinned.py", "tests/test_tuning.py", "tests/test_ftp_proto.py",
         "tests/test_budget.py")

COMPARE = {ast.Lt: ast.LtE, ast.LtE: ast.Lt, ast.Gt: ast.GtE, ast.GtE: ast.Gt,
           ast.Eq: ast.NotEq, ast.NotEq: ast.Eq, ast.In: ast.NotIn, ast.NotIn: ast.In,
           ast.Is: ast.IsNot, ast.IsNot: ast.Is}
BINOP = {ast.Add: ast.Sub, ast.Sub: ast.Add, ast.Mult: ast.Div, ast.Div: ast.Mult,
         ast.FloorDiv: ast.Div, ast.Mod: ast.FloorDiv, ast.Pow: ast.Mult}
BOOLOP = {ast.And: ast.Or, ast.Or: ast.And}
MINMAX = {"min": "max", "max": "min"}

# Mutants explained as harmless in docs/MUTATION.md, as "file:line:column: description".
KNOWN: frozenset[str] = frozenset()


@dataclass(frozen=True)
class Site:
    path: str
    index: int
    line: int
    col: int
    what: str

    def key(self) -> str:
        return f"{self.path}:{self.line}:{self.col}: {self.what}"


def _skip(node: ast.AST, parents: dict[ast.AST, ast.AST]) -> bool:
    """Annotations and docstrings carry no behaviour."""
    while node in parents:
        parent = parents[node]
        if isinstance(parent, ast.AnnAssign) and node is parent.annotation:
            return True
        if isinstance(parent, ast.arg) and node is parent.annotation:
            return True
        if isinstance(parent, (ast.FunctionDef, ast.AsyncFunctionDef)) and node is parent.returns:
            return True
        node = parent
    return False


class Mutator(ast.NodeTransformer):
    """Counts mutation sites in a fixed walk order; mutates site ``target``
    (None: only collect them)."""

    def __init__(self, path: str, tree: ast.AST, target: int | None = None) -> None:
        self.path, self.target, self.sites = path, target, []
        self.parents = {c: p for p in ast.walk(tree) for c in ast.iter_child_nodes(p)}

    def _site(self, node: ast.AST, what: str) -> bool:
        if _skip(node, self.parents):
            return False
        i = len(self.sites)
        self.sites.append(Site(self.path, i, node.lineno, node.col_offset, what))
        return i == self.target

    def visit_Compare(self, node: ast.Compare) -> ast.AST:
        self.generic_visit(node)
        for k, op in enumerate(node.ops):
            new = COMPARE.get(type(op))
            if new and self._site(node, f"{type(op).__name__} -> {new.__name__}"):
                node.ops[k] = new()
        return node

    def visit_BinOp(self, node: ast.BinOp) -> ast.AST:
        self.generic_visit(node)
        new = BINOP.get(type(node.op))
        if new and self._site(node, f"{type(node.op).__name__} -> {new.__name__}"):
            node.op = new()
        return node

    def visit_AugAssign(self, node: ast.AugAssign) -> ast.AST:
        self.generic_visit(node)
        new = BINOP.get(type(node.op))
        if new and self._site(node, f"{type(node.op).__name__}= -> {new.__name__}="):
            node.op = new()
        return node

    def visit_BoolOp(self, node: ast.BoolOp) -> ast.AST:
        self.generic_visit(node)
        new = BOOLOP[type(node.op)]
        if self._site(node, f"{type(node.op).__name__} -> {new.__name__}"):
            node.op = new()
        return node

    def visit_UnaryOp(self, node: ast.UnaryOp) -> ast.AST:
        self.generic_visit(node)
        if isinstance(node.op, ast.Not) and self._site(node, "not x -> x"):
            return node.operand
        return node

    def visit_Call(self, node: ast.Call) -> ast.AST:
        self.generic_visit(node)
        if isinstance(node.func, ast.Name) and node.func.id in MINMAX:
            new = MINMAX[node.func.id]
            if self._site(node, f"{node.func.id}() -> {new}()"):
                node.func = ast.Name(new, ast.Load())
        return node

    def visit_Constant(self, node: ast.Constant) -> ast.AST:
        v = node.value
        if isinstance(v, bool):
            if self._site(node, f"{v} -> {not v}"):
                return ast.Constant(not v)
        elif isinstance(v, int):
            if self._site(node, f"{v} -> {v + 1}"):
                return ast.Constant(v + 1)
        elif isinstance(v, float):
            new = v / 2 if v else 1.0  # half, or 1.0 for 0.0
            if self._site(node, f"{v!r} -> {new!r}"):
                return ast.Constant(new)
        return node


def _read(path: str) -> str:
    with open(path) as f:
        return f.read()


def sites(path: str) -> list[Site]:
    tree = ast.parse(_read(os.path.join(ROOT, path)))
    m = Mutator(path, tree)
    m.visit(tree)
    return m.sites


def mutate(path: str, index: int) -> str:
    tree = ast.parse(_read(os.path.join(ROOT, path)))
    Mutator(path, tree, index).visit(tree)
    return ast.unparse(ast.fix_missing_locations(tree))


def run_tests(tree_dir: str, timeout: float) -> str:
    """'killed', 'survived' or 'timeout' (a hang counts as killed)."""
    env = dict(os.environ, PYTHONPATH=tree_dir, PYTHONDONTWRITEBYTECODE="1")
    cmd = [sys.executable, "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider",
           "-o", "addopts=", *[os.path.join(tree_dir, t) for t in TESTS]]
    try:
        r = subprocess.run(cmd, check=False, cwd=tree_dir, env=env, capture_output=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return "timeout"
    return "survived" if r.returncode == 0 else "killed"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--files", nargs="*", help=f"files to mutate (default: {', '.join(TARGETS)})")
    ap.add_argument("--max-seconds", type=float, default=3600, help="stop starting mutants after this")
    ap.add_argument("--timeout", type=float, default=120, help="per-mutant test timeout (a hang = killed)")
    ap.add_argument("--lines", help="only the sites on these lines (comma-separated; with one file)")
    ap.add_argument("--only", metavar="FILE",
                    help="only the mutants named in FILE, one 'path:line: what' or 'SURVIVED: ...' a line"
                         " (a previous run's output: re-check its survivors)")
    ap.add_argument("--list", action="store_true", help="list the sites and exit")
    args = ap.parse_args(argv)
    files = args.files or sorted(p for g in TARGETS for p in glob.glob(g, root_dir=ROOT))
    all_sites = [s for f in files for s in sites(f)]
    if args.lines:
        wanted = {int(n) for n in args.lines.split(",")}
        all_sites = [s for s in all_sites if s.line in wanted]
    if args.only:
        named = {line.split(": ", 1)[-1].strip() if line.startswith(("SURVIVED", "known")) else line.strip()
                 for line in _read(args.only).splitlines()}
        all_sites = [s for s in all_sites if f"{s.path}:{s.line}: {s.what}" in named or s.key() in named]
    if args.list:
        for s in all_sites:
            print(s.key())
        print(f"{len(all_sites)} sites")
        return 0
    tmp = tempfile.mkdtemp(prefix="drsmut")
    try:
        shutil.copytree(os.path.join(ROOT, "drsftp"), os.path.join(tmp, "drsftp"))
        shutil.copytree(os.path.join(ROOT, "tests"), os.path.join(tmp, "tests"))
        shutil.copy(os.path.join(ROOT, "pyproject.toml"), tmp)
        if run_tests(tmp, args.timeout) != "survived":
            print("the unmutated tree fails its tests", file=sys.stderr)
            return 1
        start, done, survivors = time.monotonic(), 0, []
        for s in all_sites:
            if time.monotonic() - start > args.max_seconds:
                break
            target = os.path.join(tmp, s.path)
            original = _read(target)
            with open(target, "w") as f:
                f.write(mutate(s.path, s.index))
            try:
                result = run_tests(tmp, args.timeout)
            finally:
                with open(target, "w") as f:
                    f.write(original)
            done += 1
            if result == "survived":
                survivors.append(s)
                mark = "known" if s.key() in KNOWN else "SURVIVED"
                print(f"{mark}: {s.key()}", flush=True)
        unknown = [s for s in survivors if s.key() not in KNOWN]
        print(f"{done}/{len(all_sites)} mutants run in {time.monotonic() - start:.0f} s: "
              f"{done - len(survivors)} killed, {len(survivors)} survived "
              f"({len(unknown)} not explained)")
        return 1 if unknown or done < len(all_sites) else 0
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
