"""`drsftp bench compete` for real: a tiny competition over an emulated
link, its results file, and nothing left behind.  Needs root and network
namespaces; CI runs as root, so it fails, never skips, where that is missing."""

import json
import os

import pytest

from drsftp.bench.compete import run as competerun
from drsftp.cli import main
from drsftp.netem import namespaces as nsmod
from drsftp.netem.link import Link

pytestmark = pytest.mark.root


@pytest.fixture(autouse=True)
def need_root():
    if os.geteuid() != 0:
        pytest.fail("needs root and network namespaces (CI runs as root)")


class _Recorded(Link):
    """The bench's link, remembering its name and every process started on it."""

    made: list = []  # noqa: RUF012 (filled by the one test)

    def __init__(self, *args, **kw):
        super().__init__(*args, **kw)
        self.pids = []
        _Recorded.made.append(self)

    def popen(self, side, argv, **kw):
        proc = super().popen(side, argv, **kw)
        self.pids.append(proc.pid)
        return proc


def _alive(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(")")[-1].split()[0] != "Z"
    except OSError:
        return False


def test_a_tiny_competition_reports_every_flow_and_leaves_nothing(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(competerun, "Link", _Recorded)
    out = tmp_path / "out"
    assert main(["bench", "compete", "2*stock-64k+1*drs+iperf3:64k@1s", "--rates", "20mbit", "--rtts", "20ms",
                 "--duration", "4", "--out", str(out)]) == 0
    name = "compete-2xstock-64k+1xdrs+iperf3_64k_at_1s-20mbit-20ms-q64"
    assert sorted(os.listdir(out)) == [name + "-goodput.png", name + ".json"]  # the clients' files are gone
    data = json.loads((out / (name + ".json")).read_text())
    flows = data["flows"]
    assert [f["label"] for f in flows] == ["stock-64k#1", "stock-64k#2", "drs#1", "iperf3:64k#1"]
    for f in flows:
        assert f["error"] is None and f["bytes"] > 0 and f["mbps"] > 0, f["label"]
        assert len(f["per_second"]) >= 4 and sum(x > 0 for x in f["per_second"]) >= 3, f["label"]
        assert len(f["samples"]) >= 4 and f["end_s"] - f["start_s"] <= 4 + competerun.GRACE
    assert flows[3]["start_s"] >= 1.0 and flows[3]["per_second"][0] == 0.0  # started a second later
    # 64 KiB set before the handshake, doubled by the kernel: the data socket's, at both ends
    # (iperf3 -w: its client's and, with -R, its server's)
    for f in (*flows[:2], flows[3]):
        assert f["rcvbuf_peak"] == f["sndbuf_peak"] == 131072, f["label"]
    s = data["summary"]
    assert 0 < s["link_use"] <= 1.05
    assert [k["kind"] for k in s["kinds"]] == ["stock-64k", "drs", "iperf3:64k"]
    assert all(0 <= k["jain"] <= 1 for k in s["kinds"])
    assert "| stock-64k | 2 |" in capsys.readouterr().out
    link = _Recorded.made[-1]
    assert len(link.pids) == 7  # three servers (fixed:64k, drs, iperf3) and four clients
    assert not any(_alive(pid) for pid in link.pids)
    names = nsmod.Names(link.name)
    assert not {names.ns("client"), names.ns("server")} & set(nsmod.list_namespaces())
