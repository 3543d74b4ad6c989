"""MODE E under PROT P: every extended-block stream runs TLS, `drsftp serve`
the TLS server and the client the TLS client whichever side connects (RFC
4217; docs/EBLOCK.md, "TLS on the streams").  `put/get -P N --tls`, their
resume, and `get -r/put -r --tls` on cached sessions, against
`drsftp serve --require-tls` on loopback; a clear-text stream under PROT P
and a data-stream certificate the client does not trust are refused; a
raw reader of the server's streams across a SIGHUP that replaces the
certificate and across PROT changes with streams cached."""

from __future__ import annotations

import asyncio
import ftplib
import json
import os
import re
import select
import shutil
import signal
import socket
import ssl
import threading

from conftest import PASSWORD, USER, ServerProcess, drsftp, make_file, sha256_file, wait_until
from dataset_util import assert_on_reused_streams, assert_same_tree, make_tree
from test_eblock_server import block
from test_serve_config import _log, _serve_config
from test_tls import certs  # noqa: F401 (a fixture)
from test_tls_paths import _json, _run, _serve, streams_add_up, tls_server  # noqa: F401 (tls_server: a fixture)

from drsftp.client.streams import parallel
from drsftp.client.streams.modee import base as modee_base
from drsftp.client.streams.modee import send as blocksend
from drsftp.client.transfer import putresume
from drsftp.client.transfer.getput import TransferOptions
from drsftp.ftp.eblock import BlockDecoder, Data, Desc, ReceiveLedger, header
from drsftp.ftp.url import parse_url

MiB = 1 << 20
SIZE = 24 * MiB + 12345  # not a multiple of any block size


def _replies(log, code):
    """The server's replies with ``code`` (not a figure such as rate=...425)."""
    return re.findall(rf"-> {code} .*", log)


def test_parallel_put_and_get_over_tls_run_mode_e(tmp_path, tls_server):  # noqa: F811 (the imported fixture)
    srv, tls = tls_server
    src = make_file(tmp_path / "src.bin", SIZE, seed=31)
    _run("put", "-P", "4", *tls, "--json", str(tmp_path / "p.json"), str(src), srv.url("up.bin"))
    assert sha256_file(os.path.join(srv.root, "up.bin")) == sha256_file(src)
    p = _json(tmp_path / "p.json")
    assert p["mode"] == "E", p  # not the single-stream fallback
    streams_add_up(p, 4, SIZE)

    out = tmp_path / "got.bin"
    _run("get", "-P", "4", *tls, "--json", str(tmp_path / "g.json"), srv.url("up.bin"), str(out))
    assert sha256_file(out) == sha256_file(src)
    g = _json(tmp_path / "g.json")
    assert g["mode"] == "E", g  # not ranged sessions
    streams_add_up(g, 4, SIZE)
    assert g["drs_peer"] and g["drs_replies"] >= 1

    log = srv.stderr_text()
    # one session each, under PROT P, in MODE E: the put's STOR after EPSV,
    # the get's RETR with four streams the server connected
    assert len(re.findall(r"<- PROT P", log)) == 2, log[-3000:]
    assert len(re.findall(r"<- MODE E", log)) == 2
    assert "<- OPTS RETR Parallelism=4,4,4;" in log and "<- STOR /up.bin" in log and "<- RETR /up.bin" in log
    assert len(_replies(log, 226)) == 2 and "TLS negotiation failed" not in log and not _replies(log, 534)


def test_the_streams_are_tls_checked_as_the_control_connection(tmp_path, tls_server, certs, monkeypatch):  # noqa: F811
    """In-process: each stream of a get is a TLS transport (client side)
    and each stream of a put carries a TLS connection of its own."""
    srv, _ = tls_server
    make_file(os.path.join(srv.root, "f.bin"), 6 * MiB, seed=32)
    got = []
    orig = modee_base.open_tls_stream

    async def recording(sock, factory, tls, host, timeout):
        transport, proto = await orig(sock, factory, tls, host, timeout)
        got.append(transport.get_extra_info("ssl_object"))
        return transport, proto

    monkeypatch.setattr(modee_base, "open_tls_stream", recording)
    opts = TransferOptions(tls=True, ca_file=str(certs.ca), progress=False)
    res = asyncio.run(parallel.get(parse_url(srv.url("f.bin")), str(tmp_path / "f.bin"), opts, 3))
    assert res.extra["mode"] == "E" and len(got) == 3
    assert all(o is not None and o.version() in ("TLSv1.2", "TLSv1.3") for o in got)
    assert all(o.getpeercert()["subjectAltName"] for o in got)  # verified: a peer certificate was checked

    sent = []
    orig_put = blocksend.BlockSender.send_stream

    def put_recording(self, stream):
        sent.append(stream.tls.obj.version() if stream.tls is not None else None)
        return orig_put(self, stream)

    monkeypatch.setattr(blocksend.BlockSender, "send_stream", put_recording)
    res = asyncio.run(parallel.put(str(tmp_path / "f.bin"), parse_url(srv.url("back.bin")), opts, 3))
    assert res.extra["mode"] == "E" and len(sent) == 3 and all(sent)  # every stream in TLS
    assert sha256_file(os.path.join(srv.root, "back.bin")) == sha256_file(tmp_path / "f.bin")


def test_an_interrupted_tls_put_continues_with_the_gaps(tmp_path, tls_server, certs, monkeypatch):  # noqa: F811
    """A put -P 4 --tls stopped mid-way (its sending threads slowed, then
    --max-time): --continue sends only what the server's 111 Range Markers
    did not report, over TLS streams again."""
    srv, tls = tls_server
    state = tmp_path / "state"
    monkeypatch.setenv("XDG_STATE_HOME", str(state))
    src = make_file(tmp_path / "r.bin", 32 * MiB + 7, seed=33)
    url = srv.url("r.bin")
    real_send_all = blocksend.send_all

    def slow_send_all(sock, data, stop, more=False):
        stop.wait(0.5)  # 512 KiB per half second a stream: about 4 MiB/s in all
        real_send_all(sock, data, stop, more)

    monkeypatch.setattr(blocksend, "send_all", slow_send_all)
    opts = TransferOptions(tls=True, ca_file=str(certs.ca), progress=False, max_time=3.5)
    first = asyncio.run(parallel.put(str(src), parse_url(url), opts, 4))
    assert not first.complete
    record = putresume.record_base(str(src), parse_url(url)) + ".ranges"
    with open(record) as f:
        held = sum(b - a for a, b in json.load(f)["ranges"])
    assert 0 < held < os.path.getsize(src)  # the server's markers came over the control connection
    assert not os.path.exists(os.path.join(srv.root, "r.bin"))

    _run("put", "-P", "4", *tls, "--continue", "--json", str(tmp_path / "c.json"), str(src), url,
         env={**os.environ, "XDG_STATE_HOME": str(state)})
    c = _json(tmp_path / "c.json")
    assert c["mode"] == "E" and c["resumed_from"] == held
    assert c["bytes"] == os.path.getsize(src) - held  # the gaps only
    assert sha256_file(os.path.join(srv.root, "r.bin")) == sha256_file(src)
    assert not os.path.exists(record)
    log = srv.stderr_text()
    assert re.search(r"<- REST \d+-\d+", log) and len(re.findall(r"<- MODE E", log)) == 2


def test_trees_over_tls_use_cached_mode_e_sessions(tmp_path, tls_server):  # noqa: F811 (the imported fixture)
    srv, tls = tls_server
    data = make_tree(tmp_path / "data", depth=3, files=5)
    _run("put", "-r", "-c", "2", *tls, "--json", str(tmp_path / "p.json"), str(data), srv.url("up"))
    assert_same_tree(data, os.path.join(srv.root, "up"))
    _run("get", "-r", "-c", "2", *tls, "--json", str(tmp_path / "g.json"), srv.url("up"), str(tmp_path / "back"))
    assert_same_tree(data, tmp_path / "back")
    for name in ("p.json", "g.json"):
        files = [f for f in _json(tmp_path / name)["files"] if f["status"] == "ok"]
        assert_on_reused_streams(files, 2)  # every file on a cached MODE E session, streams reused
    log = srv.stderr_text()
    assert "<- MODE E" in log and "<- MODE S" not in log
    assert "reusing existing data connection" in log  # streams carried file after file
    assert "TLS negotiation failed" not in log and not _replies(log, 534)


