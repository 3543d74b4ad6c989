"""gfal2, the library FTS3 and Rucio move data with, as a peer of
`drsftp serve`: gfal-ls, gfal-copy (also -n 4, -r, third party), gfal-sum,
gfal-mkdir and gfal-rm give against drsftp what they give against
globus-gridftp-server (docs/PROTOCOL.md#mlst-facts).  A missing gfal2 or
GridFTP fails the tests."""

import contextlib
import ftplib
import hashlib
import os
import shutil
import stat
import subprocess
import zlib
from pathlib import Path

import pytest
from conftest import PASSWORD, USER, make_file, running_server, sha256_file
from test_parallel_peers import gridftp_server

from drsftp.server.ftp.facts import respell_facts

GFAL_TOOLS = ("gfal-ls", "gfal-copy", "gfal-sum", "gfal-mkdir", "gfal-rm")
# gfal2 ignores a user in ftp:// URLs; it takes these (docs/PROTOCOL.md#mlst-facts)
AS_USER = ("-D", f"FTP:USER={USER}", "-D", f"FTP:PASSWORD={PASSWORD}")
ANONYMOUS = ()
MTIME = 1_700_000_000  # every entry's, on both servers: gfal-ls prints it
TREE = {"a.bin": 300_001, "empty.dat": 0, "sub/b.txt": 1234}


def gfal(tool, *args, timeout=60):
    """Run one gfal2 command line tool as its users do (the scripts find
    their Python with GFAL_PYTHONBIN)."""
    path = shutil.which(tool)
    assert path, f"{tool} is missing (Debian: gfal2-util-scripts gfal2-plugin-gridftp gfal2-plugin-file)"
    env = {**os.environ, "GFAL_PYTHONBIN": "/usr/bin/python3"}
    return subprocess.run([path, *args], capture_output=True, text=True, timeout=timeout, env=env,
                          check=False)


def ok(result):
    assert result.returncode == 0, f"exit {result.returncode}: {result.stdout}{result.stderr}"
    return result.stdout


def make_tree(root):
    """The served tree: a file, an empty one, a subdirectory with a file,
    and w/, writable by GridFTP's anonymous user (nobody), for the changes."""
    os.makedirs(os.path.join(root, "sub"))
    os.makedirs(os.path.join(root, "w"))
    for i, (name, size) in enumerate(TREE.items()):
        make_file(os.path.join(root, name), size, seed=i)
        os.chmod(os.path.join(root, name), 0o644)
    os.chmod(os.path.join(root, "sub"), 0o755)
    os.chmod(os.path.join(root, "w"), 0o777)
    for name in (*TREE, "sub", "w"):
        os.utime(os.path.join(root, name), (MTIME, MTIME))


class Peer:
    """A server gfal2 talks to on 127.0.0.1:``port``: ``url(path)`` names
    ``path`` under ``root``; ``creds``, the gfal options that log in."""

    def __init__(self, port, path, root, creds):
        self.port, self.root, self.creds = port, root, creds
        self.base = f"ftp://127.0.0.1:{port}{path}"

    def url(self, path=""):
        return f"{self.base}/{path}"

    def local(self, path=""):
        return os.path.join(self.root, path)


@pytest.fixture(scope="module")
def peers(tmp_path_factory):
    """drsftp serve (a user and --anonymous-read) and globus-gridftp-server
    (anonymous, as nobody), each serving the same tree."""
    drs_root = tmp_path_factory.mktemp("gfal") / "srv"
    make_tree(drs_root)
    with contextlib.ExitStack() as stack:
        srv = stack.enter_context(running_server(drs_root, "--anonymous-read"))
        gdir, gport = stack.enter_context(gridftp_server())
        groot = os.path.join(gdir, "srv")
        os.mkdir(groot)
        os.chmod(groot, 0o755)
        make_tree(groot)
        yield {"drsftp": Peer(srv.port, "", str(drs_root), AS_USER),
               "gridftp": Peer(gport, groot, groot, ANONYMOUS)}


def test_gfal2_is_installed():
    """./run installs gfal2 (Debian packages); these tests need it."""
    for tool in GFAL_TOOLS:
        assert shutil.which(tool), f"{tool} is missing"


# -- listings -------------------------------------------------------------------


def ls_l(peer, path, *creds):
    """``gfal-ls -l``: {name: (mode string, size, date)}; uid/gid left out
    (GridFTP sends UNIX.uid, drsftp does not by default)."""
    out = {}
    for line in ok(gfal("gfal-ls", "-l", *creds, peer.url(path))).splitlines():
        mode, _links, _uid, _gid, size, mon, day, hm_or_year, name = line.split(None, 8)
        out[name.strip()] = (mode, int(size), f"{mon} {day} {hm_or_year}")
    return out


