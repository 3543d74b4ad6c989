"""MODE E data connections as the server's side of an emulated link
counts them: its namespace's TCP counters (RFC 4022 tcpActiveOpens,
tcpPassiveOpens; /proc/net/snmp) say how many connections the server
opened and accepted, whatever the client reports of itself.

- `-P auto` (docs/PARALLEL.md, "-P auto"): each stream the controller
  adds is a connection the server opens (a get: `DRS streams=N`) or
  accepts (a put).  The server's streams run on fixed 16 KiB buffers, and
  the client's put streams too, so one stream carries about its window
  per RTT, the path stays free of a queue, and the transfer outlasts the
  first probe's settling and judgment: the controller adds a stream.
- Cached data channels (docs/DATASETS.md#cached): the files of one
  session ride the streams the server opened (get) or accepted (put) for
  its first file.

Needs root and network namespaces (fails, never skips, without them)."""

import json
import os
import re
import sys

import pytest
from conftest import PASSWORD, USER, make_file, running_server, sha256_file
from test_parallel_peers import auto_streams

from drsftp.netem.link import Link

pytestmark = pytest.mark.root
MiB = 1 << 20
FILES = 12  # small files over one cached session


@pytest.fixture(autouse=True)
def need_root():
    if os.geteuid() != 0:
        pytest.fail("needs root and network namespaces (CI runs as root)")


@pytest.fixture(scope="module")
def wan(tmp_path_factory):
    """A 40 ms link, drsftp serve on its server side: (link, server, root)."""
    root = tmp_path_factory.mktemp("wan") / "srv"
    root.mkdir()
    with Link(rtt=0.04, rate=200e6) as link, running_server(
            root, "--host", link.server_addr, "--tuning", "fixed:16k", ns_prefix=link.command("server", [])) as srv:
        yield link, srv, root


class Opens:
    """The server side's TCP connections opened (active) and accepted
    (passive) since it was made, and the logins its log recorded."""

    def __init__(self, link, srv):
        self.link, self.srv = link, srv
        self.start = self._read()

    def _read(self):
        lines = self.link.run("server", ["cat", "/proc/net/snmp"], timeout=10).stdout.splitlines()
        names, values = (line.split()[1:] for line in lines if line.startswith("Tcp:"))
        tcp = dict(zip(names, map(int, values)))
        logins = len(re.findall(r" login .*ok=yes", self.srv.stderr_text()))
        return tcp["ActiveOpens"], tcp["PassiveOpens"], logins

    def since(self):
        """(connections the server opened, data connections it accepted)."""
        active, passive, logins = (b - a for a, b in zip(self.start, self._read()))
        return active, passive - logins  # (every login came on a control connection it accepted)


def _drsftp(link, tmp_path, name, *args):
    out = tmp_path / f"{name}.json"
    r = link.run("client", [sys.executable, "-m", "drsftp", *args, "--json", str(out), "--progress", "never"],
                 timeout=300)
    assert r.returncode == 0, r.stderr
    return json.loads(out.read_text())


def test_p_auto_streams_are_connections_the_server_saw(wan, tmp_path):
    link, srv, root = wan
    src = make_file(root / "auto.bin", 48 * MiB, seed=40)
    url = f"ftp://{USER}:{PASSWORD}@{link.server_addr}:{srv.port}/"

    opens = Opens(link, srv)
    g = _drsftp(link, tmp_path, "g", "get", "-P", "auto", url + "auto.bin", str(tmp_path / "auto.bin"))
    # the server connected every stream: the first ones at RETR, one per
    # ADD (DRS streams=N) after; a probe was made while the path was free
    assert opens.since() == (auto_streams(g), 0) and g["streams"] == auto_streams(g) > g["streams_start"], _auto(g)
    assert sha256_file(tmp_path / "auto.bin") == sha256_file(src)

    up = make_file(tmp_path / "up.bin", 24 * MiB, seed=41)  # (the server's 16 KiB window: slower this way)
    opens = Opens(link, srv)
    p = _drsftp(link, tmp_path, "p", "put", "-P", "auto", "--tuning", "fixed:16k", str(up), url + "up.bin")
    assert opens.since() == (0, auto_streams(p)) and p["streams"] == auto_streams(p) > p["streams_start"], _auto(p)
    assert sha256_file(root / "up.bin") == sha256_file(up)


def _auto(record):
    return {k: record[k] for k in ("streams", "streams_start", "stream_changes")}


def test_cached_files_ride_the_streams_of_the_first(wan, tmp_path):
    link, srv, root = wan
    (root / "many").mkdir()
    names = [f"f{i:02}.bin" for i in range(FILES)]
    for i, n in enumerate(names):
        make_file(root / "many" / n, 64 * 1024 + i, seed=50 + i)
    url = f"ftp://{USER}:{PASSWORD}@{link.server_addr}:{srv.port}/"
    out = tmp_path / "out"

    opens = Opens(link, srv)
    g = _drsftp(link, tmp_path, "g", "get", "-c", "1", "-P", "2", *(url + "many/" + n for n in names), f"{out}/")
    assert opens.since() == (2, 0)  # two streams for all the files: the server connected no more
    _one_session_reused(g, FILES)

    opens = Opens(link, srv)
    p = _drsftp(link, tmp_path, "p", "put", "-c", "1", "-P", "2", *(str(out / n) for n in names), url + "up/")
    assert opens.since() == (0, 2)  # two streams accepted for all the files
    _one_session_reused(p, FILES)
    for n in names:
        assert (root / "up" / n).read_bytes() == (root / "many" / n).read_bytes() == (out / n).read_bytes()


def _one_session_reused(record, files):
    """Every file ok on one cached session: the first opened its streams,
    every later one reused them (``cached``)."""
    ok = [x for x in record["files"] if x["status"] == "ok"]
    assert len(ok) == files and all(x["streams"] == 2 for x in ok)
    assert sorted(x["cached"] for x in ok) == [False] + [True] * (files - 1), [x["cached"] for x in ok]
