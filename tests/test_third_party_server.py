"""`drsftp serve` as both ends of a third-party (server-to-server) transfer
(docs/PROTOCOL.md, "Third-party transfers"): a raw control-channel client
drives two servers as `drsftp copy`, globus-url-copy and lftp do.  All on
loopback: the client's control connections come from 127.0.0.1, server A
(the source) uses the data interface 127.0.0.3 and B (the destination)
127.0.0.2, so a data connection between them is a foreign one to both.
Also the bounce rule (RFC 2577), the options' checks, and the tuning of
a third-party data path (docs/DESIGN.md#third-party-path)."""

from __future__ import annotations

import contextlib
import json
import re
import socket
import ssl

import pytest
from conftest import PASSWORD, PY, USER, ServerProcess, drsftp, make_file, sha256_file, wait_until
from test_tls import certs  # noqa: F401 (a fixture)

from drsftp.ftp.eblock import data_header, eod
from drsftp.server.ftp.thirdparty import DataPeers
from drsftp.server.ops.metrics import Metrics
from drsftp.server.peers import PeerList, parse_peers
from drsftp.tuning import Role
from drsftp.tuning.actuation import NO_ACTION, HostLimits
from drsftp.tuning.controller import SocketController

CLIENT, A_DATA, B_DATA, OTHER = "127.0.0.1", "127.0.0.3", "127.0.0.2", "127.0.0.9"
MiB = 1 << 20
SIZE = 3 * MiB + 4321
FINAL = re.compile(r"^[2-5]\d\d ")


class Ctl:
    """A raw control connection (what the driving client does by hand)."""

    def __init__(self, port: int, host: str = CLIENT, tls_ctx: ssl.SSLContext | None = None):
        sock = socket.create_connection((host, port), timeout=20)
        self.sock = tls_ctx.wrap_socket(sock, server_hostname="127.0.0.1") if tls_ctx else sock
        self.f = self.sock.makefile("rb")
        assert self.reply().startswith("220")

    def send(self, line: str) -> None:
        self.sock.sendall(line.encode() + b"\r\n")

    def reply(self) -> str:
        """One reply, all its lines."""
        lines = [self.f.readline().decode().rstrip("\r\n")]
        first = lines[0]
        if first[3:4] == "-":
            while not lines[-1].startswith(first[:3] + " "):
                lines.append(self.f.readline().decode().rstrip("\r\n"))
        return "\n".join(lines)

    def cmd(self, line: str) -> str:
        self.send(line)
        return self.reply()

    def final(self) -> tuple[str, list[str]]:
        """The next final reply, and the preliminary ones (1yz: 150, the
        markers) before it."""
        prelim = []
        while not FINAL.match(r := self.reply()):
            prelim.append(r)
        return r, prelim

    def starttls(self, ctx: ssl.SSLContext) -> Ctl:
        """AUTH TLS (RFC 4217): the control connection in TLS from here."""
        assert self.cmd("AUTH TLS").startswith("234")
        self.sock = ctx.wrap_socket(self.sock, server_hostname="127.0.0.1")
        self.f = self.sock.makefile("rb")
        return self

    def login(self, *setup: str) -> Ctl:
        assert self.cmd(f"USER {USER}").startswith("331")
        assert self.cmd(f"PASS {PASSWORD}").startswith("230")
        for line in ("TYPE I", *setup):
            assert self.cmd(line)[:1] == "2", line
        return self

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self.sock.close()


def pasv_address(reply: str) -> tuple[str, int]:
    nums = [int(n) for n in re.search(r"\((\d+,\d+,\d+,\d+,\d+,\d+)\)", reply).group(1).split(",")]
    return ".".join(map(str, nums[:4])), nums[4] * 256 + nums[5]


def port_arg(ip: str, port: int) -> str:
    return f"{ip.replace('.', ',')},{port >> 8},{port & 255}"


class Server(ServerProcess):
    """drsftp serve with a JSON transfer log of its own."""

    def __init__(self, root, log, *extra):
        self.log_path = log
        super().__init__(root, "--log-file", str(log), "--log-format", "json", *extra)

    def records(self, event: str = "transfer") -> list[dict]:
        with open(self.log_path) as f:
            return [r for r in map(json.loads, filter(str.strip, f)) if r.get("event") == event]

    def messages(self) -> str:
        return "\n".join(r["message"] for r in self.records("message"))


