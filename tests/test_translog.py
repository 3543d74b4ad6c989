"""The server's transfer log (drsftp/server/ops/translog.py; docs/DEPLOY.md,
"The transfer log"): exactly one ``transfer`` line per transfer on every
data path, each with its direction, bytes, streams and drs_peer as the
client saw them (its --json record and its result line), one for a failed
or incomplete transfer, and one ``login`` line per refused login.  Real
transfers against a real `drsftp serve` on 127.0.0.1; missing peer
programs (globus-url-copy) fail the test."""

from __future__ import annotations

import asyncio
import ftplib
import json
import re
import socket
import ssl

import pytest
from conftest import (
    PASSWORD,
    PY,
    USER,
    ServerProcess,
    drsftp,
    ftp_session,
    make_file,
    running_server,
    sha256_file,
    start_stalled_retr,
    wait_until,
)
from dataset_util import assert_same_tree, job_records, make_tree
from test_eblock_server import Ctl, block, guc, put_mode_e, stream
from test_interop_peers import _lftp
from test_tls import certs  # noqa: F401 (a fixture)

from drsftp.client.streams import parallel
from drsftp.client.transfer.getput import TransferOptions
from drsftp.ftp.eblock import Desc, header
from drsftp.ftp.url import parse_url
from drsftp.server.ops import translog

MiB = 1 << 20
SIZE = 12 * MiB + 4321  # not a multiple of a block or a range


def _records(log_file, event):
    with open(log_file) as f:
        recs = [json.loads(line) for line in f if line.strip()]
    return [r for r in recs if r["event"] == event]


def _logged(root, log_file, *extra, cmd=None):
    """`drsftp serve` writing its JSON log to ``log_file``."""
    if cmd is not None:
        return ServerProcess(root, cmd=[*cmd, "--log-file", str(log_file), "--log-format", "json", *extra])
    return running_server(root, "--log-file", str(log_file), "--log-format", "json", *extra)


def _client(*args):
    """drsftp get/put with --json: (its record, its result line)."""
    r = drsftp(*args, "--progress", "never", timeout=180)
    assert r.returncode == 0, r.stderr
    return r.stderr.strip().splitlines()[-1]


def _json(path):
    with open(path) as f:
        return json.load(f)


def assert_views_agree(line, record, result_line=None):
    """The server's line and the client's record (and result line) say
    the same of one transfer: direction, bytes, streams, and whether the
    server sent DRS reports during it (drs_peer)."""
    assert line["direction"] == record["direction"] and line["bytes"] == record["bytes"], (line, record)
    assert line["streams"] == record["streams"], (line, record)
    assert line["drs_peer"] is record["drs_peer"] is (record["drs_replies"] > 0), (line, record)
    assert line["complete"] is True, line
    # the rate is the bytes over the seconds on the line (none for a file in under half a millisecond)
    assert line["rate_bps"] == (round(line["bytes"] * 8 / line["seconds"]) if line["seconds"] else None), line
    if result_line is not None:
        assert ("DRS with peer" in result_line) is line["drs_peer"], result_line
        assert ("DRS at this end only" in result_line) is not line["drs_peer"], result_line
        assert (f"{line['streams']} streams" in result_line) is (line["streams"] > 1), result_line


def _one_line(log_file, path, timeout=15.0):
    """The one transfer line of ``path``, once it is written."""
    assert wait_until(lambda: any(r["path"] == path for r in _records(log_file, "transfer")), timeout)
    lines = [r for r in _records(log_file, "transfer") if r["path"] == path]
    assert len(lines) == 1, lines
    return lines[0]


# -- every data path: one line, as the client saw it ------------------------------------------


