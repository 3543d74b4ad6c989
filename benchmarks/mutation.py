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
TESTS = ("tests/test_mutation_kills.py", "tests/test_tuning_pinned.py", "tests/test_tuning.py",
         "tests/test_ftp_proto.py", "tests/test_budget.py", "tests/test_socket_controller.py")

COMPARE = {ast.Lt: ast.LtE, ast.LtE: ast.Lt, ast.Gt: ast.GtE, ast.GtE: ast.Gt,
           ast.Eq: ast.NotEq, ast.NotEq: ast.Eq, ast.In: ast.NotIn, ast.NotIn: ast.In,
           ast.Is: ast.IsNot, ast.IsNot: ast.Is}
BINOP = {ast.Add: ast.Sub, ast.Sub: ast.Add, ast.Mult: ast.Div, ast.Div: ast.Mult,
         ast.FloorDiv: ast.Div, ast.Mod: ast.FloorDiv, ast.Pow: ast.Mult}
BOOLOP = {ast.And: ast.Or, ast.Or: ast.And}
MINMAX = {"min": "max", "max": "min"}

# Mutants explained as harmless in docs/MUTATION.md (equivalent, a float boundary,
# or a message's wording), keyed "file:line:column: description"; line numbers move
# with every edit of the file, so re-check them with --only after one.
KNOWN: dict[str, str] = {
    'drsftp/tuning/actuation.py:97:56: 0 -> 1':
        'a missing bytes_acked read as 0 or 1: either is not past the SYN (> 1)',
    'drsftp/tuning/controller.py:89:23: 0.0 -> 1.0':
        'attach() sets started before anything reads it',
    'drsftp/tuning/controller.py:96:22: 0 -> 1':
        'every tick sets the moved count before the driver records a timeline row',
    'drsftp/tuning/controller.py:136:23: Lt -> LtE':
        "a cap equal to the config's replaces it with itself (the floor already at most the cap)",
    'drsftp/tuning/controller.py:150:34: 0 -> 1':
        'without tcp_rmem/tcp_wmem autotuning never reaches further, so the claim is never asked',
    'drsftp/tuning/controller.py:180:88: 0 -> 1':
        'a strategy without a floor: max(0, 1) and max(1, 1) are both 1',
    'drsftp/tuning/controller.py:291:50: 3 -> 4':
        'TCP_INFO RTTs are whole microseconds: milliseconds have 3 decimals at most',
    'drsftp/tuning/drs.py:233:105: 0 -> 1':
        'no CPU floor on long paths: max(target, 1) is the target (the window floor is 256 KiB)',
    'drsftp/ftp/drscmd.py:50:52: 40 -> 41':
        'length of the bad token quoted in a 501 message',
    'drsftp/ftp/drscmd.py:54:39: 1 -> 2':
        'scale of the default bound tuple for unknown keys: never read (only the bound is)',
    'drsftp/ftp/drscmd.py:65:59: 1 -> 2':
        '`scale != 1` is a shortcut: multiplying by a scale of 1 is the identity',
    'drsftp/ftp/replies.py:77:62: 80 -> 81':
        'length of the bad line quoted in a ProtocolError message',
    'drsftp/tuning/budget.py:63:11: Gt -> GtE':
        'at need == allowed the scale is 1.0 and the floors leave the sizes as asked',
    'drsftp/tuning/budget.py:64:33: 0 -> 1':
        'allowed <= 0 scales to 0 or 1 byte, which the floor replaces'
        ' (the floor is 0 only for a budget under one byte per flow)',
    'drsftp/tuning/budget.py:85:27: LtE -> Lt':
        "at wanted == pool the proportional share is exactly the flow's need: no grant changes",
    'drsftp/tuning/budget.py:86:29: 0 -> 1':
        'a negative pool needs whole claims past the total, which claim() and reserve() (half of what is free) prevent',
    'drsftp/tuning/budget.py:90:25: FloorDiv -> Div':
        'for an integer amount, amount <= free // 2 and amount <= free / 2 agree',
    'drsftp/tuning/budget.py:110:67: 1 -> 2':
        '_floor() runs with the flow registered (n >= 1); n = 1 differs only for a lone flow'
        ' over a budget under 128 KiB in both directions',
    'drsftp/tuning/drs.py:94:26: True -> False':
        'the initial slow_start is assigned at the first measured tick before anything reads it',
    'drsftp/tuning/drs.py:190:39: GtE -> Gt':
        'a rate exactly 1.5x the last at float precision: a boundary measured rates do not sit on',
    'drsftp/tuning/drs.py:201:25: Lt -> LtE':
        'a measurement exactly one hold span old (float times): boundary',
    'drsftp/tuning/drs.py:244:15: Lt -> LtE':
        'a tick exactly at the end of the recovery period (float times): boundary',
    'drsftp/tuning/drs.py:280:25: Lt -> LtE':
        'a sender rate exactly two RTTs old (float times): boundary',
    'drsftp/tuning/drs.py:283:38: GtE -> Gt':
        "the sender's rate exactly 1.5x the last: boundary, as drs.py:208",
    'drsftp/tuning/drs.py:285:49: 0 -> 1':
        "without a reported window, max(1, kernel's window) is the kernel's window (guarded non-zero)",
    'drsftp/tuning/drs.py:296:19: 0 -> 1':
        'need is the smaller of positive byte counts; a cwnd or window of 1 byte does not occur'
        ' (TCP: one MSS at least)',
    'drsftp/tuning/drs.py:331:32: Gt -> GtE':
        'an RTT exactly 1.25x the minimum: boundary',
    'drsftp/tuning/drs.py:339:14: Gt -> GtE':
        'with two samples hist[1] is the newest, never a span old: the loop stops there either way',
    'drsftp/tuning/drs.py:339:32: LtE -> Lt':
        'keeps a sample exactly one span old; the interpolation gives the same count',
    'drsftp/tuning/drs.py:342:34: 1e-09 -> 5e-10':
        'float tolerance of the one-span test',
    'drsftp/tuning/drs.py:342:11: Lt -> LtE':
        'history exactly one span long at float precision: boundary',
    'drsftp/tuning/drs.py:344:11: Gt -> GtE':
        'with two samples, interpolating toward the newest keeps the same slope: the same rate',
    'drsftp/tuning/drs.py:344:34: 1 -> 2':
        'hist[2] is newer than hist[1], so it is after t0 whenever hist[1] is',
    'drsftp/tuning/drs.py:344:29: Gt -> GtE':
        'guards a division by zero for two samples at one instant at the head of a span-old history: not reached',
    'drsftp/tuning/drs.py:344:11: And -> Or':
        'as drs.py:365 Gt -> GtE: two-sample interpolation keeps the slope',
    'drsftp/tuning/drs.py:348:31: 0 -> 1':
        "one byte per span instead of none when nothing arrived: ~10 B/s, below any window's floor",
    'drsftp/tuning/drs.py:353:11: Lt -> LtE':
        'a target equal to the window: max(target, window x shrink) is the target',
    'drsftp/tuning/drs.py:375:15: LtE -> Lt':
        'a peer report exactly at its freshness limit: boundary',
}


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
