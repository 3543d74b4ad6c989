"""The field bench: drsftp beside GridFTP and lftp on one emulated link."""

import os
import shutil
import tempfile

import pytest
from conftest import Reached, stop_at_run, usage_exit

from drsftp.bench.common.tunings import Path
from drsftp.bench.field import run as field


def test_workloads_have_the_datasets_issue_shapes():
    big, small, mixed = (field.workload(n) for n in ("big", "small", "mixed"))
    assert big.files == (("big.bin", 512 << 20),) and not big.tree
    assert len(small.files) == 200 and {n for _, n in small.files} == {1 << 20}
    assert mixed.files[0] == ("big.bin", 256 << 20) and len(mixed.files) == 1001
    assert {n for _, n in mixed.files[1:]} == {64 << 10}
    assert field.workload("small", 0.1).bytes == 20 << 20
    deep = field.workload("deep")
    assert deep.bytes == small.bytes and len({os.path.dirname(p) for p, _ in deep.files}) == 40
    with pytest.raises(ValueError, match="unknown workload"):
        field.workload("huge")


def _ctx(wl, tmp_path):
    path = Path(rate=1e9, rtt=0.1)
    src = "/data/big/big.bin" if not wl.tree else "/data/small"
    return field.Ctx("10.201.0.2", src, str(tmp_path / "d"), wl, path, str(tmp_path / "r.json"))


def test_gridftp_columns_use_the_flags_the_issue_names(tmp_path):
    ctx = _ctx(field.workload("big"), tmp_path)
    argv = field.ENTRIES["gridftp-p4"].client(ctx)
    # -tcp-bs 2 x BDP / 4 streams: 1 Gbit/s x 100 ms = 12.5 MB, so 6.25 MB a stream
    assert argv[argv.index("-tcp-bs") + 1] == "6250000" and argv[argv.index("-p") + 1] == "4"
    assert argv[-2] == "ftp://10.201.0.2:2811/data/big/big.bin"
    hand = field.ENTRIES["gridftp-p4-16M"].client(ctx)
    assert hand[hand.index("-tcp-bs") + 1] == "16M"
    tree = field.ENTRIES["gridftp-fast"].client(_ctx(field.workload("small"), tmp_path))
    for flag in ("-r", "-cd", "-fast", "-pp"):
        assert flag in tree
    assert tree[tree.index("-cc") + 1] == "8" and tree[-1].endswith("/")


def test_drsftp_columns_ask_for_streams(tmp_path):
    ctx = _ctx(field.workload("big"), tmp_path)
    assert "-P" not in field.ENTRIES["drsftp"].client(ctx)
    kernel = field.ENTRIES["drsftp-kernel"].client(ctx)
    assert "-P" not in kernel and kernel[kernel.index("--tuning") + 1] == "kernel"
    argv = field.ENTRIES["drsftp-Pauto"].client(ctx)
    assert argv[argv.index("-P") + 1] == "auto" and argv[-2].endswith(":2121/big.bin")
    assert field.entry_names("drsftp, gridftp-p4") == ["drsftp", "gridftp-p4"]
    with pytest.raises(ValueError, match="unknown entries"):
        field.entry_names("drsftp,bbcp")


def test_rclone_columns_use_an_on_the_fly_remote_without_a_password_in_clear(tmp_path):
    one = field.ENTRIES["rclone"].client(_ctx(field.workload("big"), tmp_path))
    assert one[:3] == ["rclone", "--config", ""] and "copyto" in one and one[-1] == str(tmp_path / "d")
    assert one[-2].startswith(":ftp,host=10.201.0.2,port=2121,user=bench,pass=") and one[-2].endswith(":big.bin")
    assert f"pass={field.PASSWORD}:" not in one[-2]  # rclone takes it obscured
    tree = field.ENTRIES["rclone-t8"].client(_ctx(field.workload("small"), tmp_path))
    assert "copy" in tree and tree[tree.index("--transfers") + 1] == "8" and tree[-2].endswith(":small")


def test_table_reports_ratio_ceiling_share_and_memory_in_bdp():
    base = {"workload": "big", "files": 1, "bytes": 512 << 20, "ceiling_mbps": 965.3, "bdp": 12_500_000,
            "complete": True, "peak_rcv_used": 12_500_000}
    rows = [dict(base, entry="gridftp-p4-16M", mbps=600.0, peak_snd_used=25_000_000),
            dict(base, entry="gridftp-p4-16M", mbps=620.0, peak_snd_used=25_000_000),
            dict(base, entry="drsftp-P4", mbps=780.0, data_mbps=850.0, peak_snd_used=37_500_000),
            dict(base, entry="drsftp-P4", mbps=800.0, data_mbps=870.0, peak_snd_used=37_500_000),
            dict(base, entry="lftp-pget4", mbps=0.0, complete=False, error="exit 1: refused")]
    text = field.table(rows)
    # the data phase's 860 Mbit/s is 89% of the 965.3 Mbit/s ceiling
    assert "| drsftp-P4 | 790 [780-800] | 1.30 | 860 | 89% | 3.0 | 1.0 | 2/2 |" in text
    assert "| gridftp-p4-16M | 610 [600-620] | 1.00 | - | - | 2.0 | 1.0 | 2/2 |" in text
    assert "| lftp-pget4 | failed: exit 1: refused |" in text


def _read(path):
    with open(path) as f:
        return f.read()


