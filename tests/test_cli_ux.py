"""The command line as a newcomer meets it: help on every option, one result
line per transfer (none with -q), errors as one plain sentence, and the
bench's closing sentence on what won."""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys

from conftest import drsftp, make_file, sha256_file

from drsftp.cli import build_parser
from drsftp.result import SCHEMA, TransferResult


def _parsers(parser: argparse.ArgumentParser, path: str = "drsftp"):
    yield path, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from _parsers(sub, f"{path} {name}")


def test_every_argument_of_every_subcommand_has_help() -> None:
    missing = []
    seen = 0
    for path, parser in _parsers(build_parser()):
        for action in parser._actions:
            if isinstance(action, (argparse._HelpAction, argparse._SubParsersAction)):
                continue
            seen += 1
            if not action.help or action.help == argparse.SUPPRESS:
                missing.append(f"{path} {'/'.join(action.option_strings) or action.dest}")
    assert seen > 80  # the walk reached the subcommands
    assert not missing, "no help text: " + ", ".join(missing)


def test_description_is_a_whole_sentence() -> None:
    desc = build_parser().description
    assert desc and desc.endswith(".") and desc.count("(") == desc.count(")") and len(desc.split()) >= 8
    out = subprocess.run([sys.executable, "-m", "drsftp", "--help"], capture_output=True, text=True, timeout=30).stdout
    assert " ".join(desc.split()) in " ".join(out.split())


RESULT_LINE = re.compile(r"^(?P<name>[\w.-]+): (?P<size>[\d.]+ (B|KiB|MiB|GiB)) in [\d.]+ s, [\d.]+ (k|M|G)?bit/s, "
                         r"RTT [\d.]+ ms, DRS (with peer|at this end only)$")


def test_get_and_put_print_one_result_line_without_a_terminal(server, tmp_path):
    src = make_file(tmp_path / "up.bin", 3 << 20, seed=21)
    r = drsftp("put", str(src), server.url("up.bin"))  # stderr is a pipe: no terminal
    assert r.returncode == 0, r.stderr
    lines = r.stderr.splitlines()
    assert len(lines) == 1, r.stderr
    m = RESULT_LINE.match(lines[0])
    assert m and m["name"] == "up.bin" and m["size"] == "3.0 MiB", lines[0]
    r = drsftp("get", server.url("up.bin"), str(tmp_path / "down.bin"), "--json", str(tmp_path / "r.json"))
    assert r.returncode == 0, r.stderr
    assert len(r.stderr.splitlines()) == 1 and RESULT_LINE.match(r.stderr.strip()), r.stderr
    assert "DRS with peer" in r.stderr and r.stdout == ""
    assert sha256_file(tmp_path / "down.bin") == sha256_file(src)
    report = json.loads((tmp_path / "r.json").read_text())
    assert report["schema"] == SCHEMA and report["bytes"] == 3 << 20 and report["direction"] == "get"
    assert TransferResult.from_dict(report).summary_line() == r.stderr.strip()


def test_quiet_prints_nothing_on_success(server, tmp_path):
    src = make_file(tmp_path / "q.bin", 1 << 20, seed=22)
    for args in (("put", str(src), server.url("q.bin"), "-q"),
                 ("get", server.url("q.bin"), str(tmp_path / "q2.bin"), "--quiet", "--progress", "always")):
        r = drsftp(*args)
        assert r.returncode == 0 and r.stderr == "" and r.stdout == "", (args, r.stderr)
    assert sha256_file(tmp_path / "q2.bin") == sha256_file(src)


def test_an_unwritable_destination_is_one_plain_sentence(server, tmp_path):
    make_file(os.path.join(server.root, "big.bin"), 1 << 20, seed=23)
    blocker = tmp_path / "afile"
    blocker.write_text("a regular file, so nothing can be created under it (root or not)")
    dest = blocker / "big.bin"
    r = drsftp("get", server.url("big.bin"), str(dest), "-q")
    assert r.returncode == 1
    assert r.stderr.strip() == f"drsftp: error: cannot write {dest}: not a directory", r.stderr
    r = drsftp("get", server.url("big.bin"), str(tmp_path / "d.bin"), "--json", str(blocker / "r.json"))
    assert r.returncode == 1
    assert r.stderr.splitlines()[-1] == f"drsftp: error: cannot write {blocker / 'r.json'}: not a directory"
    assert "Errno" not in r.stderr and "Traceback" not in r.stderr


def test_result_record_round_trips_and_refuses_newer_schemas():
    r = TransferResult(direction="put", path="/d/big.bin", bytes=512 << 20, seconds=13.2, tuning="drs(cap=1)",
                       drs_peer=True, drs_replies=40, rtt_avg_ms=100.4)
    r.update(kernel_owns="rcvbuf", first_block_s=0.5)  # a field, and a figure without one
    assert r.summary_line() == "big.bin: 512.0 MiB in 13.2 s, 325 Mbit/s, RTT 100 ms, DRS with peer"
    d = json.loads(json.dumps(r.to_dict()))
    assert d["schema"] == SCHEMA and d["first_block_s"] == 0.5 and d["mbps"] == round(r.mbps, 3)
    back = TransferResult.from_dict(d)
    assert back == r
    d["schema"] = SCHEMA + 1
    try:
        TransferResult.from_dict(d)
    except ValueError as exc:
        assert "newer" in str(exc)
    else:
        raise AssertionError("a newer schema must not read")