@contextlib.contextmanager
def servers(tmp_path, a_extra=(), b_extra=()):
    """A (source, a file src.bin) on data interface 127.0.0.3 and B
    (destination) on 127.0.0.2, each listing the other as a peer."""
    ra, rb = tmp_path / "a", tmp_path / "b"
    ra.mkdir()
    rb.mkdir()
    make_file(ra / "src.bin", SIZE, seed=11)
    with contextlib.ExitStack() as stack:
        a = Server(ra, tmp_path / "a.log", "--data-interface", A_DATA, "--third-party-peers", B_DATA, *a_extra)
        stack.callback(a.stop)
        b = Server(rb, tmp_path / "b.log", "--data-interface", B_DATA, "--third-party-peers", A_DATA, *b_extra)
        stack.callback(b.stop)
        yield a, b


def last_transfer(srv: Server) -> dict:
    assert wait_until(lambda: srv.records(), 10), "no transfer line"
    return srv.records()[-1]


# -- the transfers ----------------------------------------------------------------------------
@pytest.mark.parametrize("mode", ["S", "E"])
def test_source_active_destination_passive_with_allo_byte_identical(tmp_path, mode):
    """The default direction: B passive (PASV, ALLO, STOR, not waiting for
    its 150), A active (PORT naming B's data interface, RETR); MODE E with
    four streams and B's markers.  Each log line names the other server."""
    extended = ("MODE E",) if mode == "E" else ()
    with servers(tmp_path) as (a, b):
        ca, cb = Ctl(a.port).login(*extended), Ctl(b.port).login(*extended)
        if mode == "E":
            assert ca.cmd("OPTS RETR Parallelism=4,4,4;").startswith("200")
        reply = cb.cmd("PASV")
        assert pasv_address(reply)[0] == B_DATA  # the data interface, not the control address
        assert cb.cmd(f"ALLO {SIZE}").startswith("200")
        cb.send("STOR dst.bin")
        assert ca.cmd("PORT " + port_arg(*pasv_address(reply))).startswith("200")
        ca.send("RETR src.bin")
        a_final, a_pre = ca.final()
        b_final, b_pre = cb.final()
        assert a_final.startswith("226") and b_final.startswith("226"), (a_final, b_final)
        assert a_pre[0][:3] in ("125", "150") and b_pre[0][:3] in ("125", "150")
        if mode == "E":  # GridFTP's restart and performance markers during a MODE E STOR
            assert any(p.startswith("111 Range Marker") for p in b_pre), b_pre
            assert any(p.startswith("112-Perf Marker") for p in b_pre), b_pre
        ca.close()
        cb.close()
        assert sha256_file(b.root + "/dst.bin") == sha256_file(a.root + "/src.bin")
        la, lb = last_transfer(a), last_transfer(b)
    assert (la["direction"], la["data_peer"], la["complete"]) == ("get", B_DATA, True)
    assert (lb["direction"], lb["data_peer"], lb["complete"]) == ("put", A_DATA, True)
    assert la["peer"].startswith(CLIENT + ":") and lb["bytes"] == SIZE
    assert la["streams"] == lb["streams"] == (4 if mode == "E" else 1)


def test_stream_mode_reverse_source_passive_destination_active(tmp_path):
    """The reverse (stream mode only): A passive (PASV, RETR), B active
    (PORT naming A's data interface and STOR, sent together: B answers PORT
    once connected, and A sends at once)."""
    with servers(tmp_path) as (a, b):
        ca, cb = Ctl(a.port).login(), Ctl(b.port).login()
        reply = ca.cmd("PASV")
        assert pasv_address(reply)[0] == A_DATA
        ca.send("RETR src.bin")
        cb.send("PORT " + port_arg(*pasv_address(reply)))
        cb.send("STOR dst.bin")
        assert cb.reply().startswith("200")
        assert ca.final()[0].startswith("226") and cb.final()[0].startswith("226")
        assert sha256_file(b.root + "/dst.bin") == sha256_file(a.root + "/src.bin")
        assert last_transfer(a)["data_peer"] == B_DATA and last_transfer(b)["data_peer"] == A_DATA