def test_clear_text_mode_e_on_a_tls_server_without_prot_p(tmp_path, certs):  # noqa: F811
    """--tls-cert without --require-tls: a clear-text client still runs
    MODE E in clear text (PROT C)."""
    root = tmp_path / "srv"
    root.mkdir()
    src = make_file(root / "c.bin", 5 * MiB, seed=34)
    srv = ServerProcess(root, "--tls-cert", str(certs.good))
    try:
        _run("get", "-P", "3", "--json", str(tmp_path / "c.json"), srv.url("c.bin"), str(tmp_path / "c.bin"))
    finally:
        srv.stop()
    assert sha256_file(tmp_path / "c.bin") == sha256_file(src)
    assert _json(tmp_path / "c.json")["mode"] == "E"


def _ftps(port, ca):
    ctx = ssl.create_default_context(cafile=str(ca))
    ftp = ftplib.FTP_TLS(context=ctx)
    ftp.connect("127.0.0.1", port, timeout=20)
    ftp.login(USER, PASSWORD)
    ftp.voidcmd("TYPE I")
    ftp.prot_p()
    return ftp


def _final(ftp):
    """The next reply that is not a marker or a 1yz (bounded)."""
    for _ in range(100):
        line = ftp.getline()
        if line[3:4] == "-":  # a multi-line reply: read to its last line
            for _ in range(100):
                if ftp.getline().startswith(line[:3] + " "):
                    break
        if not line.startswith("1"):
            return line
    raise AssertionError("no final reply")


def test_a_clear_text_stream_under_prot_p_is_refused(tmp_path, tls_server, certs):  # noqa: F811
    """MODE E under PROT P: a stream that sends blocks without TLS gets no
    byte written; the STOR fails with 425; the session and the server go
    on (a TLS put right after is whole)."""
    srv, tls = tls_server
    ftp = _ftps(srv.port, certs.ca)
    assert ftp.sendcmd("MODE E").startswith("200")
    port = ftplib.parse227(ftp.sendcmd("PASV"))[1]
    assert ftp.sendcmd("ALLO 10").startswith("200")
    ftp.putcmd("STOR evil.bin")
    assert ftp.getline().startswith("150")
    s = socket.create_connection(("127.0.0.1", port), timeout=10)
    s.sendall(block(0, b"cleartext!") + header(Desc.EOD | Desc.EOF, 0, 1))
    final = _final(ftp)
    assert final.startswith("425 TLS negotiation failed on a data connection"), final
    s.settimeout(10)
    try:
        assert s.recv(100) == b""  # closed by the server
    except ConnectionResetError:
        pass
    s.close()
    assert not os.path.exists(os.path.join(srv.root, "evil.bin"))
    part = os.path.join(srv.root, ".evil.bin.part")
    assert not os.path.exists(part) or os.path.getsize(part) == 0  # nothing written
    assert ftp.sendcmd("NOOP").startswith("200")
    ftp.quit()
    src = make_file(tmp_path / "after.bin", 3 * MiB, seed=35)
    _run("put", "-P", "2", *tls, str(src), srv.url("after.bin"))
    assert sha256_file(os.path.join(srv.root, "after.bin")) == sha256_file(src)


def _thread_server(root, certs_, stream_cert):
    """drsftp serve in this process (thread), its MODE E streams presenting
    ``stream_cert`` while the control connection presents the good one."""
    from drsftp.server.app import ServerConfig, build_server
    from drsftp.server.ftp.eblock import tls as etls

    server = build_server(ServerConfig(root=str(root), user=USER, password=PASSWORD, port=0,
                                       tls_cert=str(certs_.good), require_tls=True))
    server.handler.etls_context = etls.server_context(str(stream_cert), None)
    stop = threading.Event()

    def run():
        while not stop.is_set():
            server.ioloop.loop(timeout=0.05, blocking=False)

    t = threading.Thread(target=run, daemon=True)
    t.start()

    def close():
        stop.set()
        t.join(10)
        server.close_all()
    return server.socket.getsockname()[1], close


