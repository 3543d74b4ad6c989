"""Run one command inside a Linux kernel that has sch_netem, under qemu (TCG).

    python tests/vm/tcvm.py fetch              # the guest kernel and busybox, once (root, apt)
    python tests/vm/tcvm.py run [--log FILE] [--timeout S] -- CMD ...
    ./run vm CMD ...                           # the same, after ./run's setup

The guest is Debian's cloud kernel (``linux-image-cloud-amd64``, which
ships ``sch_netem.ko``) with a busybox initramfs.  Its root file system is
this host's ``/``, shared read-only through virtiofs, with fresh tmpfs on
/tmp, /run, /var/tmp and /dev/shm: the guest runs this host's Python,
iproute2 and iperf3 and this repository in place.  It has no network
device (``-nic none``): whatever traffic CMD makes stays in namespaces it
makes inside the guest.

CMD runs as root in the repository's directory, the running Python's bin
directory first on PATH; the exit status is CMD's.  The console (kernel and
CMD) goes to the log file.  The kernel and busybox are cached in
/var/tmp/drsftp-vm (DRSFTP_VM_CACHE); the initramfs and the virtiofs socket
live in a temporary directory removed at the end, and qemu and virtiofsd
are ended by PID, on failure and Ctrl-C too.
"""

from __future__ import annotations

import argparse
import glob
import os
import re
import secrets
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable

CACHE = os.environ.get("DRSFTP_VM_CACHE", "/var/tmp/drsftp-vm")
REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
QEMU = "qemu-system-x86_64"
VIRTIOFSD = "/usr/lib/qemu/virtiofsd"  # Debian 12's qemu-system-common
KERNEL_META = "linux-image-cloud-amd64"
# What the guest loads: its shared root and entropy, then what links and the bench use.
MODULES = ["virtio_pci", "virtio_rng", "virtiofs", "veth", "tun", "sch_netem", "tcp_bbr", "tcp_diag"]
# tsc: without it the guest picks the HPET, and every clock read is an emulated device access
KERNEL_ARGS = "console=ttyS0 quiet loglevel=3 panic=-1 rdinit=/init tsc=reliable"


class VMError(Exception):
    """The VM cannot be fetched, built or run (one-line message)."""


# -- the cache: kernel, modules, busybox ---------------------------------------
def kernel_root() -> str:
    """The cached kernel's directory (vmlinuz, busybox, lib/modules/VERSION), or VMError."""
    ready = sorted(glob.glob(os.path.join(CACHE, "*", "READY")))
    if not ready:
        raise VMError(f"no guest kernel in {CACHE}: `./run setup` (as root) fetches it")
    return os.path.dirname(ready[-1])


def fetch() -> str:
    """Download the cloud kernel and busybox-static with apt and unpack them
    into the cache; nothing is installed on this host."""
    try:
        return kernel_root()
    except VMError:
        pass
    package = _kernel_package()
    dest = os.path.join(CACHE, package)
    os.makedirs(CACHE, exist_ok=True)
    work = tempfile.mkdtemp(prefix="fetch-", dir=CACHE)
    try:
        _apt(["apt-get", "download", package, "busybox-static"], cwd=work)
        unpacked = os.path.join(work, "root")
        for deb in glob.glob(os.path.join(work, "*.deb")):
            _check(["dpkg-deb", "-x", deb, unpacked])
        (vmlinuz,) = glob.glob(os.path.join(unpacked, "boot", "vmlinuz-*"))
        (moddir,) = glob.glob(os.path.join(unpacked, "lib", "modules", "*"))
        busybox = os.path.join(unpacked, "bin", "busybox")
        _check([busybox, "depmod", "-b", unpacked, os.path.basename(moddir)])  # writes modules.dep
        shutil.rmtree(dest, ignore_errors=True)
        os.makedirs(dest)
        shutil.copy(vmlinuz, os.path.join(dest, "vmlinuz"))
        shutil.copy(busybox, os.path.join(dest, "busybox"))
        shutil.copytree(moddir, os.path.join(dest, "lib", "modules", os.path.basename(moddir)))
        open(os.path.join(dest, "READY"), "w").close()
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return dest