def test_stream_mode_reverse_with_the_whole_file_sent_before_the_stor(tmp_path):
    """A client that waits for B's PORT reply (sent once B has connected)
    before STOR: A has sent the whole small file and closed by then; B
    keeps it in the kernel for the STOR, unread, and stores all of it."""
    small = tmp_path / "a" / "small.bin"
    with servers(tmp_path) as (a, b):
        make_file(small, 1000, seed=5)
        ca, cb = Ctl(a.port).login(), Ctl(b.port).login()
        ca.send("PASV")
        addr = pasv_address(ca.reply())
        ca.send("RETR small.bin")
        assert cb.cmd("PORT " + port_arg(*addr)).startswith("200")
        assert ca.final()[0].startswith("226")  # A is done before B's STOR
        cb.send("STOR small.bin")
        final, prelim = cb.final()
        assert final.startswith("226") and prelim[0].startswith("125"), (final, prelim)
        assert (tmp_path / "b" / "small.bin").read_bytes() == small.read_bytes()


def test_mode_e_refuses_the_reverse_direction(tmp_path):
    """GFD.20: in MODE E the sender connects; a STOR after PORT is 425."""
    with servers(tmp_path) as (_a, b):
        cb = Ctl(b.port).login("MODE E")
        assert cb.cmd("PORT " + port_arg(A_DATA, 40000)).startswith("200")
        assert cb.cmd("STOR dst.bin").startswith("425 MODE E data flows from the connecting side")


@pytest.mark.parametrize("mode", ["S", "E"])
def test_rest_resumes_a_third_party_transfer(tmp_path, mode):
    """B holds the first part in its part file; REST on both ends (a
    byte count in stream mode, B's ranges in MODE E) moves the rest."""
    held = SIZE // 3
    extended = ("MODE E",) if mode == "E" else ()
    with servers(tmp_path) as (a, b):
        with open(a.root + "/src.bin", "rb") as f, open(b.root + "/.dst.bin.part", "wb") as part:
            part.write(f.read(held))
        rest = f"REST {held}" if mode == "S" else f"REST 0-{held}"
        ca, cb = Ctl(a.port).login(*extended), Ctl(b.port).login(*extended)
        reply = cb.cmd("PASV")
        assert cb.cmd(f"ALLO {SIZE}").startswith("200")
        assert cb.cmd(rest).startswith("350")
        cb.send("STOR dst.bin")
        assert ca.cmd("PORT " + port_arg(*pasv_address(reply))).startswith("200")
        assert ca.cmd(rest).startswith("350")
        ca.send("RETR src.bin")
        assert ca.final()[0].startswith("226") and cb.final()[0].startswith("226")
        assert sha256_file(b.root + "/dst.bin") == sha256_file(a.root + "/src.bin")
        assert last_transfer(b)["bytes"] == SIZE - held


@pytest.mark.parametrize(("mode", "client_end"), [("S", "source"), ("S", "destination"), ("E", "source"),
                                                  ("E", "destination")])
def test_sscn_lets_two_ftps_servers_protect_the_data_connection(tmp_path, certs, mode, client_end):  # noqa: F811
    """Under PROT P both servers would be TLS servers; SSCN ON makes one
    of them (the active source, or the passive destination) the TLS
    client, and the file moves in TLS, byte-identical."""
    tls = ("--tls-cert", str(certs.good), "--require-tls")
    ctx = ssl.create_default_context(cafile=str(certs.ca))
    extended = ("MODE E",) if mode == "E" else ()
    with servers(tmp_path, tls, tls) as (a, b):
        ca = Ctl(a.port).starttls(ctx).login("PBSZ 0", "PROT P", *extended)
        cb = Ctl(b.port).starttls(ctx).login("PBSZ 0", "PROT P", *extended)
        client, server = (ca, cb) if client_end == "source" else (cb, ca)
        assert client.cmd("SSCN ON") == "200 SSCN:CLIENT METHOD"
        assert server.cmd("SSCN") == "200 SSCN:SERVER METHOD"
        assert "SSCN" in server.cmd("FEAT")
        if mode == "E":
            assert ca.cmd("OPTS RETR Parallelism=3,3,3;").startswith("200")
        reply = cb.cmd("PASV")
        assert cb.cmd(f"ALLO {SIZE}").startswith("200")
        cb.send("STOR dst.bin")
        assert ca.cmd("PORT " + port_arg(*pasv_address(reply))).startswith("200")
        ca.send("RETR src.bin")
        assert ca.final()[0].startswith("226") and cb.final()[0].startswith("226")
        assert sha256_file(b.root + "/dst.bin") == sha256_file(a.root + "/src.bin")
        assert cb.cmd("SSCN MAYBE").startswith("501")