def test_a_stream_certificate_the_client_does_not_trust_is_one_sentence(tmp_path, certs):  # noqa: F811
    root = tmp_path / "srv"
    root.mkdir()
    make_file(root / "x.bin", 2 * MiB, seed=36)
    port, close = _thread_server(root, certs, certs.self_signed)
    try:
        url = f"ftp://{USER}:{PASSWORD}@127.0.0.1:{port}/"
        tls = ("--tls", "--ca-file", str(certs.ca))
        for args in (("get", "-P", "3", *tls, url + "x.bin", str(tmp_path / "x.bin")),
                     ("put", "-P", "3", *tls, str(root / "x.bin"), url + "y.bin")):
            r = drsftp(*args, "--progress", "never", timeout=60)
            assert r.returncode == 1, r.stderr
            lines = r.stderr.strip().splitlines()
            assert len(lines) == 1 and "Traceback" not in r.stderr, r.stderr
            assert lines[0].startswith("drsftp: error: TLS certificate of 127.0.0.1 not trusted: self-signed"), lines
        assert not (tmp_path / "x.bin").exists() and not (root / "y.bin").exists()
    finally:
        close()


def test_the_stream_tls_reader_takes_every_whole_record_it_read(certs):  # noqa: F811
    """drsftp serve's reader (etls.StreamTLS) over a socket pair, the
    client a TLSPipe: records bigger than the reader's buffer, read with
    no read event left owed (every call returns data until the socket is
    empty), then the client's close_notify reads as the end (0)."""
    from drsftp.client.session.tls import client_tls
    from drsftp.io.tlsbio import TLSPipe
    from drsftp.server.ftp.eblock.tls import StreamTLS, server_context

    a, b = socket.socketpair()
    a.setblocking(False)
    b.settimeout(10)
    try:
        srv = StreamTLS(server_context(str(certs.good), None), a)
        cli = TLSPipe(client_tls(ca_file=str(certs.ca)).context, server_side=False, server_hostname="localhost")
        for _ in range(20):  # bounded: a handshake is two or three flights
            done = cli.handshake()
            out = cli.take()
            if out:
                b.sendall(out)
            srv.handshake_step()
            if done and srv.established:
                break
            b.setblocking(False)
            try:
                cli.feed(b.recv(1 << 16))
            except BlockingIOError:
                pass
            b.settimeout(10)
        assert srv.established and cli.established
        payload = os.urandom(3 << 20)
        sender = threading.Thread(target=b.sendall, args=(cli.encrypt(payload),), daemon=True)
        sender.start()
        got, buf = bytearray(), memoryview(bytearray(48 << 10))  # smaller than what is sent
        for _ in range(100_000):  # bounded
            if len(got) == len(payload):
                break
            try:
                n = srv.recv_into(buf)
            except BlockingIOError:
                # what the reader holds is never a whole record here: the
                # socket's next data is what it waits for (a poller's event)
                assert select.select([a], [], [], 5)[0], f"stalled at {len(got)} of {len(payload)}"
                continue
            assert n > 0
            got += buf[:n]
        sender.join(10)
        assert bytes(got) == payload
        assert not srv.buffered
        b.sendall(_close_notify(cli))
        assert srv.recv_into(buf) == 0
    finally:
        a.close()
        b.close()


def _close_notify(pipe):
    try:
        pipe.obj.unwrap()
    except ssl.SSLWantReadError:
        pass
    return pipe.take()


# -- a raw MODE E reader: the server's streams as a client sees them ---------------------------


def _any_certificate():
    """The streams' client context here: any certificate, kept to compare
    (the test names the one it expects)."""
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    return ctx


def _der(pem_file):
    text = pem_file.read_text()
    return ssl.PEM_cert_to_DER_cert(text[:text.index("-----END CERTIFICATE-----") + 25])


