"""docs/BENCHMARKS.md and README.md cannot drift from their data: every
table there is what the `drsftp benchreport` command above it prints from
docs/bench-data."""

import json
import pathlib
import shlex

import pytest

from drsftp.bench.common.tunings import TUNINGS
from drsftp.bench.compare.report import markdown, merge_latest, read_csv
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


ENV = {"date": "d", "kernel": "k", "machine": "m", "congestion_control": "cubic", "buffer_force_used": False,
       "buffer_force_available": False,
       "host_sysctls": {"net.core.rmem_max": 1, "net.core.wmem_max": 1, "net.ipv4.tcp_wmem": [1, 2, 3]}}


def _bench_run(tuning="drs", mbps=90.0, **kw):
    from drsftp.bench.common.record import BenchRun

    run = BenchRun(tuning=tuning, direction="get", path="big.bin", rate_bps=100e6, rtt_s=0.1,
                   ceiling_mbps=96.5, bytes=int(mbps * 1e6 / 8), seconds=1.0, complete=True,
                   timeline=[{"t": 0.1, "rate_bps": None, "rtt_ms": 100.0, "rcvbuf": 1 << 20}])
    return dict(run.to_dict(), **kw)


def test_results_the_bench_writes_read_back(tmp_path, capsys):
    from drsftp.bench.compare.report import write_files

    files = write_files(ENV, [_bench_run("kernel", 60.0), _bench_run("drs", 90.0)], str(tmp_path))
    for path in files.values():
        assert main(["benchreport", path, "--table", "versus"]) == 0
        out = capsys.readouterr().out.splitlines()
        assert out[2].startswith("| default 100M 100ms get | 60.0 | 1.50x |"), out


DAMAGED = [
    ('{"field": 1}', "is not the output of drsftp bench: field results without their runs"),
    ('{"environment": {}}', "is not the output of drsftp bench: it has no runs"),
    ('{"runs": []}', "is not the output of drsftp bench: it has no environment"),
    ('{"environment": {}, "runs": []}', "is not the output of drsftp bench: its environment is incomplete"),
    ("[1, 2]", "is not the output of drsftp bench: it holds no object"),
    ("not json", "not JSON (Expecting value: line 1 column 1 (char 0))"),
    ("[" * 100_000 + "]" * 100_000, "its JSON is nested too deep"),
    (json.dumps({"environment": ENV, "runs": [{k: v for k, v in _bench_run().items() if k != "profile"}]}),
     "run 1 has no profile"),
    (json.dumps({"environment": ENV, "runs": [_bench_run(), dict(_bench_run(), mbps="fast")]}), "run 2 has a bad mbps"),
    (json.dumps({"environment": ENV, "runs": [_bench_run(ceiling_mbps=0)]}), "run 1 has a bad ceiling_mbps"),
    (json.dumps({"environment": ENV, "runs": [_bench_run(rtt_s=float("nan"))]}), "run 1 has a bad rtt_s"),
    (json.dumps({"environment": ENV, "runs": [_bench_run(timeline=[{"rcvbuf": 1}])]}), "run 1 has a bad timeline"),
    (json.dumps({"environment": ENV, "runs": {"a": 1}}), "its runs are not a list"),
    (json.dumps({"field": 1, "results": [{"entry": "drsftp"}]}), "run 1 has no workload"),
    (json.dumps({"field": 1, "results": [{"entry": "drsftp", "workload": "big", "complete": True, "mbps": 9.0,
                                          "ceiling_mbps": 965.3, "bdp": 0, "files": 1, "bytes": 1,
                                          "peak_snd_used": 0, "peak_rcv_used": 0}]}), "run 1 has a bad bdp"),
]


@pytest.mark.parametrize("text,reason", DAMAGED, ids=[r for _, r in DAMAGED])
def test_a_file_that_is_not_bench_results_is_one_sentence(text, reason, tmp_path, capsys):
    path = tmp_path / "r.json"
    path.write_text(text)
    assert main(["benchreport", str(path)]) == 1  # as a CSV that is not the bench's (below)
    err = capsys.readouterr().err
    assert err.startswith(f"drsftp: error: {'cannot read ' if 'JSON' in reason else ''}{path}")
    assert reason in err and err.count("\n") == 1


FORCE = str(ROOT / "docs" / "bench-data" / "force-1g-100ms.csv")  # manual and drs runs, no kernel
FIELD = str(ROOT / "docs" / "bench-data" / "field-big-1g-100ms.json")


@pytest.mark.parametrize("argv,code,message", [
    ([FORCE, "--table", "versus", "--base", "bogus"], 2,
     "unknown --base 'bogus'; choose from " + ", ".join(TUNINGS)),
    ([FORCE, "--table", "versus"], 1, "no kernel run completed to divide by; --base one of manual, drs"),
    ([FORCE, "--base", "manual"], 2, "--base goes with --table versus (or with field results)"),
    ([FORCE, "--tunings", ","], 2, "--tunings needs at least one value"),
    ([FORCE, "--tunings", "drs,fast"], 2, "unknown tuning 'fast'; choose from " + ", ".join(TUNINGS)),
    ([FORCE, "--loss", "200%"], 2, "--loss: loss must lie between 0 and 100%, not 200%"),
    ([FORCE, "--rtt", "soon"], 2, "--rtt: not a duration: 'soon' (examples: 100ms, 0.5ms, 1s)"),
    ([FORCE, "--dataset", "big"], 2,
     "--dataset applies to field results only (drsftp bench field)"),
    ([FIELD, "--base", "bogus"], 2, "unknown --base 'bogus'; choose from drsftp, "),
    ([FIELD, "--base", "gridftp-fast"], 1, "no gridftp-fast run completed to divide by; --base one of drsftp, "),
    ([FIELD, "--table", "speed"], 2,
     "--table applies to bench results, not field results (those take --dataset and --base)"),
    ([FIELD, "--dataset", "huge"], 1, "no runs of the 'huge' dataset in these results (they hold big)"),
    ([FIELD, FORCE], 1, "field results (drsftp bench field) print alone"),
])
def test_benchreport_options_that_cannot_apply_are_refused(argv, code, message, capsys):
    assert main(["benchreport", *argv]) == code
    captured = capsys.readouterr()
    assert captured.err.startswith(f"drsftp: error: {message}") and captured.err.count("\n") == 1, captured.err
    assert captured.out == ""


def test_field_results_divide_by_the_base_given(capsys):
    assert main(["benchreport", FIELD, "--dataset", "big", "--base", "drsftp"]) == 0
    out = capsys.readouterr().out
    assert "| entry | Mbit/s | x drsftp |" in out and "| drsftp | " in out
