import atexit
import contextlib
import ftplib
import hashlib
import importlib.util
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

import pytest

PY = sys.executable
USER, PASSWORD = "tester", "s3cret-pw"
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def take_sigint_back() -> None:
    """Give the suite's process Python's Ctrl-C handler if it inherited SIGINT ignored.

    A suite started as a background job (``nohup ./run test &``) inherits SIGINT
    ignored, and exec keeps an ignored signal ignored (signal(7), "Execution of
    signal handlers"): every CLI child a test interrupts would finish its transfer
    and exit 0 instead of 130. A caught signal goes back to SIG_DFL at exec, so once
    this process catches SIGINT again every child starts with Ctrl-C live."""
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)


take_sigint_back()

# The client keeps resume records (copies, puts) under $XDG_STATE_HOME: the
# suite's children get one of the suite's own, removed when it ends, never the
# home's ~/.local/state (a record left there would outlive the run).
_STATE = tempfile.mkdtemp(prefix="drs-state-")
os.environ["XDG_STATE_HOME"] = _STATE
atexit.register(shutil.rmtree, _STATE, True)


def benchmark_module(name):
    """benchmarks/NAME.py loaded as module NAME (a script, not a package)."""
    spec = importlib.util.spec_from_file_location(name, os.path.join(ROOT, "benchmarks", f"{name}.py"))
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # (its dataclasses look their module up)
    spec.loader.exec_module(module)
    return module


def usage_exit(argv: list[str]) -> int:
    """drsftp's exit code for ``argv``: main's return, or the 2 argparse exits
    with for an option it does not know."""
    from drsftp.cli import main

    try:
        return main(argv)
    except SystemExit as exc:
        return exc.code if isinstance(exc.code, int) else 1


class Reached(Exception):
    """A bench run was started: what a valid command line does (args: what the run was given)."""


def stop_at_run(monkeypatch, tmp_path, *targets):
    """The bench in an empty ``tmp_path``, each (module, name) of ``targets``
    (its runs and links) replaced by raising Reached."""
    def reached(*args, **kw):
        raise Reached(*args)

    for module, name in targets:
        monkeypatch.setattr(module, name, reached)
    monkeypatch.chdir(tmp_path)
    return tmp_path


def sha256_file(path, offset=0):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        f.seek(offset)
        while chunk := f.read(1 << 20):
            h.update(chunk)
    return h.hexdigest()


def tcp_pair(nonblocking: str):
    """A connected loopback pair (sender, receiver); the end named by
    ``nonblocking`` ("sender" or "receiver") is made non-blocking, as
    drsftp's client holds its data socket."""
    lst = socket.create_server(("127.0.0.1", 0))
    sender = socket.create_connection(lst.getsockname())
    receiver, _ = lst.accept()
    lst.close()
    {"sender": sender, "receiver": receiver}[nonblocking].setblocking(False)
    return sender, receiver


def make_file(path, size, seed=0):
    """Deterministic pseudo-random content, fast: a 1 MiB random block
    with a per-MiB counter, so no two MiB are alike."""
    block = bytearray(hashlib.sha256(str(seed).encode()).digest() * (1 << 15))
    with open(path, "wb") as f:
        written, i = 0, 0
        while written < size:
            block[:8] = i.to_bytes(8, "little")
            n = min(len(block), size - written)
            f.write(block[:n])
            written += n
            i += 1
    return path


def drsftp(*args, timeout=300, **kw):
    return subprocess.run([PY, "-m", "drsftp", *args], check=False, capture_output=True, text=True,
                          timeout=timeout, **kw)


class ServerProcess:
    def __init__(self, root, *extra, cmd=None, ns_prefix=()):
        self.root = str(root)
        argv = cmd or [PY, "-m", "drsftp", "serve", "--root", self.root, "--port", "0",
                       "--user", USER, "--password", PASSWORD, *extra]
        # stderr to a file: the server logs every login and transfer there,
        # and a pipe nobody reads would fill and stall it
        self._stderr = tempfile.TemporaryFile("w+")  # noqa: SIM115 (held for the server's life; stop() closes it)
        self.proc = subprocess.Popen([*ns_prefix, *argv], stdout=subprocess.PIPE,
                                     stderr=self._stderr, text=True)
        line = self.proc.stdout.readline()
        m = re.search(r":(\d+) ", line)
        if not m:
            self.proc.terminate()
            self.proc.wait(10)
            err = self.stderr_text()
            self.stop()
            raise RuntimeError(f"server did not start: {line!r} {err}")
        self.port = int(m.group(1))

    def url(self, path, host="127.0.0.1"):
        return f"ftp://{USER}:{PASSWORD}@{host}:{self.port}/{path}"

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.proc.stdout.close()
        self._stderr.close()
        return self.proc.returncode

    def stderr_text(self) -> str:
        """What the server wrote to stderr so far."""
        self._stderr.seek(0)
        return self._stderr.read()