def _kernel_package() -> str:
    """The versioned image the meta-package depends on (linux-image-6.1.0-N-cloud-amd64)."""
    out = _apt(["apt-cache", "depends", "--no-recommends", "--no-suggests", KERNEL_META])
    m = re.search(r"Depends: (linux-image-\S+-cloud-amd64)", out)
    if not m:
        raise VMError(f"apt knows no {KERNEL_META} (is Debian's main archive among apt's sources?)")
    return m.group(1)


def _apt(cmd: list[str], cwd: str | None = None) -> str:
    """Run an apt command; after a failure (or an empty answer), `apt-get update` and once more."""
    for attempt in (1, 2):
        proc = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, check=False)
        if proc.returncode == 0 and (cmd[0] != "apt-cache" or "Depends" in proc.stdout):
            return proc.stdout
        if attempt == 1:
            subprocess.run(["apt-get", "update", "-qq"], capture_output=True, check=False)
    raise VMError(f"{' '.join(cmd)} failed: {(proc.stderr or proc.stdout).strip()[-300:]}")


def _check(cmd: list[str]) -> None:
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if proc.returncode:
        raise VMError(f"{' '.join(cmd)} failed: {proc.stderr.strip()[-300:]}")


# -- the initramfs ---------------------------------------------------------------
def module_closure(moddir: str, names: list[str]) -> list[str]:
    """Module files (relative to ``moddir``) for ``names`` and what they need,
    dependencies first, from the modules.dep depmod wrote."""
    deps: dict[str, list[str]] = {}
    with open(os.path.join(moddir, "modules.dep")) as f:
        for line in f:
            mod, _, rest = line.partition(":")
            deps[mod.strip()] = rest.split()
    by_name = {os.path.basename(m).split(".")[0].replace("-", "_"): m for m in deps}
    order: list[str] = []

    def visit(mod: str) -> None:
        if mod not in order:
            for dep in deps[mod]:
                visit(dep)
            order.append(mod)

    for name in names:
        if name not in by_name:
            raise VMError(f"the guest kernel has no module {name}")
        visit(by_name[name])
    return order


INIT = r"""#!/bin/busybox sh
/bin/busybox --install -s /bin
export PATH=/bin
mount -t proc proc /proc
mount -t sysfs sys /sys
mount -t devtmpfs dev /dev
for m in $(cat /modules); do insmod "/$m" || echo "insmod $m failed"; done
mount -t virtiofs host /root -o ro || { echo "@MARK@: exit 125"; reboot -f; }
mount -t proc proc /root/proc
mount -t sysfs sys /root/sys
mount -t devtmpfs dev /root/dev
mkdir -p /root/dev/pts /root/dev/shm
mount -t devpts devpts /root/dev/pts
# the checkout stays reachable where it is, also below a directory the
# tmpfs mounts below hide (a clone in /tmp): held aside, bound back after
mkdir -p /repo && mount -o bind /root@REPO@ /repo
for d in /root/run /root/tmp /root/var/tmp /root/dev/shm; do mount -t tmpfs -o mode=1777 tmpfs "$d"; done
mkdir -p /root@REPO@ 2>/dev/null; mount -o bind /repo /root@REPO@
ip link set lo up
echo "@MARK@: start"
chroot /root /usr/bin/env -i PATH=@PATH@ HOME=/tmp TERM=dumb PYTHONDONTWRITEBYTECODE=1 \
    /bin/sh -c @COMMAND@ </dev/null
echo "@MARK@: exit $?"
sync
reboot -f
"""


def init_script(argv: list[str], mark: str, bin_first: str) -> str:
    command = f"cd {shlex.quote(REPO)} && exec {shlex.join(argv)}"
    fill = {"@MARK@": mark, "@COMMAND@": shlex.quote(command), "@REPO@": shlex.quote(REPO),
            "@PATH@": shlex.quote(f"{bin_first}:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin")}
    text = INIT
    for key, value in fill.items():
        text = text.replace(key, value)
    return text


