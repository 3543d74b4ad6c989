"""Users' homes never serve the server's own secrets (docs/SECURITY.md "Homes").

A relative home in a users file resolves against --root, never against the
users file's directory; `drsftp serve` refuses to start, and a reload keeps
the old users, when a home would serve the users file, the TLS key or the
config file."""

import ftplib
import io
import os
import signal
import subprocess

import pytest
from conftest import PY, ServerProcess, drsftp, wait_until
from tlscerts import make_certs

from drsftp.server.ops.users import UserEntry, exposed_secret, hash_password, read_users, write_user


def _passwd(users, name, *extra):
    r = subprocess.run([PY, "-m", "drsftp", "passwd", str(users), name, "--password-stdin", *extra],
                       input=f"{name}-password\n", capture_output=True, text=True, timeout=30, check=False)
    assert r.returncode == 0, r.stderr


def _login(port, user):
    ftp = ftplib.FTP()
    ftp.connect("127.0.0.1", port, timeout=10)
    ftp.login(user, f"{user}-password")
    return ftp


@pytest.fixture(scope="module")
def certs(tmp_path_factory):
    return make_certs(tmp_path_factory.mktemp("certs"))


def test_a_default_passwd_user_sees_only_the_root_not_the_users_files_directory(tmp_path, certs):
    etc, root = tmp_path / "etc", tmp_path / "srv"
    etc.mkdir()
    root.mkdir()
    (root / "public.txt").write_text("hello")
    key = etc / "key.pem"
    key.write_bytes(certs.good.read_bytes())
    users = etc / "users.txt"
    _passwd(users, "carol")  # no --home: "." is the server's --root
    srv = ServerProcess(root, cmd=[PY, "-m", "drsftp", "serve", "--root", str(root), "--port", "0",
                                   "--users", str(users), "--tls-cert", str(key)])
    try:
        ftp = _login(srv.port, "carol")
        assert ftp.nlst() == ["public.txt"]
        buf = io.BytesIO()
        ftp.retrbinary("RETR public.txt", buf.write)
        assert buf.getvalue() == b"hello"
        for path in ("../etc/users.txt", "/../etc/key.pem", "users.txt", "key.pem"):
            with pytest.raises(ftplib.error_perm, match="550"):
                ftp.retrbinary(f"RETR {path}", io.BytesIO().write)
        ftp.quit()
    finally:
        srv.stop()


def test_relative_homes_resolve_against_the_root(tmp_path):
    users, root = tmp_path / "conf" / "users", tmp_path / "srv"
    users.parent.mkdir()
    write_user(str(users), UserEntry("a", hash_password("a-password", n=2**10), ".", "elr"))
    write_user(str(users), UserEntry("b", hash_password("b-password", n=2**10), "b/inner", "elr"))
    write_user(str(users), UserEntry("c", hash_password("c-password", n=2**10), "/abs/home", "elr"))
    homes = {u.name: u.home for u in read_users(str(users), str(root))}
    assert homes == {"a": str(root), "b": str(root / "b" / "inner"), "c": "/abs/home"}


def test_exposed_secret_sees_files_at_or_below_a_home_through_symlinks(tmp_path):
    home, other = tmp_path / "home", tmp_path / "other"
    (home / "sub").mkdir(parents=True)
    other.mkdir()
    (other / "key.pem").write_text("k")
    os.symlink(other, home / "sub" / "link")
    assert exposed_secret({"u": str(home)}, {"the TLS key": str(other / "key.pem")}) is None
    # a home that is a symlink to the secret's directory
    assert "the TLS key" in exposed_secret({"u": str(home / "sub" / "link")}, {"the TLS key": str(other / "key.pem")})
    assert "the users file" in exposed_secret({"u": str(tmp_path)}, {"the users file": str(other / "key.pem")})
    # a sibling whose name starts like the home's is not inside it
    assert exposed_secret({"u": str(tmp_path / "oth")}, {"the TLS key": str(other / "key.pem")}) is None


@pytest.mark.parametrize("secret", ["users", "key", "config"])
def test_serve_refuses_a_home_that_would_serve_a_secret(tmp_path, certs, secret):
    root = tmp_path / "srv"
    (root / "alice").mkdir(parents=True)
    inside = root / "alice"  # alice's home
    users = (inside if secret == "users" else tmp_path) / "users"
    write_user(str(users), UserEntry("alice", hash_password("alice-password", n=2**10), "alice", "elr"))
    key = (inside if secret == "key" else tmp_path) / "key.pem"
    key.write_bytes(certs.good.read_bytes())
    conf = (inside if secret == "config" else tmp_path) / "drsftp.toml"
    conf.write_text(f'root = "{root}"\nport = 0\nusers = "{users}"\ntls_cert = "{key}"\n')
    r = drsftp("serve", "--config", str(conf), timeout=60)
    what = {"users": "the users file", "key": "the TLS key", "config": "the config file"}[secret]
    assert r.returncode == 2, r.stdout
    assert "listening" not in r.stdout
    err = r.stderr.strip()
    assert len(err.splitlines()) == 1 and what in err and "Traceback" not in err, err


def test_a_reload_that_would_expose_the_users_file_keeps_the_old_users(tmp_path):
    root, etc = tmp_path / "srv", tmp_path / "etc"
    root.mkdir()
    etc.mkdir()
    users = etc / "users"
    _passwd(users, "alice")
    log = tmp_path / "t.log"
    srv = ServerProcess(root, cmd=[PY, "-m", "drsftp", "serve", "--root", str(root), "--port", "0",
                                   "--users", str(users), "--log-file", str(log)])
    try:
        _passwd(users, "mallory", "--home", str(etc))
        os.kill(srv.proc.pid, signal.SIGHUP)
        assert wait_until(lambda: "kept the old users" in srv.stderr_text() + log.read_text(), 10)
        _login(srv.port, "alice").quit()
        with pytest.raises(ftplib.error_perm, match="530"):
            _login(srv.port, "mallory")
    finally:
        srv.stop()


def test_serve_refuses_a_tls_key_inside_the_root_of_user_or_anonymous(tmp_path, certs):
    root = tmp_path / "srv"
    root.mkdir()
    key = root / "server.pem"  # certificate and key in one file, served to --user and anonymous
    key.write_bytes(certs.good.read_bytes())
    for who in (["--user", "u", "--password", "u-password"], ["--anonymous-read"]):
        r = drsftp("serve", "--root", str(root), "--port", "0", "--tls-cert", str(key), *who, timeout=60)
        assert r.returncode == 2 and "the TLS key" in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr
