"""Faults and load on the emulated WAN (root), and local storage faults.

Every loop here is bounded in count and time; every process is ended by PID.
"""

import contextlib
import os
import subprocess
import time

import psutil
import pytest
from conftest import (
    PASSWORD,
    PY,
    USER,
    drsftp,
    ftp_session,
    make_file,
    running_server,
    sha256_file,
    start_stalled_retr,
    wait_until,
)

from drsftp.netem.link import Link, wait_for_port

PORT = 2121


def _serve(link, root, *extra):
    proc = link.popen("server", [PY, "-m", "drsftp", "serve", "--root", str(root), "--host", link.server_addr,
                                 "--port", str(PORT), "--user", USER, "--password", PASSWORD, *extra],
                      stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    wait_for_port(link, "server", PORT, timeout=15)
    return proc


def _client(link, *args):
    return link.popen("client", [PY, "-m", "drsftp", *args, "--progress", "never"],
                      stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _url(link, name):
    return f"ftp://{USER}:{PASSWORD}@{link.server_addr}:{PORT}/{name}"


def _transfer(link, direction, src, root, tmp_path, *flags):
    """Start a get of root/f.bin or a put of src as root/up.bin; returns
    (client, final path, the partial file to watch)."""
    if direction == "get":
        dest = tmp_path / "f.bin.out"
        return _client(link, "get", _url(link, "f.bin"), str(dest), *flags), dest, str(dest) + ".part"
    dest = root / "up.bin"
    return _client(link, "put", str(src), _url(link, "up.bin"), *flags), dest, str(root / ".up.bin.part")


@contextlib.contextmanager
def _fault_case(tmp_path, direction, seed, *flags):
    """A 40 MiB get or put over a 100 Mbit/s, 20 ms link, 8 MiB into it:
    yields (link, server process, client, final path, source path)."""
    root = tmp_path / "srv"
    root.mkdir()
    src = make_file((root if direction == "get" else tmp_path) / "f.bin", 40 << 20, seed=seed)
    with Link(rtt=0.02, rate=100e6) as link:
        server = _serve(link, root)
        c, dest, watch = _transfer(link, direction, src, root, tmp_path, *flags)
        assert _moved(watch, 8 << 20)
        yield link, server, c, dest, src, root
        assert not os.path.exists(watch)  # the partial file became the final one


def _completes(c, dest, src):
    """The client ends well and the bytes are identical; returns its stderr."""
    _, err = c.communicate(timeout=120)
    assert c.returncode == 0, err
    assert sha256_file(dest) == sha256_file(src)
    return err


def _kill_data_connections(link):
    """ss -K: destroy the server's established sockets except the control ones."""
    r = link.run("server", ["ss", "-K", "-tn", "state", "established", "(", "sport", "!=", f":{PORT}", ")"],
                 timeout=10)
    return r.stdout.count("\n") - 1


def _moved(path, at_least):
    return wait_until(lambda: os.path.exists(path) and os.path.getsize(path) >= at_least, timeout=30)


@pytest.mark.root
@pytest.mark.parametrize("direction", ["get", "put"])
def test_retries_survive_a_killed_data_connection(tmp_path, direction):
    with _fault_case(tmp_path, direction, 50, "--retries", "5") as (link, _, c, dest, src, _root):
        assert _kill_data_connections(link) >= 1
        assert "retry 1/5" in _completes(c, dest, src)


@pytest.mark.root
@pytest.mark.parametrize("direction", ["get", "put"])
def test_retries_survive_a_server_restart(tmp_path, direction):
    with _fault_case(tmp_path, direction, 51, "--retries", "6", "--verify") as (link, server, c, dest, src, root):
        server.kill()  # a crash, mid-transfer
        server.wait(10)
        assert not os.path.exists(dest)  # nothing presented as complete
        _serve(link, root)
        _completes(c, dest, src)


@pytest.mark.root
@pytest.mark.parametrize("direction", ["get", "put"])
def test_a_link_flap_does_not_lose_data(tmp_path, direction):
    """The server's link goes down for 3 s mid-transfer: not a byte reaches
    the partial file meanwhile (the fault is real), and the transfer then
    completes intact (TCP rides it out, or the client retries)."""
    with _fault_case(tmp_path, direction, 52, "--retries", "3") as (link, _, c, dest, src, root):
        watch = str(dest) + ".part" if direction == "get" else str(root / ".up.bin.part")
        dev = link.names.dev("server")
        r = link.run("server", ["ip", "link", "set", "dev", dev, "down"], timeout=10)
        assert r.returncode == 0, r.stderr
        time.sleep(0.5)  # what was in flight and buffered lands
        frozen = os.path.getsize(watch)
        time.sleep(2.5)
        assert os.path.getsize(watch) == frozen < 40 << 20  # stalled mid-file by the fault
        r = link.run("server", ["ip", "link", "set", "dev", dev, "up"], timeout=10)
        assert r.returncode == 0, r.stderr
        link.run("server", ["ip", "addr", "replace", f"{link.server_addr}/32", "peer", f"{link.client_addr}/32",
                            "dev", dev], timeout=10, check=True)
        _completes(c, dest, src)


@pytest.mark.root
def test_32_concurrent_clients_budget_and_no_leaks(tmp_path):
    from drsftp.bench.common.sampler import Sampler

    root = tmp_path / "srv"
    root.mkdir()
    local = tmp_path / "local"
    local.mkdir()
    n, size, budget = 32, 4 << 20, 16 << 20
    for i in range(n // 2):
        make_file(root / f"g{i}.bin", size, seed=100 + i)
        make_file(local / f"p{i}.bin", size, seed=200 + i)
    with Link(rtt=0.01, rate=400e6) as link:
        server = _serve(link, root, "--buffer-budget", str(budget))
        sp = psutil.Process(server.pid)
        fds0, threads0 = sp.num_fds(), sp.num_threads()
        clients = []
        with Sampler(link.command("server", []), PORT, interval=0.05) as sampler:
            for i in range(n // 2):
                clients.append(_client(link, "get", _url(link, f"g{i}.bin"), str(local / f"g{i}.bin")))
                clients.append(_client(link, "put", str(local / f"p{i}.bin"), _url(link, f"p{i}.bin")))
            deadline = time.monotonic() + 240
            for c in clients:
                c.communicate(timeout=max(1, deadline - time.monotonic()))
        assert all(c.returncode == 0 for c in clients), [c.stderr for c in clients if c.returncode]
        for i in range(n // 2):
            assert sha256_file(local / f"g{i}.bin") == sha256_file(root / f"g{i}.bin")
            assert sha256_file(root / f"p{i}.bin") == sha256_file(local / f"p{i}.bin")
        # total socket-buffer memory of the data connections, as the kernel accounts it
        totals = [sum(s.get("sk_rb", 0) + s.get("sk_tb", 0) for s in socks) for _, socks in sampler.samples]
        assert totals and max(len(socks) for _, socks in sampler.samples) >= 8  # they overlapped
        slack = 2 * 256 * 1024  # one flow's default buffers before its first tick
        peak = max(range(len(totals)), key=totals.__getitem__)
        assert max(totals) <= budget + slack, (max(totals), budget, _breakdown(sampler.samples[peak]))
        assert wait_until(lambda: sp.num_fds() == fds0, timeout=15), (sp.num_fds(), fds0)
        assert sp.num_threads() == threads0


def _breakdown(sample) -> str:
    """The peak sample's sockets: which flows held the memory."""
    t, socks = sample
    rows = sorted(socks, key=lambda s: -(s.get("sk_rb", 0) + s.get("sk_tb", 0)))
    return f"t={t:.2f}s " + "; ".join(
        f"{s['local']} rb={s.get('sk_rb', 0)} tb={s.get('sk_tb', 0)} rcvd={s.get('bytes_received', 0)}"
        f" acked={s.get('bytes_acked', 0)}" for s in rows)


# -- local storage faults (loopback) -----------------------------------------------
def test_interrupted_put_never_appears_complete_and_resumes(tmp_path):
    root = tmp_path / "srv"
    root.mkdir()
    src = make_file(tmp_path / "u.bin", 200 << 20, seed=53)
    with running_server(root, "--tuning", "fixed:8k") as srv:
        r = drsftp("put", str(src), srv.url("u.bin"), "--tuning", "fixed:8k", "--max-time", "0.2")
        assert r.returncode == 28, r.stderr
        assert not os.path.exists(root / "u.bin")
        partial = os.path.getsize(root / ".u.bin.part")
        assert 0 < partial < 200 << 20
        r = drsftp("put", str(src), srv.url("u.bin"), "--continue", "--json", str(tmp_path / "j"))
        assert r.returncode == 0, r.stderr
        assert sha256_file(root / "u.bin") == sha256_file(src)
        assert not os.path.exists(root / ".u.bin.part")


def test_a_file_shrinking_under_retr_gets_451(tmp_path):
    import ftplib

    root = tmp_path / "srv"
    root.mkdir()
    path = make_file(root / "s.bin", 32 << 20, seed=54)
    with running_server(root) as srv:
        ftp = ftp_session(srv.port)
        data, _ = start_stalled_retr(ftp, "s.bin")
        os.truncate(path, 4 << 20)
        while data.recv(1 << 20):
            pass
        data.close()
        with pytest.raises(ftplib.error_temp, match="451"):
            ftp.voidresp()
        ftp.quit()


@pytest.mark.root
def test_disk_full_gives_452_and_no_complete_file(tmp_path):
    mnt = tmp_path / "small"
    mnt.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=4m", "drs-tmpfs", str(mnt)], check=True, timeout=10)
    try:
        src = make_file(tmp_path / "big.bin", 16 << 20, seed=55)
        with running_server(mnt) as srv:
            r = drsftp("put", str(src), srv.url("big.bin"))
            assert r.returncode == 1 and "452" in r.stderr and "Traceback" not in r.stderr, r.stderr
            assert not os.path.exists(mnt / "big.bin")
            assert srv.proc.poll() is None
    finally:
        subprocess.run(["umount", str(mnt)], check=False, timeout=10)


def test_a_client_killed_mid_upload_leaves_no_complete_file(tmp_path):
    """Its kernel closes the data connection as if the file had ended; the
    size announced with ALLO keeps the server from taking it as complete."""
    root = tmp_path / "srv"
    root.mkdir()
    src = make_file(tmp_path / "k.bin", 200 << 20, seed=56)
    with running_server(root, "--tuning", "fixed:8k") as srv:
        c = subprocess.Popen([PY, "-m", "drsftp", "put", str(src), srv.url("k.bin"), "--tuning", "fixed:8k"],
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        assert _moved(str(root / ".k.bin.part"), 1 << 20)
        c.kill()
        c.wait(10)
        time.sleep(0.5)
        assert not os.path.exists(root / "k.bin")
        assert 0 < os.path.getsize(root / ".k.bin.part") < 200 << 20
        r = drsftp("put", str(src), srv.url("k.bin"), "--continue")
        assert r.returncode == 0, r.stderr
        assert sha256_file(root / "k.bin") == sha256_file(src)