def write_initramfs(path: str, kroot: str, init: str) -> None:
    """A "newc" cpio archive (as the kernel unpacks an initramfs): /init,
    busybox, the modules and the list of them in load order."""
    (moddir,) = glob.glob(os.path.join(kroot, "lib", "modules", "*"))
    mods = module_closure(moddir, MODULES)
    files = [("init", 0o100755, init.encode()), ("modules", 0o100644, "\n".join(mods).encode()),
             ("bin/busybox", 0o100755, _read(os.path.join(kroot, "busybox")))]
    files += [(m, 0o100644, _read(os.path.join(moddir, m))) for m in mods]
    dirs = {"bin", "proc", "sys", "dev", "root"}
    for name, _, _ in files:
        parent = os.path.dirname(name)
        while parent:
            dirs.add(parent)
            parent = os.path.dirname(parent)
    entries = [(d, 0o040755, b"") for d in sorted(dirs)] + files
    with open(path, "wb") as f:
        for ino, (name, mode, data) in enumerate(entries, start=1):
            f.write(_cpio_entry(ino, name, mode, data))
        f.write(_cpio_entry(0, "TRAILER!!!", 0, b""))


def _read(path: str) -> bytes:
    with open(path, "rb") as f:
        return f.read()


def _cpio_entry(ino: int, name: str, mode: int, data: bytes) -> bytes:
    raw = name.encode() + b"\0"
    # ino mode uid gid nlink mtime filesize devmajor devminor rdevmajor rdevminor namesize check
    fields = [ino, mode, 0, 0, 1, 0, len(data), 0, 0, 0, 0, len(raw), 0]
    head = b"070701" + b"".join(b"%08X" % v for v in fields) + raw
    head += b"\0" * (-len(head) % 4)
    return head + data + b"\0" * (-len(data) % 4)


