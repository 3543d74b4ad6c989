"""docs/BENCHMARKS.md and README.md cannot drift from their data: every
table there is what the `drsftp benchreport` command above it prints from
docs/bench-data."""

import pathlib
import shlex

import pytest

from drsftp.bench.report import markdown, merge_latest, read_csv
from drsftp.bench.tunings import TUNINGS
from drsftp.cli import main

ROOT = pathlib.Path(__file__).resolve().parent.parent
DOCS = (ROOT / "docs" / "BENCHMARKS.md", ROOT / "README.md")


def quoted_tables(text: str) -> list[tuple[list[str], list[str]]]:
    """(argv after `drsftp`, the table lines that follow) for each indented command line."""
    lines = text.splitlines()
    out = []
    for i, line in enumerate(lines):
        if not line.startswith("    drsftp benchreport "):
            continue
        j = i + 1
        while j < len(lines) and not lines[j].strip():
            j += 1
        table = []
        while j < len(lines) and lines[j].startswith("|"):
            table.append(lines[j])
            j += 1
        out.append((shlex.split(line.strip())[1:], table))
    return out


QUOTED = [q for doc in DOCS for q in quoted_tables(doc.read_text())]


def test_the_docs_quote_commands_and_their_tables():
    for doc in DOCS:
        quoted = quoted_tables(doc.read_text())
        assert quoted, f"{doc.name} quotes no benchreport table"
        assert all(table for _, table in quoted), f"a benchreport command in {doc.name} with no table under it"


@pytest.mark.parametrize("argv,table", QUOTED, ids=[" ".join(a[1:3]) for a, _ in QUOTED])
def test_each_table_is_what_its_command_prints(argv, table, capsys, monkeypatch):
    monkeypatch.chdir(ROOT)
    assert main(argv) == 0
    assert capsys.readouterr().out.splitlines() == table


def test_csv_runs_read_back_typed_and_a_later_file_replaces_a_path():
    data = ROOT / "docs" / "bench-data"
    old, new = read_csv(str(data / "recovery-room-ab-old.csv")), read_csv(str(data / "recovery-room-ab-new.csv"))
    run = new[0]
    assert isinstance(run["mbps"], float) and isinstance(run["bytes"], int) and run["complete"] in (True, False)
    assert run["error"] is None
    merged = merge_latest([old, new])
    assert merged == new  # the same paths: the new rounds replace the old ones whole
    text = markdown(None, merged, list(TUNINGS), "speed")
    assert text.splitlines()[0] == "| path | kernel | drs | ceiling |"


def test_benchreport_says_so_in_one_line_when_no_run_matches(capsys):
    assert main(["benchreport", str(ROOT / "docs" / "bench-data" / "force-1g-100ms.csv"), "--rtt", "25ms"]) == 1
    assert capsys.readouterr().err.strip() == "drsftp: error: no runs match the filters"


def test_benchreport_refuses_a_csv_that_is_not_bench_results_in_one_line(tmp_path, capsys):
    other = tmp_path / "other.csv"
    other.write_text("a,b\n1,2\n")
    assert main(["benchreport", str(other)]) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"drsftp: error: cannot read {other}: not a bench results CSV") and "Traceback" not in err