@contextlib.contextmanager
def in_thread(server, name: str, close_ioloop: bool = True):
    """An in-process pyftpdlib FTPServer run on its ioloop in a thread of its
    own: its port; the server (and, with ``close_ioloop``, its ioloop) closed
    after the block."""
    stop = threading.Event()

    def run():
        while not stop.is_set():
            server.ioloop.loop(timeout=0.05, blocking=False)

    thread = threading.Thread(target=run, name=name)
    thread.start()
    try:
        yield server.socket.getsockname()[1]
    finally:
        stop.set()
        thread.join(10)
        server.close_all()
        if close_ioloop:
            server.ioloop.close()


@contextlib.contextmanager
def running_server(root, *extra, **kw):
    """A `drsftp serve` process for the block, stopped (by PID) after it."""
    srv = ServerProcess(root, *extra, **kw)
    try:
        yield srv
    finally:
        srv.stop()


@pytest.fixture
def server(tmp_path):
    root = tmp_path / "srv"
    root.mkdir()
    with running_server(root) as srv:
        yield srv


@pytest.fixture(scope="session")
def big_file(tmp_path_factory):
    """256 MiB test file and its SHA-256 (made once per session)."""
    path = tmp_path_factory.mktemp("data") / "big.bin"
    make_file(path, 256 << 20, seed=1)
    return str(path), sha256_file(path)


def wait_until(pred, timeout=10.0, step=0.02):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if pred():
            return True
        time.sleep(step)
    return False


TCP_CLOSE_WAIT = "08"  # /proc/net/tcp's state: the peer's FIN came, this end not closed


def tcp_entry(local, remote):
    """The IPv4 TCP socket from ``local`` to ``remote`` ((host, port) each)
    on this host, as /proc/net/tcp shows it: (state, bytes not yet read by
    its owner), or None."""
    def hexaddr(addr):
        return f"{int.from_bytes(socket.inet_aton(addr[0]), 'little'):08X}:{addr[1]:04X}"

    want = (hexaddr(local), hexaddr(remote))
    with open("/proc/net/tcp") as f:
        for line in f.readlines()[1:]:
            fields = line.split()
            if (fields[1], fields[2]) == want:
                return fields[3], int(fields[4].split(":")[1], 16)
    return None


def link_file(src, dst_dir, name=None):
    dst = os.path.join(str(dst_dir), name or os.path.basename(src))
    try:
        os.link(src, dst)
    except OSError:
        import shutil

        shutil.copyfile(src, dst)
    return dst


def ftp_session(port, user=USER, password=PASSWORD):
    """ftplib, logged in, binary."""
    ftp = ftplib.FTP()
    ftp.connect("127.0.0.1", port, timeout=30)
    ftp.login(user, password)
    ftp.voidcmd("TYPE I")
    return ftp


def reply_of(ftp, cmd):
    """The reply text, error replies included."""
    try:
        return ftp.sendcmd(cmd)
    except ftplib.all_errors as exc:
        return str(exc)


def start_stalled_retr(ftp, name, first=65536):
    """A RETR whose client reads ``first`` bytes and then stops (64 KiB
    receive buffer): the transfer stays running.  Returns (data socket,
    the bytes read)."""
    host, port = ftp.makepasv()
    data = socket.create_connection((host, port))
    data.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 65536)
    ftp.putcmd(f"RETR {name}")
    assert ftp.getresp().startswith("1")
    head = b""
    while len(head) < first:
        head += data.recv(first - len(head))
    return data, head


@pytest.fixture
def stock_server(tmp_path):
    """A stock pyftpdlib server (no DRS, no HASH): (root, port)."""
    root = tmp_path / "stock"
    root.mkdir()
    proc = subprocess.Popen(
        [PY, "-m", "pyftpdlib", "-i", "127.0.0.1", "-p", "0", "-w", "-d", str(root), "-u", USER, "-P", PASSWORD],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    port = None
    for _ in range(50):
        m = re.search(r"starting FTP server on [\d.]+:(\d+)", proc.stdout.readline())
        if m:
            port = int(m.group(1))
            break
    assert port, "stock pyftpdlib server did not start"
    yield root, port
    proc.terminate()
    proc.wait(10)
    proc.stdout.close()


# -- no skips: a test that cannot run fails (COMMON rules; docs/MUTATION.md) --

_SKIPPED: list[str] = []


def pytest_runtest_setup(item):
    """A test marked ``root`` fails, never skips, without root."""
    if item.get_closest_marker("root") and os.geteuid() != 0:
        pytest.fail("needs root and network namespaces (CI runs as root)")


def pytest_runtest_logreport(report):
    """Count skipped and xfailed tests (an xfail reports as skipped)."""
    if report.skipped:
        _SKIPPED.append(report.nodeid)


def pytest_sessionfinish(session, exitstatus):
    """Any skip or xfail fails the run: a check that did not run proves nothing."""
    if _SKIPPED and exitstatus == pytest.ExitCode.OK:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def pytest_terminal_summary(terminalreporter):
    if _SKIPPED:
        terminalreporter.write_line(
            f"FAILED: {len(_SKIPPED)} test(s) skipped or xfailed, which this suite forbids: "
            + ", ".join(_SKIPPED[:10]), red=True)