# -- the bounce rule (RFC 2577) ---------------------------------------------------------------
def one_server(tmp_path, *extra) -> Server:
    root = tmp_path / "srv"
    root.mkdir(exist_ok=True)
    make_file(root / "f.bin", 100_000, seed=2)
    return Server(root, tmp_path / f"srv{len(list(tmp_path.glob('*.log')))}.log", *extra)


@pytest.mark.parametrize("extra", [(), ("--third-party-peers", f"{B_DATA},10.0.0.0/8")], ids=["off", "unlisted"])
def test_a_data_address_of_an_unlisted_host_is_refused_naming_the_option_and_logged(tmp_path, extra):
    srv = one_server(tmp_path, *extra)
    try:
        ctl = Ctl(srv.port).login()
        for cmd in ("PORT 127,0,0,9,156,64", "EPRT |1|127.0.0.9|40000|"):
            reply = ctl.cmd(cmd)
            assert reply == "501 Rejected data connection to foreign address 127.0.0.9:40000; allow it with" \
                            " --third-party-peers.", reply
        assert ctl.cmd("MODE E").startswith("200")
        assert ctl.cmd("PORT 127,0,0,9,156,64").startswith("501 Rejected data connection to foreign address")
        assert ctl.cmd("RETR f.bin").startswith("425")  # no address was taken
        ctl.close()
        assert wait_until(lambda: srv.messages().count("refused a data connection to 127.0.0.9:40000") == 3, 10), \
            srv.messages()
    finally:
        srv.stop()


def test_metrics_count_the_refusal_as_a_bounce():
    m = Metrics(None)
    m.observe_reply("501 Rejected data connection to foreign address 127.0.0.9:40000; allow it with"
                    " --third-party-peers.")
    assert m.refusals.labels("bounce")._value.get() == 1


def test_a_listed_peer_is_connected_from_the_data_interface_and_never_on_a_privileged_port(tmp_path):
    """PORT to a listed host: the connection comes from --data-interface
    and carries the file; a port below 1024 is refused all the same."""
    srv = one_server(tmp_path, "--third-party-peers", f"{OTHER}/32", "--data-interface", B_DATA)
    listener = socket.create_server((OTHER, 0))
    try:
        ctl = Ctl(srv.port).login()
        for cmd in ("PORT 127,0,0,9,0,80", "EPRT |1|127.0.0.9|1023|"):
            assert ctl.cmd(cmd).startswith("501 PORT against the privileged port"), cmd
        ctl.send("PORT " + port_arg(OTHER, listener.getsockname()[1]))
        ctl.send("RETR f.bin")
        listener.settimeout(20)
        data, source = listener.accept()
        assert source[0] == B_DATA
        with data:
            got = b"".join(iter(lambda: data.recv(1 << 16), b""))
        assert ctl.reply().startswith("200") and ctl.final()[0].startswith("226")
        assert got == (tmp_path / "srv" / "f.bin").read_bytes()
        assert ctl.cmd("MODE E").startswith("200")
        assert ctl.cmd("PORT 127,0,0,9,0,80").startswith("501 PORT against the privileged port")
        ctl.close()
    finally:
        listener.close()
        srv.stop()


def connect_from(source: str, address: tuple[str, int]) -> socket.socket:
    s = socket.socket()
    s.bind((source, 0))
    s.settimeout(10)
    s.connect(address)
    return s


def dropped(s: socket.socket) -> bool:
    try:
        return s.recv(1) == b""
    except ConnectionResetError:
        return True


@pytest.mark.parametrize("mode", ["S", "E"])
def test_a_passive_connection_from_an_unlisted_address_is_dropped_without_a_reply(tmp_path, mode):
    """The listener drops it (logged), answers nothing, and waits on: the
    client's own connection then carries the transfer."""
    srv = one_server(tmp_path, "--third-party-peers", A_DATA)
    try:
        ctl = Ctl(srv.port).login(*(("MODE E",) if mode == "E" else ()))
        addr = pasv_address(ctl.cmd("PASV"))
        with connect_from(OTHER, addr) as foreign:
            assert dropped(foreign)
        assert ctl.cmd("NOOP").startswith("200")  # nothing unasked came before it
        payload = b"x" * 100_000
        ctl.send(f"ALLO {len(payload)}")
        assert ctl.reply().startswith("200")
        ctl.send("STOR up.bin")
        with connect_from(CLIENT, addr) as own:
            if mode == "E":
                own.sendall(data_header(0, len(payload)) + payload + eod(eof_streams=1))
            else:
                own.sendall(payload)
                own.shutdown(socket.SHUT_WR)
            assert ctl.final()[0].startswith("226")
        assert (tmp_path / "srv" / "up.bin").read_bytes() == payload
        assert wait_until(lambda: f"from {OTHER}" in srv.messages(), 10), srv.messages()
        ctl.close()
    finally:
        srv.stop()