def test_stream_mode_get_and_put_one_line_each(tmp_path):
    root = tmp_path / "srv"
    root.mkdir()
    make_file(root / "a.bin", 32 * MiB, seed=1)
    log_file = tmp_path / "t.log"
    with _logged(root, log_file) as srv:
        got = tmp_path / "got.bin"
        say_get = _client("get", "--json", str(tmp_path / "g.json"), srv.url("a.bin"), str(got))
        say_put = _client("put", "--json", str(tmp_path / "p.json"), str(got), srv.url("b.bin"))
    lines = _records(log_file, "transfer")
    assert [(r["direction"], r["path"]) for r in lines] == [("get", "/a.bin"), ("put", "/b.bin")]
    g, p = _json(tmp_path / "g.json"), _json(tmp_path / "p.json")
    assert g["streams"] == p["streams"] == 1
    assert_views_agree(lines[0], g, say_get)
    assert_views_agree(lines[1], p, say_put)
    assert lines[0]["drs_peer"] is True  # 32 MiB: drsftp exchanged DRS while it ran
    assert sha256_file(root / "b.bin") == sha256_file(root / "a.bin")


def test_ranged_get_from_stream_mode_sessions_is_one_line(tmp_path, monkeypatch):
    """`get -P 4` against a server without MODE E: four sessions on REST
    ranges (drsftp.client.streams.ranged), one download, one line when the last
    session ends: the file's bytes once, four streams."""
    root = tmp_path / "srv"
    root.mkdir()
    make_file(root / "r.bin", SIZE, seed=2)
    log_file = tmp_path / "t.log"
    monkeypatch.setattr(parallel, "extended_block", lambda ctl: False)  # a server without PARALLEL
    with _logged(root, log_file) as srv:
        out = tmp_path / "r.out"
        result = asyncio.run(parallel.get(parse_url(srv.url("r.bin")), str(out), TransferOptions(progress=False), 4))
        line = _one_line(log_file, "/r.bin")
    assert sha256_file(out) == sha256_file(root / "r.bin")
    record = result.to_dict()
    assert record["mode"] == "ranged" and record["streams"] == 4, record
    assert_views_agree(line, record, result.summary_line())
    assert line["bytes"] == SIZE and line["streams"] == 4


def test_lftp_pget_is_one_line(tmp_path):
    """lftp's pget: one connection per range, each a REST + RETR cut at its
    range's end; one download, one line."""
    root, local = tmp_path / "srv", tmp_path / "local"
    root.mkdir()
    local.mkdir()
    make_file(root / "f.bin", 6 * MiB, seed=8)
    log_file = tmp_path / "t.log"
    # 8 KiB buffers at the server: the first connection must not finish the
    # file before pget opens the others (test_interop_peers)
    with _logged(root, log_file, "--tuning", "fixed:8k") as srv:
        dialogue = _lftp(srv.port, local, "set pget:min-chunk-size 512k; pget -n 4 f.bin -o p.bin")
        line = _one_line(log_file, "/f.bin")
    assert sha256_file(local / "p.bin") == sha256_file(root / "f.bin")
    retrs = len(re.findall(r"---> RETR f.bin", dialogue))
    assert retrs >= 3, dialogue[-2000:]
    assert (line["direction"], line["bytes"], line["streams"], line["drs_peer"], line["complete"]) == (
        "get", 6 * MiB, retrs, False, True)


@pytest.mark.parametrize("tls", [False, True])
def test_mode_e_get_put_and_put_auto_one_line_each(tmp_path, certs, tls):  # noqa: F811 (the imported fixture)
    root = tmp_path / "srv"
    root.mkdir()
    src = make_file(tmp_path / "src.bin", SIZE, seed=3)
    log_file = tmp_path / "t.log"
    opts = ("--tls", "--ca-file", str(certs.ca)) if tls else ()
    extra = ("--tls-cert", str(certs.good), "--require-tls") if tls else ()
    with _logged(root, log_file, *extra) as srv:
        said = [
            _client("put", "-P", "4", *opts, "--json", str(tmp_path / "0.json"), str(src), srv.url("p4.bin")),
            _client("put", "-P", "auto", *opts, "--json", str(tmp_path / "1.json"), str(src), srv.url("pa.bin")),
            _client("get", "-P", "4", *opts, "--json", str(tmp_path / "2.json"), srv.url("p4.bin"),
                    str(tmp_path / "g4.out")),
        ]
    lines = _records(log_file, "transfer")
    assert [(r["direction"], r["path"]) for r in lines] == [("put", "/p4.bin"), ("put", "/pa.bin"),
                                                            ("get", "/p4.bin")]
    for i, line in enumerate(lines):
        record = _json(tmp_path / f"{i}.json")
        assert record["mode"] == "E", record  # not the single-stream fallback, not ranged sessions
        assert_views_agree(line, record, said[i])
        assert line["bytes"] == SIZE and line["tls"] is tls
    assert lines[0]["streams"] == lines[2]["streams"] == 4
    assert sha256_file(tmp_path / "g4.out") == sha256_file(src)
    assert all(r["tls"] is tls for r in _records(log_file, "login"))