def test_gridftp_gets_its_own_hosts_file_and_the_hosts_is_untouched(tmp_path):
    class FakeLink:
        server_addr, client_addr = "10.201.0.2", "10.201.0.1"
    before = _read("/etc/hosts")
    argv = field.hosts_wrap(FakeLink(), "client", ["globus-url-copy", "a", "b"], str(tmp_path))
    assert argv[:2] == ["unshare", "-m"] and argv[-3:] == ["globus-url-copy", "a", "b"]
    hosts = _read(tmp_path / "hosts-client")
    assert "10.201.0.1 " in hosts and os.uname().nodename in hosts
    assert _read("/etc/hosts") == before


@pytest.mark.root
def test_gridftp_and_drsftp_run_side_by_side_on_a_link():
    """GridFTP's pair and drsftp on one emulated link: the bench runs the
    real programs and checks every byte arrived (a small, fast link)."""
    # GridFTP's anonymous user (nobody) must reach the files: not under
    # pytest's private tmp_path
    work = tempfile.mkdtemp(prefix="drs-field-", dir="/var/tmp")
    try:
        os.chmod(work, 0o755)
        cfg = field.FieldConfig(path=Path(rate=200e6, rtt=0.01),
                                entries=["drsftp", "gridftp-p4", "lftp-pget4", "rclone"], workloads=["big"],
                                scale=1 / 64, workdir=work, max_time=60, log=lambda s: None)
        results = field.run_field(cfg)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    assert [r["entry"] for r in results] == ["drsftp", "gridftp-p4", "lftp-pget4", "rclone"]
    for r in results:
        assert r["complete"], {k: r.get(k) for k in ("entry", "error", "seconds")}
        assert r["bytes"] == 8 << 20 and r["mbps"] > 0
        # GridFTP opens its 4 at once; lftp's helpers start as the first
        # connection runs, and a short file may end before all are up
        want = {"drsftp": 1, "gridftp-p4": 4, "lftp-pget4": 2, "rclone": 1}[r["entry"]]
        assert r["streams_max"] >= want, {k: r.get(k) for k in ("entry", "streams_max")}


def test_benchreport_prints_the_field_table_from_saved_results(tmp_path):
    import json

    from conftest import drsftp as run_drsftp

    base = {"workload": "big", "files": 1, "bytes": 512 << 20, "ceiling_mbps": 965.3, "bdp": 12_500_000,
            "complete": True, "peak_rcv_used": 0, "peak_snd_used": 12_500_000}
    saved = tmp_path / "field.json"
    saved.write_text(json.dumps({"field": 1, "results": [dict(base, entry="gridftp-p4-16M", mbps=600.0),
                                                         dict(base, entry="drsftp-Pauto", mbps=720.0)]}))
    r = run_drsftp("benchreport", str(saved))
    assert r.returncode == 0, r.stderr
    assert "| drsftp-Pauto | 720 [720-720] | 1.20 | - | - | 1.0 | 0.0 | 1/1 |" in r.stdout


def test_bench_against_the_field_refuses_an_unknown_column_in_one_sentence():
    from conftest import drsftp as run_drsftp

    r = run_drsftp("bench", "field", "--streams", "1,4", "--peers", "bbcp")
    assert r.returncode == 2 and "Traceback" not in r.stderr  # a usage error
    assert "unknown entries bbcp" in r.stderr


@pytest.fixture
def no_run(monkeypatch, tmp_path):
    """A field run, where it would start, raises Reached."""
    return stop_at_run(monkeypatch, tmp_path, (field, "run_field"), (field, "Link"))


@pytest.mark.parametrize("argv,message", [
    # a typo in a later value fails before the first path has run
    (["--rtts", "100ms,1ss"], "--rtts: not a duration: '1ss' (examples: 100ms, 0.5ms, 1s)"),
    (["--rates", "1gbit,10gbt"], "--rates: not a rate: '10gbt' (examples: 100mbit, 1gbit, 0 for unlimited)"),
    (["--losses", "0,2"], "--losses: loss must lie between 0 and 100%, not 200%"),
    (["--rates", "1gbit,0"], "--rates: a bench rate must be above 0 (0 is a link without a ceiling)"),
    (["--rtts", "0"], "against the field the BDP (rate x RTT) must be a byte or more (memory is given in BDPs), "
                      "not 0 at 1 Gbit/s, 0 ms"),
    (["--scale", "nan"], "--scale must be above 0 and at most 1, not nan"),
    (["--scale", "0"], "--scale must be above 0 and at most 1, not 0"),
    (["--datasets", "big,huge"], "--datasets: unknown workload 'huge' (big, small, mixed, deep)"),
    (["--datasets", ","], "--datasets needs at least one value"),
    (["--peers", ""], "--peers needs at least one value"),
    (["--reps", "0"], "--reps must be at least 1"),
    (["--tunings", "drs"], "unrecognized arguments: --tunings drs; see drsftp bench field --help"),
    (["--resume"], "unrecognized arguments: --resume; see drsftp bench field --help"),
])
def test_field_options_are_all_checked_before_the_first_run(argv, message, no_run, capsys):

    assert usage_exit(["bench", "field", "--streams", "1,4", *argv]) == 2
    assert capsys.readouterr().err == f"drsftp: error: {message}\n"
    assert os.listdir(no_run) == []


def test_a_valid_field_run_starts_with_its_first_path(no_run):
    from drsftp.cli import main

    with pytest.raises(Reached) as got:
        main(["bench", "field", "--streams", "1,auto", "--rtts", "25ms,50ms", "--datasets", "big,deep", "--scale",
              "0.25"])
    cfg = got.value.args[0]
    assert cfg.path == Path(rate=1e9, rtt=0.025) and cfg.reps == 3 and cfg.scale == 0.25
    assert cfg.entries == ["drsftp", "drsftp-Pauto", "drsftp-r"] and cfg.workloads == ["big", "deep"]