# -- the data interface and NAT ----------------------------------------------------------------
def test_pasv_names_the_masquerade_address_listeners_bind_the_data_interface_with_tls_and_mode_e(
        tmp_path, certs):  # noqa: F811
    """--masquerade-address is what PASV names (stream mode and MODE E, on
    the explicit and the implicit FTPS listener); the listener is on
    --data-interface (a connection there carries the data); EPSV, which
    names no address, is refused where the control connection is not on
    the data interface."""
    srv = one_server(tmp_path, "--data-interface", B_DATA, "--masquerade-address", "192.0.2.10",
                     "--tls-cert", str(certs.good), "--implicit-tls-port", "0")
    tls_port = int(re.search(r":(\d+)$", srv.proc.stdout.readline().strip()).group(1))
    ctx = ssl.create_default_context(cafile=str(certs.ca))
    try:
        plain = Ctl(srv.port).login()
        assert plain.cmd("EPSV").startswith("502 EPSV names no address")
        for setup in ((), ("MODE E",)):
            ctl = Ctl(tls_port, tls_ctx=ctx).login(*setup)
            ip, port = pasv_address(ctl.cmd("PASV"))
            assert ip == "192.0.2.10"
            if not setup:  # PROT P is in force: the data connection is TLS, as the listener is B_DATA's
                ctl.send("RETR f.bin")
                with ctx.wrap_socket(connect_from(CLIENT, (B_DATA, port)), server_hostname="127.0.0.1") as data:
                    got = b"".join(iter(lambda: data.recv(1 << 16), b""))
                assert ctl.final()[0].startswith("226") and len(got) == 100_000
            ctl.close()
        plain.close()
    finally:
        srv.stop()


def test_epsv_is_answered_where_the_control_connection_is_on_the_data_interface(tmp_path):
    srv = one_server(tmp_path, "--host", B_DATA, "--data-interface", B_DATA)
    try:
        ctl = Ctl(srv.port, host=B_DATA).login()
        assert ctl.cmd("EPSV").startswith("229")
        assert pasv_address(ctl.cmd("PASV"))[0] == B_DATA
        ctl.close()
    finally:
        srv.stop()


# -- options ---------------------------------------------------------------------------------
@pytest.mark.parametrize(("args", "toml", "error"), [
    (("--third-party-peers", "peer.example"), "",
     "--third-party-peers must list IPv4/IPv6 addresses or networks (CIDR, such as 192.0.2.0/24), not"
     " 'peer.example'"),
    (("--third-party-peers", "127.0.0.2,10.1.2.3/8"), "",
     "--third-party-peers names the network '10.1.2.3/8' by an address inside it: write 10.0.0.0/8"),
    (("--third-party-peers", "::/0"), "", "--third-party-peers ::/0 would allow every address"),
    ((), 'third_party_peers = ["127.0.0.2", 3]\n', "{f}:5: third_party_peers must list addresses or networks"
     " as strings, not 3"),
    ((), "third_party_peers = 7\n", "{f}:5: third_party_peers must be an array of addresses and networks"),
    (("--data-interface", "dtn.example"), "", "--data-interface must be an IPv4 or IPv6 address, not"
     " 'dtn.example'"),
    ((), 'data_interface = "0.0.0.0"\n', "{f}:5: data_interface must name one interface's address, not 0.0.0.0"),
    (("--data-interface", "192.0.2.1"), "", "--data-interface 192.0.2.1 is not an address of this host"),
    (("--masquerade-address", "2001:db8::1"), "", "--masquerade-address must be an IPv4 address (PASV names"
     " IPv4 addresses only)"),
])
def test_option_and_key_errors_are_one_sentence_and_exit_2(tmp_path, args, toml, error):
    f = tmp_path / "drsftp.toml"
    (tmp_path / "srv").mkdir()
    f.write_text(f'root = "srv"\nport = 0\nuser = "{USER}"\npassword = "{PASSWORD}"\n{toml}')
    r = drsftp("serve", "--config", str(f), *args, timeout=60)
    assert r.returncode == 2, r.stderr
    assert "listening" not in r.stdout
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("drsftp: error: " + error.format(f=f)), r.stderr