class StreamReader:
    """Takes the streams drsftp serve connects after PORT, in TLS (the
    client's end: RFC 4217 sec. 10) or clear text, and decodes one
    transfer from each once ``gate`` is set; the streams stay open
    (cached) after their EOD."""

    def __init__(self, size):
        self.lst = socket.create_server(("127.0.0.1", 0))
        self.lst.settimeout(20)
        self.size = size
        self.gate = threading.Event()

    @property
    def port_cmd(self):
        p = self.lst.getsockname()[1]
        return f"PORT 127,0,0,1,{p >> 8},{p & 255}"

    def accept(self, n, tls):
        """``n`` new streams, their TLS handshakes done; each peer certificate."""
        streams = []
        for _ in range(n):
            s, _ = self.lst.accept()
            s.settimeout(20)
            s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 65536)  # a gated reader stalls the sender
            streams.append(_any_certificate().wrap_socket(s) if tls else s)
        return streams, [s.getpeercert(binary_form=True) if tls else None for s in streams]

    def transfer(self, streams):
        """One transfer over ``streams``: the file's bytes, their EOD count."""
        buf, ledger, lock = bytearray(self.size), ReceiveLedger(limit=self.size), threading.Lock()

        def read(s):
            dec = BlockDecoder()
            self.gate.wait(20)
            while not dec.ended:
                data = s.recv(1 << 20)
                assert data, "a stream closed before its EOD"
                with lock:
                    for ev in dec.feed(data):
                        ledger.apply(ev)
                        if isinstance(ev, Data):
                            buf[ev.offset:ev.offset + len(ev.data)] = ev.data

        threads = [threading.Thread(target=read, args=(s,), daemon=True) for s in streams]
        for t in threads:
            t.start()
        for t in threads:
            t.join(30)
        assert ledger.complete, "the transfer never completed"
        return bytes(buf), ledger.eod_count

    def close(self):
        self.lst.close()


def _retr(ftp, rx, name, tls, cached=None):
    """RETR ``name`` on two new streams, or on the ``cached`` ones (125):
    the file's bytes, the streams, their certificates."""
    ftp.putcmd(f"RETR {name}")
    assert ftp.getline().startswith("150" if cached is None else "125")
    streams, peer_certs = rx.accept(2, tls) if cached is None else (cached, None)
    rx.gate.set()
    data, eods = rx.transfer(streams)
    assert _final(ftp).startswith("226") and eods == len(streams)
    return data, streams, peer_certs


def test_sighup_during_a_mode_e_transfer_and_the_next_streams_get_the_new_certificate(tmp_path, certs):  # noqa: F811
    """A MODE E RETR under PROT P runs across a SIGHUP that replaces the
    certificate: it ends whole on its streams; streams connected after the
    reload present the new certificate (docs/EBLOCK.md, "TLS on the
    streams")."""
    root = tmp_path / "srv"
    root.mkdir()
    big = make_file(root / "big.bin", 32 * MiB, seed=37)
    small = make_file(root / "small.bin", 300_000, seed=38)
    cert = tmp_path / "server.pem"
    shutil.copyfile(certs.good, cert)
    log = tmp_path / "t.log"
    conf = tmp_path / "drsftp.toml"
    conf.write_text(f'root = "{root}"\nport = 0\nuser = "{USER}"\npassword = "{PASSWORD}"\n'
                    'tls_cert = "server.pem"\nlog_file = "t.log"\nlog_format = "json"\n')
    srv = _serve_config(conf)
    rx = StreamReader(32 * MiB)
    try:
        ftp = _ftps(srv.port, certs.ca)
        for line in ("MODE E", "OPTS RETR Parallelism=2,2,2;", rx.port_cmd):
            assert ftp.sendcmd(line).startswith("200")
        ftp.putcmd("RETR big.bin")
        assert ftp.getline().startswith("150")
        streams, before = rx.accept(2, tls=True)  # the readers wait: the transfer stalls
        shutil.copyfile(certs.self_signed, cert)
        os.kill(srv.proc.pid, signal.SIGHUP)
        assert wait_until(lambda: any(r["event"] == "reload" for r in _log(log)), 10), _log(log)
        rx.gate.set()
        data, eods = rx.transfer(streams)
        assert _final(ftp).startswith("226") and eods == 2
        assert data == big.read_bytes()
        # a new PORT drops the cached streams: the next RETR's are new ones
        rx.gate.clear()
        assert ftp.sendcmd(rx.port_cmd).startswith("200")
        data, _, after = _retr(ftp, rx, "small.bin", tls=True)
        assert data[:300_000] == small.read_bytes()
        ftp.quit()
    finally:
        rx.close()
        srv.stop()
    assert before == [_der(certs.good)] * 2 and after == [_der(certs.self_signed_cert)] * 2