def test_trees_on_cached_streams_one_line_per_file(tmp_path):
    """`put -r` and `get -r` on cached MODE E sessions (2 sessions x 2
    streams): one line per file, its streams and drs_peer as the job's
    record of that file says."""
    src = make_tree(tmp_path / "src", depth=3, files=6)
    root = tmp_path / "srv"
    root.mkdir()
    log_file = tmp_path / "t.log"
    with _logged(root, log_file) as srv:
        base = f"ftp://{USER}:{PASSWORD}@127.0.0.1:{srv.port}"
        r = drsftp("put", "-r", "-c", "2", "-P", "2", "--json", str(tmp_path / "put.json"), f"{src}/",
                   f"{base}/up/", "--progress", "never", timeout=180)
        assert r.returncode == 0, r.stderr
        r = drsftp("get", "-r", "-c", "2", "-P", "2", "--json", str(tmp_path / "get.json"), f"{base}/up/",
                   f"{tmp_path / 'back'}/", "--progress", "never", timeout=180)
        assert r.returncode == 0, r.stderr
    assert_same_tree(src, tmp_path / "back")
    lines = _records(log_file, "transfer")
    for direction in ("put", "get"):
        files = [f for f in job_records(tmp_path / f"{direction}.json")["files"] if "direction" in f]
        # every file on its session's 2 streams; each session's first file opened them (cached: false)
        assert files and all(f["streams"] == 2 for f in files), files[:1]
        assert 1 <= sum(not f["cached"] for f in files) <= 2, [f["cached"] for f in files]
        mine = {r["path"]: r for r in lines if r["direction"] == direction}
        assert len(mine) == len(files) == sum(r["direction"] == direction for r in lines)  # one line per file
        for f in files:
            assert_views_agree(mine[f["remote"]], f)


def test_globus_url_copy_parallel_get_and_put_one_line_each(tmp_path):
    root = tmp_path / "srv"
    root.mkdir()
    make_file(root / "g.bin", SIZE, seed=4)
    out = tmp_path / "g.out"
    log_file = tmp_path / "t.log"
    with _logged(root, log_file) as srv:
        url = f"ftp://{USER}:{PASSWORD}@127.0.0.1:{srv.port}"
        r = guc("-p", "4", f"{url}/g.bin", f"file://{out}")
        assert r.returncode == 0, r.stderr
        r = guc("-p", "4", f"file://{out}", f"{url}/up.bin")
        assert r.returncode == 0, r.stderr
    lines = _records(log_file, "transfer")
    assert [(r["direction"], r["path"], r["bytes"], r["streams"], r["drs_peer"], r["complete"]) for r in lines] == [
        ("get", "/g.bin", SIZE, 4, False, True), ("put", "/up.bin", SIZE, 4, False, True)]
    assert sha256_file(root / "up.bin") == sha256_file(root / "g.bin")