def test_toml_keys_take_an_array_or_a_string(tmp_path):
    (tmp_path / "srv").mkdir()
    make_file(tmp_path / "srv" / "f.bin", 1000, seed=1)
    f = tmp_path / "drsftp.toml"
    f.write_text(f'root = "srv"\nport = 0\nuser = "{USER}"\npassword = "{PASSWORD}"\n'
                 f'third_party_peers = ["{OTHER}", "10.0.0.0/8"]\ndata_interface = "{B_DATA}"\n')
    srv = ServerProcess("", cmd=[PY, "-m", "drsftp", "serve", "--config", str(f)])
    listener = socket.create_server((OTHER, 0))
    try:
        ctl = Ctl(srv.port).login()
        assert pasv_address(ctl.cmd("PASV"))[0] == B_DATA
        ctl.send("PORT " + port_arg(OTHER, listener.getsockname()[1]))
        listener.settimeout(20)
        conn, source = listener.accept()
        conn.close()
        assert source[0] == B_DATA and ctl.reply().startswith("200")
        ctl.close()
    finally:
        listener.close()
        srv.stop()
    assert parse_peers("127.0.0.2, ::ffff:127.0.0.3,2001:db8::/32").networks[1].compressed == "127.0.0.3/32"
    assert "::ffff:127.0.0.3" in parse_peers("127.0.0.3") and "127.0.0.4" not in parse_peers("127.0.0.3")
    assert not parse_peers("") and not PeerList()


# -- the third-party data path's tuning (sans-IO) ------------------------------------------------
LIMITS = HostLimits(rmem_max=8 * MiB, wmem_max=8 * MiB, tcp_rmem=(4096, 131072, 6 * MiB),
                    tcp_wmem=(4096, 16384, 4 * MiB), congestion_control="cubic", can_force=False)


def test_a_foreign_data_path_ignores_the_control_rtt_and_opens():
    """A short control RTT would start closed and replace the data
    connection's small RTT samples; on a third-party path neither."""
    near = SocketController("drs", Role.RECEIVER, limits=LIMITS)
    near.note_control_rtt(2_000)  # 2 ms: the client is near this server
    assert near.before_handshake() == NO_ACTION
    foreign = SocketController("drs", Role.RECEIVER, limits=LIMITS)
    foreign.note_foreign_path()
    foreign.note_control_rtt(2_000)
    assert foreign.control_rtt is None
    opened = foreign.before_handshake()
    assert opened.rcvbuf == int(LIMITS.rmem_max / 0.8)  # the open start's cap
    assert foreign.after_handshake().clamp is not None  # ... and the floor locked before the first byte
    foreign.attach(now=0.0)
    foreign.tick({"snd_mss": 1448, "bytes_received": 1448, "rcv_rtt": 300}, 1448, now=0.01)
    assert foreign.last_rtt == 0.0003  # the data path's own sample, kept
    closed = SocketController("drs-closed", Role.RECEIVER, limits=LIMITS)
    closed.note_foreign_path()
    assert closed.before_handshake() == NO_ACTION  # drs-closed stays closed everywhere


class _Session(DataPeers):
    remote_ip = CLIENT
    permit_foreign_addresses = False
    socket = None


class _Tuner:
    def __init__(self):
        self.seen = []

    def note_foreign_path(self):
        self.seen.append("foreign")

    def note_control_rtt(self, sock):
        self.seen.append("control")


@pytest.mark.parametrize(("peers", "peer", "seen"), [
    ("", CLIENT, "control"), ("", None, "control"), (A_DATA, CLIENT, "control"),
    (A_DATA, A_DATA, "foreign"), (A_DATA, None, "foreign"), ("", "::ffff:127.0.0.1", "control"),
])
def test_which_path_a_data_socket_is_on(peers, peer, seen):
    """A listener whose peer may be a third-party host is on an unknown
    path; a known peer decides (docs/DESIGN.md#third-party-path)."""
    s = _Session()
    s.third_party_peers = parse_peers(peers)
    t = _Tuner()
    s.note_data_path(t, peer)
    assert t.seen == [seen]