# -- running ---------------------------------------------------------------------
def run(argv: list[str], *, log: str, timeout: float = 1800.0, cpus: int = 2, mem_mib: int = 2048,
        echo: bool = False) -> int:
    """Boot, run ``argv`` in the guest, power off; CMD's exit status.  The
    console goes to ``log`` (and to stdout from CMD's start, if ``echo``);
    VMError if something is missing or the guest reports no exit status."""
    for tool in (QEMU, VIRTIOFSD):
        if not shutil.which(tool):
            raise VMError(f"{tool} is missing: `./run setup` (as root) installs qemu-system-x86")
    kroot = kernel_root()
    mark = f"drsftp-vm-{secrets.token_hex(4)}"
    tmp = tempfile.mkdtemp(prefix="drsftp-vm-")
    procs: list[subprocess.Popen] = []
    try:
        initrd = os.path.join(tmp, "initrd")
        write_initramfs(initrd, kroot, init_script(argv, mark, os.path.dirname(sys.executable)))
        sock = os.path.join(tmp, "fs.sock")
        procs.append(subprocess.Popen(
            [VIRTIOFSD, f"--socket-path={sock}", "-o", "source=/", "-o", "cache=always", "-o", "sandbox=chroot",
             "-o", "log_level=err"], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        _wait_for(lambda: os.path.exists(sock) or procs[0].poll() is not None, 10)
        if not os.path.exists(sock):
            raise VMError("virtiofsd did not start (it needs root)")
        with open(log, "wb") as console:
            procs.append(subprocess.Popen(qemu_argv(kroot, initrd, sock, cpus, mem_mib), stdin=subprocess.DEVNULL,
                                          stdout=console, stderr=subprocess.STDOUT))
            status = _follow(log, procs[-1], mark, timeout, echo)
    finally:
        for proc in reversed(procs):
            _stop(proc)
        shutil.rmtree(tmp, ignore_errors=True)
    if status is None:
        raise VMError(f"the guest reported no exit status (console: {log})")
    return status


def qemu_argv(kroot: str, initrd: str, sock: str, cpus: int, mem_mib: int) -> list[str]:
    return [
        QEMU, "-accel", "tcg,thread=multi", "-cpu", "max", "-smp", str(cpus), "-m", f"{mem_mib}M",
        # virtiofs needs the guest's memory shared with virtiofsd
        "-object", f"memory-backend-memfd,id=mem,size={mem_mib}M,share=on", "-numa", "node,memdev=mem",
        "-nographic", "-nodefaults", "-no-reboot", "-nic", "none", "-serial", "stdio",
        "-kernel", os.path.join(kroot, "vmlinuz"), "-initrd", initrd, "-append", KERNEL_ARGS,
        "-chardev", f"socket,id=fs,path={sock}", "-device", "vhost-user-fs-pci,chardev=fs,tag=host",
        "-device", "virtio-rng-pci",
    ]


def _follow(log: str, qemu: subprocess.Popen, mark: str, timeout: float, echo: bool) -> int | None:
    """Until qemu exits (or ``timeout``): the status the guest printed after
    ``mark``; with ``echo``, CMD's lines (those between the marks) copied to stdout."""
    deadline = time.monotonic() + timeout
    start, exit_ = f"{mark}: start".encode(), re.compile(re.escape(mark).encode() + rb": exit (\d+)")
    status, started, pending = None, False, b""
    with open(log, "rb") as f:
        while True:
            done = qemu.poll() is not None or time.monotonic() > deadline
            *lines, pending = (pending + f.read()).split(b"\n")
            for line in lines:
                m = exit_.search(line)
                if m:
                    if echo and started and m.start():  # CMD's last line had no newline
                        sys.stdout.buffer.write(line[:m.start()] + b"\n")
                    status, started = int(m.group(1)), False
                elif start in line:
                    started = True
                elif echo and started:
                    sys.stdout.buffer.write(line + b"\n")
            sys.stdout.flush()
            if done:
                return status
            time.sleep(0.2)


def _wait_for(pred: Callable[[], bool], timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not pred() and time.monotonic() < deadline:
        time.sleep(0.02)


def _stop(proc: subprocess.Popen) -> None:
    """End a process this module started, by its PID: SIGTERM, then SIGKILL."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


class _Stopped(Exception):
    """SIGTERM or SIGHUP: end as Ctrl-C does, qemu and virtiofsd with us."""


def _on_signal(signum, frame):
    raise _Stopped()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="tcvm", description=(__doc__ or "").split("\n\n")[0])
    sub = ap.add_subparsers(dest="what", required=True)
    sub.add_parser("fetch", help="download and unpack the guest kernel and busybox into the cache")
    r = sub.add_parser("run", help="boot, run CMD in the guest, power off")
    r.add_argument("--log", help="console log file (default: a temporary one, kept only if the VM fails)")
    r.add_argument("--timeout", type=float, default=1800.0, help="seconds before qemu is ended (default 1800)")
    r.add_argument("cmd", nargs=argparse.REMAINDER, help="the command and its arguments")
    args = ap.parse_args(argv)
    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, _on_signal)
    if args.what == "fetch":
        try:
            print(fetch())
            return 0
        except VMError as exc:
            print(f"tcvm: {exc}", file=sys.stderr)
            return 1
    cmd = args.cmd[1:] if args.cmd[:1] == ["--"] else args.cmd
    if not cmd:
        ap.error("run needs a command")
    log = args.log or tempfile.mkstemp(prefix="drsftp-vm-console-", suffix=".log")[1]
    keep = bool(args.log)
    try:
        return run(cmd, log=log, timeout=args.timeout, echo=True)
    except VMError as exc:
        keep = True
        print(f"tcvm: {exc}", file=sys.stderr)
        return 1
    except (KeyboardInterrupt, _Stopped):
        return 130
    finally:
        if not keep:
            os.unlink(log)


if __name__ == "__main__":
    sys.exit(main())