def test_drs_peer_counts_the_reports_of_that_transfer_only(tmp_path):
    """A 200 DRS during the first RETR makes its line drs_peer=yes; the
    second RETR of the session, with none (a DRS after it gets 425), says
    no."""
    root = tmp_path / "srv"
    root.mkdir()
    make_file(root / "a.bin", 8 * MiB, seed=9)
    log_file = tmp_path / "t.log"
    with _logged(root, log_file) as srv:
        ftp = ftp_session(srv.port)
        data, _ = start_stalled_retr(ftp, "a.bin")
        assert ftp.sendcmd("DRS rtt_us=1000 rate=1000").startswith("200 DRS")
        while data.recv(1 << 20):
            pass
        data.close()
        assert ftp.voidresp().startswith("226")
        ftp.retrbinary("RETR a.bin", lambda b: None)
        with pytest.raises(ftplib.error_temp, match="425 DRS no transfer running"):
            ftp.sendcmd("DRS rtt_us=1000")
        ftp.quit()
    lines = _records(log_file, "transfer")
    assert [(r["path"], r["bytes"], r["drs_peer"]) for r in lines] == [("/a.bin", 8 * MiB, True),
                                                                       ("/a.bin", 8 * MiB, False)]


# -- failed and incomplete transfers: a line each, complete=no ------------------------------


def test_a_stream_mode_get_aborted_by_the_client_has_its_line(tmp_path):
    """ABOR after 64 KiB: a download that stopped short (which other
    sessions could have continued, as byte ranges): its line comes when
    the session ends."""
    root = tmp_path / "srv"
    root.mkdir()
    make_file(root / "a.bin", 64 * MiB, seed=5)
    log_file = tmp_path / "t.log"
    with _logged(root, log_file) as srv:
        ftp = ftp_session(srv.port)
        data, _ = start_stalled_retr(ftp, "a.bin")
        ftp.putcmd("ABOR")
        assert [ftp.getline()[:3], ftp.getline()[:3]] == ["426", "226"]  # the RETR's reply, then ABOR's
        data.close()
        assert _records(log_file, "transfer") == []  # other sessions could carry the rest
        ftp.quit()
        line = _one_line(log_file, "/a.bin")
    assert (line["direction"], line["complete"], line["streams"]) == ("get", False, 1)
    assert 0 < line["bytes"] < 64 * MiB


def test_a_transfer_whose_data_connection_never_comes_has_its_line(tmp_path):
    root = tmp_path / "srv"
    root.mkdir()
    make_file(root / "a.bin", MiB, seed=6)
    log_file = tmp_path / "t.log"
    with _logged(root, log_file) as srv:
        ftp = ftp_session(srv.port)
        ftp.makepasv()  # (nobody connects)
        ftp.putcmd("RETR a.bin")
        assert ftp.getresp().startswith("150")
        ftp.putcmd("ABOR")
        assert [ftp.getline()[:3], ftp.getline()[:3]] == ["426", "226"]
        line = _one_line(log_file, "/a.bin")  # at once, the session still open
        ftp.quit()
    assert (line["direction"], line["bytes"], line["complete"]) == ("get", 0, False)


def test_a_stream_mode_upload_short_of_its_allo_has_its_line(tmp_path):
    root = tmp_path / "srv"
    root.mkdir()
    log_file = tmp_path / "t.log"
    with _logged(root, log_file) as srv:
        ftp = ftp_session(srv.port)
        ftp.voidcmd("ALLO 2000")
        host, port = ftp.makepasv()
        ftp.putcmd("STOR short.bin")
        data = socket.create_connection((host, port))
        assert ftp.getresp().startswith("150")
        data.sendall(b"x" * 1000)
        data.close()
        with pytest.raises(ftplib.error_temp, match="451 Upload incomplete"):
            ftp.voidresp()
        line = _one_line(log_file, "/short.bin")
        ftp.quit()
    assert (line["direction"], line["bytes"], line["streams"], line["complete"]) == ("put", 1000, 1, False)