def test_a_prot_change_closes_the_cached_streams(tmp_path, certs):  # noqa: F811
    """Streams cached under one PROT level are closed before a transfer
    under the other; the next transfer's streams are connected anew with
    the protection now in force (docs/EBLOCK.md, "TLS on the streams")."""
    root = tmp_path / "srv"
    root.mkdir()
    files = [make_file(root / f"p{i}.bin", 200_000 + i, seed=39 + i).read_bytes() for i in range(4)]
    srv = ServerProcess(root, "--tls-cert", str(certs.good))
    rx = StreamReader(300_000)
    try:
        ftp = _ftps(srv.port, certs.ca)
        for line in ("MODE E", "OPTS RETR Parallelism=2,2,2;", rx.port_cmd):
            assert ftp.sendcmd(line).startswith("200")
        data, tls_streams, peer_certs = _retr(ftp, rx, "p0.bin", tls=True)
        assert data[:len(files[0])] == files[0] and all(peer_certs)
        data, _, _ = _retr(ftp, rx, "p1.bin", tls=True, cached=tls_streams)
        assert data[:len(files[1])] == files[1]
        assert ftp.sendcmd("PROT C").startswith("200")
        data, clear_streams, _ = _retr(ftp, rx, "p2.bin", tls=False)  # 150: two new streams, clear text
        assert data[:len(files[2])] == files[2]
        assert all(_closed(s) for s in tls_streams)
        assert ftp.sendcmd("PROT P").startswith("200")
        data, _, peer_certs = _retr(ftp, rx, "p3.bin", tls=True)  # in TLS again
        assert data[:len(files[3])] == files[3] and all(peer_certs)
        assert all(_closed(s) for s in clear_streams)
        ftp.quit()
    finally:
        rx.close()
        srv.stop()


def _closed(s):
    """The server closed the stream: it reads as ended (or reset)."""
    s.settimeout(10)
    try:
        return s.recv(1) == b""
    except (ConnectionResetError, ssl.SSLError):
        return True


def test_next_files_blocks_before_its_stor_are_kept_for_it_under_tls(tls_server, certs):  # noqa: F811
    """A TLS stream carrying file 1's blocks, its EOD and file 2's blocks in
    one write, STOR 2 sent after STOR 1's 226: what the TLS reader took
    past the EOD waits for STOR 2 (tests/test_eblock_early_blocks.py in
    clear text)."""
    srv, _ = tls_server
    one, two = os.urandom(MiB), os.urandom(300_000)
    ftp = _ftps(srv.port, certs.ca)
    assert ftp.sendcmd("MODE E").startswith("200")
    port = ftplib.parse227(ftp.sendcmd("PASV"))[1]
    ftp.putcmd("STOR one.bin")
    assert ftp.getline().startswith("150")
    ctx = ssl.create_default_context(cafile=str(certs.ca))
    s = ctx.wrap_socket(socket.create_connection(("127.0.0.1", port), timeout=10), server_hostname="localhost")
    eof = header(Desc.EOD | Desc.EOF, 0, 1)
    s.sendall(block(0, one) + eof + block(0, two) + eof)
    assert _final(ftp).startswith("226")
    ftp.putcmd("STOR two.bin")
    assert _final(ftp).startswith("226")
    ftp.quit()
    s.close()
    with open(os.path.join(srv.root, "one.bin"), "rb") as f:
        assert f.read() == one
    with open(os.path.join(srv.root, "two.bin"), "rb") as f:
        assert f.read() == two
