"""The command line as a newcomer meets it: help on every option, one result
line per transfer (none with -q), errors as one plain sentence, and the
bench's closing sentence on what won."""

from __future__ import annotations

import argparse
import itertools
import json
import os
import re
import shlex
import subprocess
import sys

import pytest
from conftest import drsftp, make_file, sha256_file

from drsftp.bench.common import tunings as T
from drsftp.bench.compare.report import legend, path_tables, print_table, verdict
from drsftp.cli import build_parser
from drsftp.client.result import SCHEMA, TransferResult
from drsftp.tuning import names


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
    # --json's file is checked before the transfer
    r = drsftp("get", server.url("big.bin"), str(tmp_path / "d.bin"), "--json", str(blocker / "r.json"))
    assert r.returncode == 2 and not os.path.exists(tmp_path / "d.bin")
    assert r.stderr.strip() == f"drsftp: error: cannot write --json {blocker / 'r.json'}: not a directory"
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


def _run(tuning, mbps, rtt=0.1, rep=0, complete=True):
    return {"profile": "default", "rate_bps": 100e6, "rtt_s": rtt, "loss": 0.0, "direction": "get",
            "tuning": tuning, "rep": rep, "mbps": mbps, "complete": complete, "ceiling_mbps": 96.5,
            "peak_rcvbuf": 2_500_000, "rtt_avg_ms": 100.0}


def test_the_bench_ends_with_who_won_and_by_how_much():
    order = list(T.TUNINGS)
    one_path = [_run("stock-64k", 5.0), _run("kernel", 66.0), _run("drs", 69.0), _run("drs", 60.0, rep=1),
                _run("drs", 75.0, rep=2)]
    assert verdict(one_path, order) == "drs moved 13.8x stock-64k and 1.05x kernel autotuning on this path."
    # where kernel is faster on more paths, it is named, with its median ratio over the paths
    two_paths = [_run("kernel", 80.0), _run("drs", 40.0), _run("kernel", 90.0, rtt=0.05),
                 _run("drs", 60.0, rtt=0.05), _run("kernel", 10.0, rtt=0.025), _run("drs", 20.0, rtt=0.025)]
    assert verdict(two_paths, order) == ("kernel was fastest on 2 of 3 paths and moved 1.50x drs"
                                         " (medians over the paths).")
    failed = [dict(_run("drs", 0.0), error="boom")]
    assert verdict(failed, order) == "No run completed, so nothing can be compared."
    assert "nothing to compare" in verdict([_run("drs", 50.0)], order)


def test_the_demo_table_fits_80_columns_and_its_words_are_explained():
    from rich.console import Console

    runs = [_run("stock-64k", 5.0, complete=False), _run("kernel", 66.0), _run("drs", 69.0)]
    (title, header, rows), = path_tables(runs, ["stock-64k", "kernel", "drs"])
    assert title.startswith("get, 100 Mbit/s, RTT 100 ms") and header[:2] == ["tuning", "Mbit/s"]
    assert rows[2][:5] == ["drs", "69.0", "13.8x", "1.05x", "72%"] and rows[0][1] == "5.0*"
    console = Console(width=80, record=True)
    env = {"kernel": "k", "machine": "m", "congestion_control": "cubic", "buffer_force_used": False,
           "buffer_force_available": False, "date": "d",
           "host_sysctls": {"net.core.rmem_max": 1, "net.core.wmem_max": 1, "net.ipv4.tcp_wmem": [1, 2, 3]}}
    print_table(env, runs, ["stock-64k", "kernel", "drs"], console=console, compact=True)
    text = console.export_text()
    assert all(len(line) <= 80 for line in text.splitlines())
    table = text.split("Kernel k")[0]
    assert "drs" in table and "13.8x" in table and "vs kernel" in table  # no cell folded away
    words = " ".join(legend(runs, ["stock-64k", "kernel", "drs"], full=True))
    for term in ("ceiling:", "default profile:", "skmem:", "BDP:", "stock-64k:", "kernel:", "drs:"):
        assert term in words


def test_bench_columns_come_from_the_tuning_registry():
    # every registered strategy but fixed (run at three sizes) and kernel (run as stock programs)
    assert set(T.DRSFTP_TUNINGS) == set(names()) - {"fixed", "kernel"}
    assert set(T.TUNINGS) == set(T.BASELINES) | set(T.DRSFTP_TUNINGS) == set(T.DESCRIPTIONS)
    p = T.plan("drs-closed", direction="get", root="/r", host="h", local="/l", remote="f", out_json="/j",
               path=T.Path(rate=1e8, rtt=0.1), force=False, max_time=5)
    assert p.kind == "drsftp" and p.client[p.client.index("--tuning") + 1] == "drs-closed"