def test_failed_and_incomplete_mode_e_uploads_have_their_lines(tmp_path):
    """A stream closed before its EOD (426) and blocks short of the ALLO
    size (451): each STOR's line says complete=no, with what came."""
    root = tmp_path / "srv"
    root.mkdir()
    log_file = tmp_path / "t.log"
    with _logged(root, log_file) as srv:
        ctl = Ctl(srv.port)
        s = stream(put_mode_e(ctl, "cut.bin", allo=1000))
        s.sendall(block(0, b"z" * 500))
        s.close()
        code, text, _ = ctl.final()
        assert code == "426", text
        ctl.close()
        ctl = Ctl(srv.port)
        s = stream(put_mode_e(ctl, "gap.bin", allo=300))
        s.sendall(block(0, b"a" * 100) + block(200, b"c" * 100) + header(Desc.EOD | Desc.EOF, 0, 1))
        code, text, _ = ctl.final()
        assert code == "451", text
        ctl.close()
        cut, gap = _one_line(log_file, "/cut.bin"), _one_line(log_file, "/gap.bin")
    assert (cut["direction"], cut["bytes"], cut["streams"], cut["complete"]) == ("put", 500, 1, False)
    assert (gap["direction"], gap["bytes"], gap["streams"], gap["complete"]) == ("put", 200, 1, False)


# -- refused logins: a line each ---------------------------------------------------------------


def test_each_refused_login_has_one_line(tmp_path, certs):  # noqa: F811 (the imported fixture)
    """A wrong password and an unknown user (after AUTH TLS), and a
    clear-text USER under --require-tls (550): one ``login ok=no`` line
    each, with its reason; the good login one ``ok=yes``."""
    root = tmp_path / "srv"
    root.mkdir()
    log_file = tmp_path / "t.log"
    cmd = [PY, "-m", "drsftp", "serve", "--root", str(root), "--port", "0", "--user", USER, "--password", PASSWORD,
           "--tls-cert", str(certs.good), "--require-tls"]
    srv = _logged(root, log_file, cmd=cmd)
    ctx = ssl.create_default_context(cafile=str(certs.ca))
    try:
        for user, password in ((USER, "wrong"), ("nobody", PASSWORD)):
            ftps = ftplib.FTP_TLS(context=ctx)
            ftps.connect("127.0.0.1", srv.port, timeout=30)
            with pytest.raises(ftplib.error_perm, match="530"):
                ftps.login(user, password)
            ftps.close()
        plain = ftplib.FTP()
        plain.connect("127.0.0.1", srv.port, timeout=30)
        with pytest.raises(ftplib.error_perm, match="550 SSL/TLS required"):
            plain.login("mallory", PASSWORD)
        plain.close()
        ftps = ftplib.FTP_TLS(context=ctx)
        ftps.connect("127.0.0.1", srv.port, timeout=30)
        ftps.login(USER, PASSWORD)
        ftps.quit()
        assert wait_until(lambda: len(_records(log_file, "login")) >= 4, 15)
    finally:
        srv.stop()
    logins = sorted((r["user"], r["ok"], r.get("reason"), r["tls"]) for r in _records(log_file, "login"))
    assert logins == [("mallory", False, "tls_required", False), ("nobody", False, "credentials", True),
                      (USER, False, "credentials", True), (USER, True, None, True)]


# -- the ranged downloads' bookkeeping (sans-IO) -------------------------------------------


def _part(session, offset, nbytes, size=1000, began=0.0, drs=False):
    return translog.RangeRetr(session, f"192.0.2.1:{session}", offset, nbytes, size, began, began + 1.0, drs, False)


def test_parts_of_one_file_from_several_sessions_are_one_download():
    rd = translog.RangedDownloads()
    key = ("192.0.2.1", "u", "/f.bin")
    for s in (1, 2, 3):
        assert rd.started(key, s) == []
    # ranges 0-400 (cut past its end: sent to 450), 400-700, 700-1000
    for s, offset, nbytes in ((2, 400, 300), (1, 0, 450), (3, 700, 300)):
        whole, ended = rd.ended(key, _part(s, offset, nbytes, began=s, drs=s == 3))
        assert not whole and ended == []
    assert rd.left(1) == [] and rd.left(3) == []  # control connection 2 still holds its part
    [(k, parts)] = rd.left(2)
    rec = translog.ranged_record(10.0, k, parts)
    assert (rec["path"], rec["bytes"], rec["streams"], rec["drs_peer"], rec["complete"]) == ("/f.bin", 1000, 3,
                                                                                             True, True)
    assert rec["peer"] == "192.0.2.1:1" and rec["seconds"] == 3.0  # the first part's start to the last's end
    assert rd.left(2) == []  # ended once


def test_a_whole_file_is_its_own_transfer_and_a_gap_is_incomplete():
    rd = translog.RangedDownloads()
    key = ("192.0.2.1", "u", "/f.bin")
    rd.started(key, 1)
    assert rd.ended(key, _part(1, 0, 1000)) == (True, [])  # whole: logged at once, nothing waits
    assert rd.left(1) == []
    rd.started(key, 1)
    rd.started(key, 2)
    rd.ended(key, _part(1, 0, 300))
    rd.ended(key, _part(2, 600, 400))
    rd.left(1)
    # control connection 2 turns to another file: the download ends, 300-600 never sent
    [(k, parts)] = rd.started(("192.0.2.1", "u", "/other.bin"), 2)
    rec = translog.ranged_record(10.0, k, parts)
    assert (rec["bytes"], rec["streams"], rec["complete"]) == (700, 2, False)


def test_a_download_of_endless_parts_is_logged_every_max_parts():
    rd = translog.RangedDownloads()
    key = ("192.0.2.1", "u", "/f.bin")
    rd.started(key, 1)
    ended = []
    for i in range(translog.MAX_PARTS + 1):
        ended += rd.ended(key, _part(1, i % 999 + 1, 1))[1]
    [(_, parts)] = ended
    assert len(parts) == translog.MAX_PARTS
    [(_, rest)] = rd.left(1)
    assert len(rest) == 1


def test_a_part_still_running_holds_the_download_open():
    rd = translog.RangedDownloads()
    key = ("192.0.2.1", "u", "/f.bin")
    rd.started(key, 1)
    rd.started(key, 2)
    rd.ended(key, _part(2, 500, 500))
    assert rd.left(2) == []  # control connection 1's RETR has not ended
    whole, ended = rd.ended(key, _part(1, 0, 520))
    assert not whole and ended == []  # control connection 1 still open
    [(_, parts)] = rd.left(1)
    assert translog.ranged_record(0.0, key, parts)["complete"] is True


def test_log_lines_have_the_streams_and_the_refusal_reason():
    rec = translog.transfer_record(0.0, "192.0.2.1:5", "u", "get", "/f", 10, 0.5, 4, True, False, True)
    assert translog.format_text(rec).endswith(
        " bytes=10 seconds=0.5 rate=0.0Mbit/s streams=4 drs_peer=yes complete=no tls=yes")
    refused = translog.login_record(0.0, "192.0.2.1:5", "u", False, False, translog.TLS_REQUIRED)
    assert translog.format_text(refused).endswith(" user=u ok=no tls=no reason=tls_required")
    assert "reason" not in translog.login_record(0.0, "192.0.2.1:5", "u", True, True)


def test_lines_go_to_the_configured_handler_and_to_any_handler_added(tmp_path):
    """A record goes straight to configure()'s handler as a line; with
    another handler on the logger both get it (logging's way), the same
    line."""
    import logging

    log_file = tmp_path / "transfer.log"
    saved = translog.log.handlers[:], translog.log.level, translog.log.propagate
    records: list[logging.LogRecord] = []
    extra = logging.Handler()
    extra.emit = records.append  # type: ignore[method-assign]
    try:
        translog.configure(str(log_file))
        rec = translog.transfer_record(0.0, "192.0.2.1:5", "u", "put", "/a b", 3, 0.25, 1, False, True, False)
        translog.emit(rec)
        translog.log.addHandler(extra)
        translog.emit(rec)
    finally:
        for h in translog.log.handlers:
            if h is not extra:
                logging.getLogger().removeHandler(h)
                h.close()
        translog.log.handlers[:], translog.log.level, translog.log.propagate = saved
    lines = log_file.read_text().splitlines()
    assert lines == [translog.format_text(rec)] * 2 and 'path="/a b"' in lines[0]
    assert [r.drsftp_record for r in records] == [rec]  # type: ignore[attr-defined]