def local_listing(directory):
    """What a listing of ``directory`` must say: each entry's mode and size."""
    return {e.name: (stat.filemode(e.stat().st_mode), e.stat().st_size) for e in os.scandir(directory)}


def without_dates(listing):
    return {name: (mode, size) for name, (mode, size, _date) in listing.items()}


@pytest.mark.parametrize("server", ["drsftp", "gridftp"])
def test_ls_l_lists_a_directorys_entries_with_types_modes_and_sizes(peers, server):
    """``gfal-ls -l`` of a directory prints its entries, each a directory
    (``d``) or a file (``-``) with its mode and size; not the directory
    itself as a file (what a listing without UNIX.mode gives gfal2)."""
    peer = peers[server]
    for creds in (peer.creds, ANONYMOUS):
        assert without_dates(ls_l(peer, "", *creds)) == local_listing(peer.root)
        assert without_dates(ls_l(peer, "sub", *creds)) == local_listing(peer.local("sub"))


def test_ls_l_gives_against_drsftp_what_it_gives_against_gridftp(peers):
    """The same tree lists alike, to the date; a directory's size and
    date are its file system's (w/ changes under the other tests)."""
    drs, grid = (ls_l(peers[name], "") for name in ("drsftp", "gridftp"))
    assert drs.keys() == grid.keys() == {"a.bin", "empty.dat", "sub", "w"}
    for name in ("a.bin", "empty.dat"):
        assert drs[name] == grid[name]
    assert drs["sub"][0] == grid["sub"][0] == "drwxr-xr-x"
    assert drs["w"][0] == grid["w"][0] == "drwxrwxrwx"


@pytest.mark.parametrize("server", ["drsftp", "gridftp"])
def test_ls_l_of_a_file_prints_that_file(peers, server):
    peer = peers[server]
    out = ok(gfal("gfal-ls", "-l", peer.url("a.bin"))).split()
    assert out[0] == "-rw-r--r--" and int(out[4]) == TREE["a.bin"] and out[-1] == peer.url("a.bin")


# -- copies ---------------------------------------------------------------------


@pytest.mark.parametrize("server", ["drsftp", "gridftp"])
@pytest.mark.parametrize("streams", [(), ("-n", "4")], ids=["one", "n4"])
def test_copy_up_down_and_third_party_byte_identical(peers, server, streams, tmp_path):
    """Upload, download (also anonymous) and a third-party copy on the
    server, with and without ``-n 4`` (gfal2 keeps ftp:// in stream mode)."""
    peer = peers[server]
    tag = f"{server}-{len(streams)}"
    src = make_file(tmp_path / "src.bin", 2_000_003, seed=7)
    ok(gfal("gfal-copy", *peer.creds, *streams, f"file://{src}", peer.url(f"w/up-{tag}.bin")))
    assert sha256_file(peer.local(f"w/up-{tag}.bin")) == sha256_file(src)
    for creds, name in ((peer.creds, "down"), (ANONYMOUS, "anon")):
        ok(gfal("gfal-copy", *creds, *streams, peer.url(f"w/up-{tag}.bin"), f"file://{tmp_path}/{name}.bin"))
        assert sha256_file(tmp_path / f"{name}.bin") == sha256_file(src)
    ok(gfal("gfal-copy", *peer.creds, *streams, peer.url("a.bin"), peer.url(f"w/tp-{tag}.bin")))
    assert sha256_file(peer.local(f"w/tp-{tag}.bin")) == sha256_file(peer.local("a.bin"))


@pytest.mark.parametrize("server", ["drsftp", "gridftp"])
def test_copy_into_a_directory_and_copy_r(peers, server, tmp_path):
    """A destination that is a directory gets the file under its own name;
    ``-r`` copies a directory's files (gfal2 must see a directory there)."""
    peer = peers[server]
    src = make_file(tmp_path / f"into-{server}.bin", 4096, seed=3)
    ok(gfal("gfal-copy", *peer.creds, f"file://{src}", peer.url("w/")))
    assert sha256_file(peer.local(f"w/into-{server}.bin")) == sha256_file(src)
    ok(gfal("gfal-copy", "-r", *peer.creds, peer.url("sub"), f"file://{tmp_path}/subcopy"))
    assert os.listdir(tmp_path / "subcopy") == ["b.txt"]
    assert sha256_file(tmp_path / "subcopy" / "b.txt") == sha256_file(peer.local("sub/b.txt"))


# -- checksums ------------------------------------------------------------------