# -- the command line as README and --help describe it (issue: a newcomer on loopback) --------------
REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_global_options_work_after_the_command_too():
    from drsftp.cli import parse_args

    assert parse_args(["serve", "-v", "--root", "r"]).verbose == 1
    assert parse_args(["-v", "serve", "--root", "r", "-vv"]).verbose == 3
    assert parse_args(["get", "ftp://h/f", "--verbose"]).verbose == 1
    assert parse_args(["netem", "-v", "up", "lan", "-v"]).verbose == 2
    assert parse_args(["ls", "ftp://h/"]).verbose == 0
    for path, parser in _parsers(build_parser()):  # every command, nested ones too
        given = {s for action in parser._actions for s in action.option_strings}
        assert {"-v", "--verbose", "--version"} <= given, path


def test_v_after_serve_reaches_the_server_log(tmp_path):
    from conftest import ServerProcess, ftp_session

    srv = ServerProcess(tmp_path, "-vv")  # `drsftp serve --root ... -vv`
    ftp_session(srv.port).quit()  # (the IO loop runs: its closing is logged)
    srv.proc.terminate()
    srv.proc.wait(60)
    text = srv.stderr_text()
    srv.stop()
    assert "[debug]" in text, text  # -vv: pyftpdlib's debug log


def test_the_usage_line_names_every_command(capsys):
    from drsftp.cli import COMMANDS, main

    full = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    assert set(full.choices) == set(COMMANDS)
    for command in (None, "serve", "get", "passwd"):  # the parser built for a light command too
        usage = " ".join(build_parser(command).format_usage().split())
        assert "{" + ",".join(COMMANDS) + "}" in usage, (command, usage)
    with pytest.raises(SystemExit) as done:
        main(["-h", "serve"])  # the top help, though a light command follows
    out = capsys.readouterr().out
    assert done.value.code == 0 and all(f"    {c} " in out for c in COMMANDS), out


@pytest.mark.parametrize("argv,error,hint", [
    (["serve", "--bogus"], "unrecognized arguments: --bogus", "drsftp serve"),
    (["get"], "the following arguments are required: PATH", "drsftp get"),
    (["get", "--timeout", "0", "ftp://127.0.0.1:9/f"], "argument --timeout: want a number of seconds above 0,"
                                                         " not '0'", "drsftp get"),
    (["netem", "up"], "the following arguments are required: name", "drsftp netem up"),
    ([], "give a command: serve, get, put, copy, ls, passwd, netem, bench, datapath, benchreport,"
         " netemcheck", "drsftp"),
    (["serv"], "unknown command 'serv' (commands: serve, get, put, copy, ls, passwd, netem, bench, datapath,"
               " benchreport, netemcheck)", "drsftp"),
])
def test_a_usage_error_is_one_line_and_says_where_to_read_more(argv, error, hint):
    r = drsftp(*argv, timeout=60)
    assert r.returncode == 2 and r.stdout == ""
    assert r.stderr == f"drsftp: error: {error}; see {hint} --help\n", r.stderr


def test_every_numeric_default_is_in_the_help():
    seen = 0
    for path, parser in _parsers(build_parser()):
        for action in parser._actions:
            numeric = isinstance(action.default, (int, float)) and not isinstance(action.default, bool)
            if action.option_strings and numeric and not isinstance(action, argparse._CountAction):
                seen += 1
                assert f"default {action.default:g}" in action.help, (path, action.option_strings, action.help)
    assert seen >= 6


def test_the_P_help_says_tls_runs_extended_block_mode():
    get = dict(_parsers(build_parser()))["drsftp get"]
    text = " ".join(next(a for a in get._actions if "-P" in a.option_strings).help.split())
    assert "extended block mode where the server lists PARALLEL (over TLS too), else" in text, text


def test_passwd_names_the_home_it_writes(tmp_path):
    users = tmp_path / "users"
    r = drsftp("passwd", str(users), "carol", "--password-stdin", input="carol-password\n", timeout=60)
    assert r.returncode == 0 and r.stdout == f"carol written to {users} (home: the server's --root)\n", r
    dave = tmp_path / "dave"
    dave.mkdir()  # (an absolute home must exist: serve refuses one that does not)
    r = drsftp("passwd", str(users), "dave", "--password-stdin", "--home", str(dave), input="dave-password\n",
               timeout=60)
    assert r.returncode == 0 and r.stdout == f"dave written to {users} (home: {dave})\n", r
    homes = dict((line.split(":")[0], line.split(":")[2]) for line in users.read_text().splitlines())
    assert homes == {"carol": ".", "dave": str(dave)}


def _readme_commands(heading: str) -> list[list[str]]:
    """The indented command lines right under a README heading, comments cut."""
    with open(os.path.join(REPO, "README.md")) as f:
        section = f.read().split(f"\n## {heading}\n", 1)[1].lstrip("\n")
    lines = itertools.takewhile(lambda line: line.startswith("    "), section.splitlines())
    return [shlex.split(line.split("#")[0]) for line in lines]


def test_readme_passwords_pass_drsftp_passwd():
    from drsftp.server.ops.users import MIN_PASSWORD

    with open(os.path.join(REPO, "README.md")) as f:
        text = f.read()
    passwords = re.findall(r"--password (\S+)", text) + re.findall(r"ftp://\w+:([^@/\s]+)@", text)
    assert len(passwords) >= 4
    assert all(len(p) >= MIN_PASSWORD for p in passwords), passwords


def test_readme_using_it_runs_as_written_on_loopback(tmp_path):
    from conftest import ServerProcess

    serve, get, get_netrc, put, put_into_dir, get_into_new_dir = _readme_commands("Using it")
    root, work, tmp, home = (tmp_path / d for d in ("srv", "work", "tmp", "home"))
    for d in (root, work, tmp, home):
        d.mkdir()
    src = make_file(root / "big.iso", 1 << 20, seed=26)
    serve = [str(root) if a == "/srv/data" else a for a in serve]
    serve[serve.index("--port") + 1] = "0"
    srv = ServerProcess(root, cmd=[sys.executable, "-m", *serve])
    user, password = serve[serve.index("--user") + 1], serve[serve.index("--password") + 1]
    netrc = home / ".netrc"
    netrc.write_text(f"machine 127.0.0.1 login {user} password {password}\n")
    netrc.chmod(0o600)
    env = {**os.environ, "HOME": str(home)}

    def run(argv):
        argv = [a.replace("host:2121", f"127.0.0.1:{srv.port}").replace("/tmp/", f"{tmp}/") for a in argv]
        return drsftp(*argv[1:], cwd=work, env=env, timeout=120)

    try:
        for argv, dest in ((get, work / "big.iso"), (get_netrc, tmp / "big.iso")):
            r = run(argv)
            assert r.returncode == 0 and sha256_file(dest) == sha256_file(src), (argv, r.stderr)
        with open(os.path.join(REPO, "README.md")) as f:
            assert "a put stores into a directory that exists" in " ".join(f.read().split())
        r = run(put)
        assert r.returncode == 1 and r.stderr.strip() == ("drsftp: error: cannot store /uploads/big.iso:"
                                                          " 550 No such file or directory."), r.stderr
        (root / "uploads").mkdir()
        r = run(put)
        assert r.returncode == 0, r.stderr
        assert sha256_file(root / "uploads" / "big.iso") == sha256_file(src)
        assert json.loads((work / "run.json").read_text())["direction"] == "put"
        os.remove(root / "uploads" / "big.iso")
        r = run(put_into_dir)  # a URL ending in / names the directory: the file keeps its name
        assert r.returncode == 0 and sha256_file(root / "uploads" / "big.iso") == sha256_file(src), r.stderr
        r = run(get_into_new_dir)
        assert r.returncode == 0 and sha256_file(work / "new" / "dir" / "big.iso") == sha256_file(src), r.stderr
    finally:
        srv.stop()


def test_deploy_md_and_serve_help_state_where_0_means_no_limit():
    from drsftp.server.config import RULES

    with open(os.path.join(REPO, "docs", "DEPLOY.md")) as f:
        rows = [line for line in f.read().splitlines() if line.startswith("| `")]
    limits = ("idle_timeout", "data_timeout", "grace", "max_connections", "max_connections_per_ip",
              "max_streams", "max_streams_total")
    checked = set()
    for row in rows:
        for key in set(re.findall(r"`(\w+)`", row.split("|")[1])) & set(limits):
            assert ("0 or more" in row) == (RULES[key](0) is None), row
            checked.add(key)
    assert checked == set(limits)
    serve = dict(_parsers(build_parser()))["drsftp serve"]
    for action in serve._actions:
        key = action.dest
        if key in limits and key != "grace":  # (grace: 0 aborts at once)
            assert ("0: no limit" in action.help) == (RULES[key](0) is None), (key, action.help)
