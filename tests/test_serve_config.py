"""The standing server: `drsftp serve --config FILE`, its errors, the
transfer log, SIGHUP reloads, and the contrib example."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import signal
import socket
import subprocess
from pathlib import Path

import pytest
from conftest import (
    PASSWORD,
    PY,
    USER,
    ServerProcess,
    drsftp,
    ftp_session,
    make_file,
    reply_of,
    running_server,
    sha256_file,
    start_stalled_retr,
    wait_until,
)
from tlscerts import make_certs

from drsftp.server import config as server_config
from drsftp.server.ops.users import WRITE_PERM, UserEntry, hash_password, write_user

REPO = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def certs(tmp_path_factory):
    return make_certs(tmp_path_factory.mktemp("certs"))


def _serve_config(path, *extra):
    return ServerProcess("", cmd=[PY, "-m", "drsftp", "serve", "--config", str(path), *extra])


def _log(path):
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


@pytest.mark.parametrize(("text", "error"), [
    ('root = "."\nport = 0\nuser = "a"\npassword = "b"\nbogus_key = 1\n', "{f}:5: unknown key 'bogus_key'"),
    ('root = "."\n\n# a comment\nport = "2121"\n', "{f}:4: port must be an integer, not a string"),
    ('root = "."\nrequire_tls = "yes"\n', "{f}:2: require_tls must be true or false, not a string"),
    ('root = "."\nlog_format = "xml"\n', "{f}:2: log_format must be \"text\" or \"json\""),
    ('port = 0\nuser = "a"\npassword = "b"\n', "{f}: root is missing (the directory to serve)"),
    ('root = "."\n[tls]\ncert = "x"\n', "{f}:2: unknown key 'tls'"),
    ('root = \n', "{f}: not valid TOML: "),
    # values out of range: checked like the types, before listening
    ('root = "."\n\nport = 70000\n', "{f}:3: port must be 0-65535 (0: any free port), not 70000"),
    ('root = "."\nport = -1\n', "{f}:2: port must be 0-65535 (0: any free port), not -1"),
    ('root = "."\nhost = ""\n', "{f}:2: host must name an address: 127.0.0.1 (this host only), or 0.0.0.0"),
    ('root = "."\npassive_ports = "100-200"\n',
     "{f}:2: passive_ports must be LO-HI with 1024 <= LO <= HI <= 65535, not '100-200'"),
    ('root = "."\npassive_ports = "60000-70000"\n', "{f}:2: passive_ports must be LO-HI with 1024 <= LO"),
    ('root = "."\nmax_connections = -5\n', "{f}:2: max_connections must be 0 (no limit) or more, not -5"),
    ('root = "."\nmax_streams_total = 0\n', "{f}:2: max_streams_total must be 1 or more, not 0"),
    ('root = "."\nidle_timeout = nan\n', "{f}:2: idle_timeout must be a number of seconds, 0 or more, not nan"),
    ('root = "."\ndata_timeout = -1\n', "{f}:2: data_timeout must be a number of seconds, 0 or more, not -1"),
    ('root = "."\ngrace = inf\n', "{f}:2: grace must be a number of seconds, 0 or more, not inf"),
    ('root = "."\nbuffer_budget = -1\n', "{f}:2: buffer_budget must be a size in bytes, or \"off\", not -1"),
    ('root = "."\nbuffer_budget = "lots"\n', "{f}:2: buffer_budget must be a size such as \"256MiB\""),
    ('root = "."\ntuning = "warp"\n', "{f}:2: tuning is not valid: unknown tuning 'warp'"),
])
def test_a_bad_config_file_is_one_error_naming_the_key_and_line_before_listening(tmp_path, text, error):
    f = tmp_path / "drsftp.toml"
    f.write_text(text)
    r = drsftp("serve", "--config", str(f), timeout=60)
    assert r.returncode == 2
    assert "listening" not in r.stdout
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("drsftp: error: " + error.format(f=f)), r.stderr


def test_the_command_line_overrides_the_file_and_paths_are_relative_to_it(tmp_path):
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    make_file(tmp_path / "b" / "only-in-b.bin", 1 << 20)
    conf = tmp_path / "etc" / "drsftp.toml"
    conf.parent.mkdir()
    conf.write_text(f'root = "../a"\nport = 0\nuser = "{USER}"\npassword = "{PASSWORD}"\n'
                    'log_file = "transfers.log"\nlog_format = "json"\n')
    srv = _serve_config(conf, "--root", str(tmp_path / "b"), "--log-format", "text")
    try:
        r = drsftp("get", srv.url("only-in-b.bin"), str(tmp_path / "got.bin"))
        assert r.returncode == 0, r.stderr
    finally:
        srv.stop()
    text = (tmp_path / "etc" / "transfers.log").read_text()  # log_file from the file, beside it
    assert " transfer " in text and "path=/only-in-b.bin" in text and not text.lstrip().startswith("{")


def test_transfer_log_has_one_line_per_login_and_per_transfer(tmp_path):
    curl = shutil.which("curl")
    assert curl, "curl is installed by .ci/run"
    root = tmp_path / "srv"
    root.mkdir()
    src = make_file(root / "big.bin", 32 << 20, seed=2)
    log_file = tmp_path / "t.log"
    with running_server(root, "--log-file", str(log_file), "--log-format", "json") as srv:
        assert drsftp("get", srv.url("big.bin"), str(tmp_path / "got.bin")).returncode == 0
        r = subprocess.run([curl, "-sS", "-T", str(src), srv.url("up%20load.bin")], check=False,
                           capture_output=True, timeout=120)
        assert r.returncode == 0, r.stderr
        bad = drsftp("get", f"ftp://{USER}:wrong@127.0.0.1:{srv.port}/big.bin", str(tmp_path / "x.bin"))
        assert bad.returncode == 1
        assert wait_until(lambda: len(_log(log_file)) >= 5, 10)
    recs = _log(log_file)
    logins = [r for r in recs if r["event"] == "login"]
    transfers = [r for r in recs if r["event"] == "transfer"]
    assert [(r["user"], r["ok"]) for r in logins] == [(USER, True), (USER, True), (USER, False)]
    get, put = transfers
    assert (get["direction"], get["path"], get["bytes"], get["complete"]) == ("get", "/big.bin", 32 << 20, True)
    assert get["drs_peer"] is True  # DRS reports were exchanged with drsftp's client during the transfer
    assert (put["direction"], put["path"], put["bytes"], put["complete"]) == ("put", "/up load.bin", 32 << 20, True)
    assert put["drs_peer"] is False  # curl does not speak DRS
    for t in transfers:
        assert t["peer"].startswith("127.0.0.1:") and t["tls"] is False and t["seconds"] > 0
        assert t["rate_bps"] == round(t["bytes"] * 8 / t["seconds"])
    assert sha256_file(root / "up load.bin") == sha256_file(src)


def test_text_log_goes_to_stderr_and_quotes_what_could_forge_a_line(tmp_path):
    root = tmp_path / "srv"
    root.mkdir()
    make_file(root / "a.bin", 1 << 20)
    srv = ServerProcess(root)
    try:
        ftp = ftp_session(srv.port)
        with open(root / "a.bin", "rb") as f:
            ftp.storbinary("STOR evil x=1 transfer.bin", f)
        ftp.quit()
        srv.proc.terminate()
        srv.proc.wait(10)
        err = srv.stderr_text()
    finally:
        srv.stop()
    lines = [ln for ln in err.splitlines() if " transfer " in ln]
    assert len(lines) == 1, err
    assert 'path="/evil x=1 transfer.bin"' in lines[0] and "direction=put" in lines[0] and "drs_peer=no" in lines[0]


def test_sighup_reloads_users_and_certificate_while_a_transfer_runs(tmp_path, certs):
    root = tmp_path / "srv"
    root.mkdir()
    src = make_file(root / "big.bin", 16 << 20, seed=9)
    users = tmp_path / "users"
    write_user(str(users), UserEntry("alice", hash_password("alice-pass"), str(root), WRITE_PERM))
    cert = tmp_path / "server.pem"
    shutil.copyfile(certs.good, cert)
    log_file = tmp_path / "t.log"
    conf = tmp_path / "drsftp.toml"
    conf.write_text(f'root = "{root}"\nport = 0\nusers = "users"\ntls_cert = "server.pem"\n'
                    'log_file = "t.log"\nlog_format = "json"\n')
    srv = _serve_config(conf)
    try:
        ftp = ftp_session(srv.port, "alice", "alice-pass")
        data, head = start_stalled_retr(ftp, "big.bin")
        write_user(str(users), UserEntry("bob", hash_password("bob-pass"), str(root), WRITE_PERM))
        shutil.copyfile(certs.wrong_name, cert)
        os.kill(srv.proc.pid, signal.SIGHUP)
        reloaded = lambda: [r["what"].split(" ")[0] for r in _log(log_file) if r["event"] == "reload"]  # noqa: E731
        assert wait_until(lambda: sorted(reloaded()) == ["TLS", "third-party", "users"], 10), _log(log_file)
        # the running transfer goes on to the last byte
        got = bytearray(head)
        while chunk := data.recv(1 << 20):
            got += chunk
        data.close()
        assert ftp.voidresp().startswith("226")
        ftp.quit()
        assert sha256_file(src) == hashlib.sha256(bytes(got)).hexdigest()
        # the new user logs in; a new TLS session gets the new certificate
        ftp_session(srv.port, "bob", "bob-pass").quit()
        r = drsftp("get", "--tls", "--ca-file", str(certs.ca), f"ftp://bob:bob-pass@127.0.0.1:{srv.port}/big.bin",
                   str(tmp_path / "x.bin"))
        assert r.returncode == 1 and "not valid for the name 127.0.0.1" in r.stderr, r.stderr
        # a certificate that does not load keeps the one in use
        cert.write_text("garbage\n")
        os.kill(srv.proc.pid, signal.SIGHUP)
        assert wait_until(lambda: any(r.get("level") == "error" and "kept the old TLS certificate" in r["message"]
                                      for r in _log(log_file)), 10)
        shutil.copyfile(certs.good, cert)
        r = drsftp("get", "--tls", "--ca-file", str(certs.ca), f"ftp://bob:bob-pass@127.0.0.1:{srv.port}/big.bin",
                   str(tmp_path / "x.bin"))
        assert r.returncode == 1 and "not valid for the name" in r.stderr  # still the reloaded one
    finally:
        srv.stop()


def _port_cmd(addr):
    host, port = addr
    return f"PORT {host.replace('.', ',')},{port >> 8},{port & 255}"


def test_sighup_reloads_the_third_party_peers_and_pasv_address_from_the_config_file(tmp_path):
    """A peer listed in the file after start is let in from the reload on
    (RFC 2577's foreign PORT), PASV names the new masquerade address, and a
    bad value keeps both as they were (docs/DEPLOY.md, "Reload and stop")."""
    root = tmp_path / "srv"
    root.mkdir()
    log_file = tmp_path / "t.log"
    conf = tmp_path / "drsftp.toml"
    head = (f'root = "srv"\nport = 0\nuser = "{USER}"\npassword = "{PASSWORD}"\n'
            'log_file = "t.log"\nlog_format = "json"\n')
    conf.write_text(head)
    peer = socket.create_server(("127.0.0.2", 0))  # the third-party peer: another loopback address
    srv = _serve_config(conf)
    try:
        ftp = ftp_session(srv.port)
        assert reply_of(ftp, _port_cmd(peer.getsockname())).startswith("501")
        conf.write_text(head + 'third_party_peers = ["127.0.0.2"]\nmasquerade_address = "127.0.0.3"\n')
        os.kill(srv.proc.pid, signal.SIGHUP)
        assert wait_until(lambda: any(r["event"] == "reload" and "127.0.0.2/32" in r["what"]
                                      for r in _log(log_file)), 10), _log(log_file)
        assert reply_of(ftp, _port_cmd(peer.getsockname())).startswith("200")  # the running session too
        assert "(127,0,0,3," in reply_of(ftp, "PASV")
        conf.write_text(head + 'third_party_peers = ["0.0.0.0/0"]\n')
        os.kill(srv.proc.pid, signal.SIGHUP)
        assert wait_until(lambda: any(r.get("level") == "error" and "kept the old third-party peers" in r["message"]
                                      for r in _log(log_file)), 10), _log(log_file)
        assert reply_of(ftp, _port_cmd(peer.getsockname())).startswith("200")
        assert "(127,0,0,3," in reply_of(ftp, "PASV")  # nothing of the bad file applied
        ftp.quit()
    finally:
        srv.stop()
        peer.close()


def test_a_reload_keeps_what_the_command_line_set(tmp_path):
    from drsftp.server.app import ServerConfig, build_server, reload

    conf = tmp_path / "drsftp.toml"
    conf.write_text('root = "srv"\nthird_party_peers = "10.0.0.0/8"\nmasquerade_address = "10.1.2.3"\n')
    (tmp_path / "srv").mkdir()
    cfg = ServerConfig(root=str(tmp_path / "srv"), port=0, anonymous_read=True, config_file=str(conf),
                       third_party_peers="192.0.2.7", command_line_keys=frozenset({"third_party_peers"}))
    server = build_server(cfg)
    try:
        assert "192.0.2.7/32" in reload(server, cfg)[0]
        assert list(map(str, server.handler.third_party_peers.networks)) == ["192.0.2.7/32"]
        assert server.handler.masquerade_address == "10.1.2.3"  # the file's: the command line left it
    finally:
        server.close_all()


def test_done_when_tls_get_from_a_configured_server_is_identical_and_clear_text_is_refused(tmp_path, certs):
    root = tmp_path / "srv"
    root.mkdir()
    src = make_file(root / "data.bin", 24 << 20, seed=11)
    conf = tmp_path / "drsftp.toml"
    conf.write_text(f'root = "srv"\nport = 0\nuser = "{USER}"\npassword = "{PASSWORD}"\n'
                    f'tls_cert = "{certs.self_signed}"\nrequire_tls = true\n')
    srv = _serve_config(conf)
    try:
        out = tmp_path / "got.bin"
        r = drsftp("get", "--tls", "--ca-file", str(certs.self_signed_cert), srv.url("data.bin"), str(out))
        assert r.returncode == 0, r.stderr
        assert sha256_file(out) == sha256_file(src)
        r = drsftp("get", srv.url("data.bin"), str(tmp_path / "plain.bin"))
        assert r.returncode == 1
        assert r.stderr.strip() == (f"drsftp: error: login refused for '{USER}':"
                                    " 550 SSL/TLS required on the control channel.")
        assert not (tmp_path / "plain.bin").exists()
    finally:
        srv.stop()


def test_contrib_example_config_and_unit_are_valid(tmp_path):
    values = server_config.load(str(REPO / "contrib" / "drsftp.toml"))
    assert values["require_tls"] is True and values["root"] == "/srv/drsftp"
    unit = (REPO / "contrib" / "drsftp.service").read_text()
    for line in ("User=drsftp", "NoNewPrivileges=yes", "ProtectSystem=strict", "ReadWritePaths=/srv/drsftp",
                 "Restart=on-failure", "PrivateTmp=yes", "ExecReload=/bin/kill -HUP $MAINPID",
                 "ExecStart=/usr/local/bin/drsftp serve --config /etc/drsftp/drsftp.toml"):
        assert line in unit.splitlines(), line
    analyze = shutil.which("systemd-analyze")
    assert analyze, "systemd-analyze (systemd) checks the unit"
    check = tmp_path / "drsftp.service"  # the same unit with a command that exists here
    check.write_text(unit.replace("ExecStart=/usr/local/bin/drsftp", "ExecStart=/bin/true"))
    r = subprocess.run([analyze, "verify", str(check)], check=False, capture_output=True, text=True, timeout=60)
    assert r.returncode == 0 and not r.stderr.strip(), r.stderr


def test_log_lines_are_one_line_whatever_the_file_name():
    from drsftp.server.ops import translog

    rec = translog.transfer_record(0.0, "192.0.2.1:5", "u", "put", '/a\nb "c".bin', 10, 0.5, 1, False, True, False)
    text = translog.format_text(rec)
    assert "\n" not in text and r'path="/a\nb \"c\".bin"' in text
    assert text.startswith("1970-01-01T00:00:00.000Z transfer peer=192.0.2.1:5 user=u direction=put ")
    assert text.endswith(" bytes=10 seconds=0.5 rate=0.0Mbit/s streams=1 drs_peer=no complete=yes tls=no")
    assert json.loads(translog.format_json(rec))["path"] == '/a\nb "c".bin'


def test_a_verified_password_is_remembered_and_a_wrong_one_never(tmp_path, monkeypatch):
    """scrypt runs on the server's event loop (~50 ms): a password that
    verified once is checked by an HMAC next time; a wrong one always pays
    scrypt and is refused; a new authorizer (a reload) remembers nothing."""
    from pyftpdlib.authorizers import AuthenticationFailed

    from drsftp.server.ops import users

    calls = []
    real = users.check_password
    monkeypatch.setattr(users, "check_password", lambda stored, pw: calls.append(pw) or real(stored, pw))
    entry = users.UserEntry("alice", users.hash_password("s3cret", n=2**10), str(tmp_path), "elr")
    auth = users.HashedAuthorizer()
    auth.add_hashed_user(entry)
    for _ in range(3):
        auth.validate_authentication("alice", "s3cret", None)
    assert calls == ["s3cret"]
    for _ in range(2):
        with pytest.raises(AuthenticationFailed):
            auth.validate_authentication("alice", "s3cret ", None)
    assert calls == ["s3cret", "s3cret ", "s3cret "]
    fresh = users.HashedAuthorizer()
    fresh.add_hashed_user(entry)
    fresh.validate_authentication("alice", "s3cret", None)
    assert calls[-1] == "s3cret" and len(calls) == 4


def test_logins_that_arrive_together_pay_one_scrypt(tmp_path, monkeypatch):
    """The HTTP side checks passwords in threads: eight logins with one
    password at once run scrypt once (the others wait and find it
    remembered); eight with a wrong one each pay it and are refused."""
    import threading

    from pyftpdlib.authorizers import AuthenticationFailed

    from drsftp.server.ops import users

    calls = []
    real = users.check_password
    release = threading.Event()

    def slow(stored, pw):
        calls.append(pw)
        release.wait(10)  # (every thread reaches the gate before the first scrypt ends)
        return real(stored, pw)

    monkeypatch.setattr(users, "check_password", slow)
    auth = users.HashedAuthorizer()
    auth.add_hashed_user(users.UserEntry("alice", users.hash_password("s3cret", n=2**10), str(tmp_path), "elr"))
    outcomes = []

    def login(pw):
        try:
            auth.validate_authentication("alice", pw, None)
            outcomes.append((pw, True))
        except AuthenticationFailed:
            outcomes.append((pw, False))

    for pw in ("s3cret", "wrong"):
        threads = [threading.Thread(target=login, args=(pw,)) for _ in range(8)]
        for t in threads:
            t.start()
        assert wait_until(lambda: sum(n for _, n in auth._gates.values()) == 8)  # (all at the gate)
        release.set()
        for t in threads:
            t.join(30)
        release.clear()
    assert calls == ["s3cret"] + ["wrong"] * 8
    assert sorted(outcomes) == [("s3cret", True)] * 8 + [("wrong", False)] * 8
    assert auth._gates == {}