@pytest.mark.parametrize("server", ["drsftp", "gridftp"])
def test_sum_adler32_and_md5_match_the_local_values(peers, server):
    peer = peers[server]
    data = Path(peer.local("a.bin")).read_bytes()
    expected = {"ADLER32": f"{zlib.adler32(data):08x}", "MD5": hashlib.md5(data).hexdigest()}
    for algorithm, value in expected.items():
        url, got = ok(gfal("gfal-sum", peer.url("a.bin"), algorithm)).split()
        assert (url, got) == (peer.url("a.bin"), value), algorithm


# -- changes --------------------------------------------------------------------


@pytest.mark.parametrize("server", ["drsftp", "gridftp"])
def test_mkdir_and_rm(peers, server, tmp_path):
    """gfal-mkdir (also -p), gfal-rm of a file, gfal-rm -r of a tree."""
    peer = peers[server]
    ok(gfal("gfal-mkdir", *peer.creds, peer.url("w/d1")))
    ok(gfal("gfal-mkdir", "-p", *peer.creds, peer.url("w/d2/e/f")))
    assert os.path.isdir(peer.local("w/d1")) and os.path.isdir(peer.local("w/d2/e/f"))
    src = make_file(tmp_path / "x.bin", 1000, seed=5)
    for target in ("w/d1/x.bin", "w/d2/e/x.bin"):
        ok(gfal("gfal-copy", *peer.creds, f"file://{src}", peer.url(target)))
    ok(gfal("gfal-rm", *peer.creds, peer.url("w/d1/x.bin")))
    assert os.listdir(peer.local("w/d1")) == []
    ok(gfal("gfal-rm", "-r", *peer.creds, peer.url("w/d2")))
    assert not os.path.lexists(peer.local("w/d2"))


def test_anonymous_cannot_change_drsftp(peers):
    """--anonymous-read is read only: gfal-mkdir and gfal-rm fail with the
    server's 550 and change nothing."""
    peer = peers["drsftp"]
    before = sorted(os.listdir(peer.root))
    for args in (("gfal-mkdir", peer.url("w/anon")), ("gfal-rm", peer.url("a.bin")),
                 ("gfal-rm", "-r", peer.url("sub"))):
        result = gfal(*args)
        assert result.returncode != 0 and "550" in result.stdout + result.stderr, args
    assert sorted(os.listdir(peer.root)) == before
    assert os.listdir(peer.local("sub")) == ["b.txt"]


# -- the facts gfal2 reads ------------------------------------------------------


def test_mlst_and_mlsd_carry_the_mode_as_gridftp_spells_it(peers):
    """Default facts: UNIX.mode in plain octal beside the lower-case
    standard facts; OPTS MLST (RFC 3659 sec. 7.9) still picks the facts."""
    peer = peers["drsftp"]
    os.chmod(peer.local("empty.dat"), 0o640)
    try:
        with ftplib.FTP() as ftp:
            ftp.connect("127.0.0.1", peer.port, timeout=30)
            ftp.login(USER, PASSWORD)
            assert "type*;perm*;size*;modify*;unique*;unix.mode*;unix.uid;unix.gid;" in ftp.sendcmd("FEAT")
            assert ftp.sendcmd("MLST /empty.dat").splitlines()[1].startswith(
                " modify=20231114221320;perm=radfwMT;size=0;type=file;unique=")
            assert "UNIX.mode=0640; /empty.dat" in ftp.sendcmd("MLST /empty.dat")
            assert ";type=dir;" in ftp.sendcmd("MLST /sub") and "UNIX.mode=0755; /sub" in ftp.sendcmd("MLST /sub")
            lines = []
            ftp.retrlines("MLSD /", lines.append)
            modes = {line.split(" ", 1)[1]: line.split("UNIX.mode=")[1].split(";")[0] for line in lines}
            assert modes == {"a.bin": "0644", "empty.dat": "0640", "sub": "0755", "w": "0777"}
            ftp.sendcmd("OPTS MLST type;size;")
            assert ftp.sendcmd("MLST /a.bin").splitlines()[1] == " size=300001;type=file; /a.bin"
            ftp.sendcmd("OPTS MLST type;unix.mode;unix.uid;unix.gid;")
            facts = ftp.sendcmd("MLST /a.bin").splitlines()[1]
            st = os.stat(peer.local("a.bin"))
            assert facts == f" type=file;UNIX.gid={st.st_gid};UNIX.mode=0644;UNIX.uid={st.st_uid}; /a.bin"
    finally:
        os.chmod(peer.local("empty.dat"), 0o644)


def test_respell_facts():
    assert respell_facts("size=1;unix.mode=0o7;unix.uid=0;") == "size=1;UNIX.mode=0007;UNIX.uid=0;"
    assert respell_facts("type=dir;unix.mode=0o755;") == "type=dir;UNIX.mode=0755;"
    assert respell_facts("type=file;Unique=ab;") == "type=file;Unique=ab;"
