"""MODE E commands of the control connection (GFD.20; docs/EBLOCK.md,
"Commands" and "Pipelined transfers"), dispatched to the session's
ESession (ftp/eblock/session.py).  In MODE S every command here falls through to
the stream-mode handler unchanged."""

from __future__ import annotations

import contextlib
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future
from typing import TYPE_CHECKING, Any, Protocol

from ....ftp.striping import UnknownNetwork, spas_net_prt, spor_addresses
from .. import cksm, compat
from ..compat import STOCK_COMMANDS, EPortHooks, extra_features, restart_idle_timer
from ..hashing import hash_pool
from ..listings import chunks
from ..thirdparty import foreign_checked
from .session import ESession
from .streams import Limits, StreamCount

EBLOCK_CMDS = {
    "DCAU": {"perm": None, "auth": True, "arg": True,
             "help": "Syntax: DCAU <SP> N (data channel authentication: none, GFD.20)."},
    "SBUF": {"perm": None, "auth": True, "arg": True,
             "help": "Syntax: SBUF <SP> size (per-stream TCP buffer cap, GFD.20)."},
    "CKSM": {"perm": None, "auth": True, "arg": True,
             "help": "Syntax: CKSM <SP> algorithm offset length path (checksum, GridFTP)."},
    "SPAS": {"perm": None, "auth": True, "arg": None,
             "help": "Syntax: SPAS [<SP> net-prt] (striped passive, one stripe here; MODE E: GFD.20)."},
    "SPOR": {"perm": None, "auth": True, "arg": True,
             "help": "Syntax: SPOR <SP> h1,h2,h3,h4,p1,p2 or |net-prt|address|port| (striped port, one stripe"
                     " here; MODE E: GFD.20)."},
    "SITE CLIENTINFO": {"perm": None, "auth": True, "arg": None,
                        "help": "Syntax: SITE CLIENTINFO <SP> key=value;... (accepted)."},
}
MAX_SBUF = 1 << 31
MAX_HELD = 64  # commands one session may have waiting behind a MODE E transfer
# What a running MODE E transfer does not make wait (docs/EBLOCK.md,
# "Pipelined transfers"): the transfer's own controls and a keepalive; every
# other command waits for it, so a pipelining client's replies come in its
# commands' order (RFC 959 4.2).
PASSING = frozenset({"DRS", "ABOR", "STAT", "QUIT", "NOOP"})


class StreamModeControl(Protocol):
    """What EModeCommands needs of the handler it is mixed before
    (handler.DRSControlMixin over pyftpdlib's FTPHandler): the state it
    shares with the stream-mode rules, and the rules it extends."""

    _hash_job: Future[Any] | None  # a HASH or CKSM being computed (ftp/hashing.py)
    _allo: int | None  # ALLO's size for the next STOR (ftp/stream/uploads.py)
    _quit_received: bool  # QUIT ended the session (ftp/commandline.py)
    # the rules its overrides extend through super() (callables: to mypy a
    # protocol's methods are abstract, and abstract ones cannot be reached so)
    transfer_running: Callable[[], bool]  # ftp/transferguard.py
    data_path_open: Callable[[], bool]  # ftp/stream/finalreply.py
    abort_for_shutdown: Callable[[], None]  # ftp/shutdown.py
    drs_reply: Callable[[dict[str, int]], None]  # ftp/drscommand.py
    refused_data_address: Callable[[str, int], bool]  # ftp/thirdparty.py
    refused_passive: Callable[[bool], bool]  # ftp/thirdparty.py
    listed_names: Callable[[str], Iterator[str]]  # ftp/listings.py
    mlsd_lines: Callable[[str, Iterable[str]], Iterator[bytes]]  # ftp/listings.py


if TYPE_CHECKING:  # its super() calls go to the stream-mode handler
    from pyftpdlib.handlers import FTPHandler

    class _Handler(StreamModeControl, FTPHandler):
        pass
else:
    _Handler = object


class EModeCommands(EPortHooks, _Handler):
    """Mixed in before DRSControlMixin: MODE, OPTS RETR, PORT/PASV, REST,
    RETR/STOR/MLSD, ABOR and DRS go to the MODE E data path while MODE E
    is in force."""

    eblock_limits = Limits()
    eblock_count = StreamCount()  # replaced per server by build_server
    _corked: list[str] | None = None  # replies held by replies_together

    def push(self, data):
        if self._corked is not None:
            self._corked.append(data)
        else:
            super().push(data)

    @contextlib.contextmanager
    def replies_together(self):
        """The replies made inside go out in one send at its end: a
        transfer that ends at once (a small file on a cached stream) sends
        its 125 (and 111/112 markers) and 226 in one segment, not one
        each, and its data before them (RFC 959 orders the replies of one
        connection only)."""
        if self._corked is not None:
            yield
            return
        self._corked = []
        try:
            yield
        finally:
            held, self._corked = self._corked, None
            if held:
                super().push("".join(held))

    def __init__(self, conn, server, ioloop=None):
        self.eblock = None
        self._held: deque[tuple[str, str, str]] = deque()
        self._releasing = False
        self._login_failing = False  # a refused PASS's reply still waits (handle_auth_failed)
        super().__init__(conn, server, ioloop)
        self.eblock = ESession(self)

    # -- pipelined transfers (GridFTP -pp): commands wait, in order ----------------
    def pre_process_command(self, line, cmd, arg):
        """In MODE E a transfer command sent while one runs waits for it to
        end, and every command after it waits too, so replies keep the
        commands' order (RFC 959 4.2).  ABOR and DRS are answered at once."""
        eb = self.eblock
        if cmd == "ABOR" and self._held and not self._login_failing and not compat.port_connecting(self):
            if eb is not None:
                eb.abort()  # the running transfer's 426 first, then the waiting ones'
            self.drop_held()
            self.respond("226 ABOR command successful.")
            return
        if not self._releasing and self._must_wait(cmd):
            if len(self._held) >= MAX_HELD:
                self.respond(f"421 More than {MAX_HELD} commands waiting for the running transfer; closing.")
                self.close_when_done()
                return
            self._held.append((line, cmd, arg))
            return
        super().pre_process_command(line, cmd, arg)

    def _must_wait(self, cmd: str) -> bool:
        """Behind a refused PASS, and behind a stream-mode PORT/EPRT still
        connecting (pyftpdlib answers it once connected), every command
        waits; behind a running MODE E transfer all but PASSING (DRS passes
        even commands that wait: its replies are marked and paired by the
        mark, docs/PROTOCOL.md)."""
        if self._login_failing or compat.port_connecting(self):
            return True
        if cmd == "DRS":
            return False
        eb = self.eblock
        return bool(self._held) or (eb is not None and eb.active and eb.busy and cmd not in PASSING
                                    and self.authenticated)

    # -- a refused PASS: the commands behind it wait for its reply -----------------
    def handle_auth_failed(self, msg, password):
        """pyftpdlib answers a refused PASS after auth_failed_timeout (3 s,
        against password guessing) but meanwhile ran the commands already
        read behind it, so their "530 Log in first" came before the PASS's
        own reply and a pipelining client paired them with PASS.  They wait
        for it instead: replies in command order (RFC 959 4.2)."""
        self._login_failing = True
        super().handle_auth_failed(msg, password)

    def on_login_failed(self, username, password):
        super().on_login_failed(username, password)
        self._login_failing = False  # (called right after the PASS's 530)
        self.release_held()

    def port_settled(self) -> None:
        """A stream-mode PORT/EPRT got its reply (200 connected, 425, 421):
        the commands read behind it run now, after it (a RETR sent with
        the PORT got its 150 first, then stalled: ftp/stream/channel.py)."""
        self.ioloop.call_later(0, self.release_held, _errback=self.handle_error)

    def release_held(self) -> None:
        """The running transfer ended (its final reply is out): run the
        waiting commands until one starts the next transfer."""
        while (self._held and not compat.closed(self) and self._hash_job is None
               and not (self.eblock is not None and self.eblock.busy)):
            line, cmd, arg = self._held.popleft()
            self._releasing = True
            try:
                self.pre_process_command(line, cmd, arg)
            finally:
                self._releasing = False

    def drop_held(self) -> None:
        """ABOR or a failed transfer: the waiting commands are answered, in
        order, as not run."""
        held, self._held = self._held, deque()
        for _line, cmd, _arg in held:
            self.respond(f"426 {cmd} not run: the transfer before it was aborted or failed.")

    def close(self):
        if getattr(self, "eblock", None) is not None:
            self.eblock.close()
        super().close()

    def handle_timeout(self):
        if self.eblock is not None and self.eblock.busy:  # a MODE E transfer is no idle session
            restart_idle_timer(self)
            return
        super().handle_timeout()

    def transfer_running(self) -> bool:
        return (self.eblock is not None and self.eblock.busy) or super().transfer_running()

    def data_path_open(self) -> bool:
        """In MODE E the session's own streams are the data path, and
        ESession answers a transfer without them (docs/EBLOCK.md)."""
        return (self.eblock is not None and self.eblock.active) or super().data_path_open()

    def abort_for_shutdown(self) -> None:
        if self.eblock is not None and self.eblock.busy:
            self.eblock.abort(None)
            self.respond("426 Transfer aborted: server shutting down.")
            self.respond("421 Server shutting down.")
            self.close_when_done()
            return
        super().abort_for_shutdown()

    def ftp_QUIT(self, line):
        """RFC 959: during a transfer the session stays open for its
        final reply, then closes."""
        if self.eblock is not None and self.eblock.busy:
            self._quit_received = True
            self.eblock.quit_pending = True
            self.respond("221 Goodbye: closing after the running transfer.")
            return
        super().ftp_QUIT(line)

    # -- hooks from EPortHooks: the address rules (ftp/thirdparty.py), then the mode's path --
    def data_address_hook(self, ip, port) -> None:
        if self.refused_data_address(ip, port):
            return
        if self.eblock.active:
            self.eblock.port(ip, port)
            return
        with foreign_checked(self):  # (checked above: a listed third-party peer passes)
            self.stock_eport(ip, port)

    def passive_hook(self, extmode) -> None:
        if self.refused_passive(extmode):
            return
        if self.eblock.active:
            self.eblock.passive(extmode)
            return
        self.stock_epasv(extmode)

    # -- commands ----------------------------------------------------------------
    def ftp_FEAT(self, line):
        feats = extra_features(self)
        for f in ("PARALLEL", "DCAU", "SBUF", cksm.FEAT_LINE):
            if f not in feats:
                feats.append(f)
        super().ftp_FEAT(line)

    def ftp_MODE(self, line):
        if not self.eblock.mode(line):
            super().ftp_MODE(line)

    def ftp_OPTS(self, line):
        cmd, _, arg = line.strip().partition(" ")
        if cmd.upper() == "RETR":
            self.eblock.opts_retr(arg)
            return
        super().ftp_OPTS(line)

    def ftp_REST(self, line):
        if self.eblock.active:
            self.eblock.restart(line)
            return
        super().ftp_REST(line)

    def ftp_RETR(self, file):
        if self.eblock.active:
            return self.eblock.retr(file)
        return super().ftp_RETR(file)

    def ftp_STOR(self, file, mode="w"):
        if not self.eblock.active:
            return super().ftp_STOR(file, mode)
        if "a" in mode:
            self.respond("504 APPE is not available in MODE E (STOR with REST ranges resumes).")
            return None
        expected, self._allo = getattr(self, "_allo", None), None
        return self.eblock.stor(file, expected)

    def ftp_STOU(self, line):
        if self.eblock.active:
            self.respond("504 STOU is not available in MODE E.")
            return None
        return super().ftp_STOU(line)

    def ftp_MLSD(self, path):
        # a path that does not exist is 550, file unavailable (RFC 959 sec.
        # 4.2; RFC 3659 sec. 7.2.1), as ProFTPD and Pure-FTPd answer:
        # pyftpdlib's 501 reads as a syntax error, and rclone then fails a
        # copy into a directory it would have made
        if not self.fs.lexists(path):
            self.respond("550 No such directory.")
            return None
        if not self.eblock.active:
            return super().ftp_MLSD(path)
        if not self.fs.isdir(path):
            self.respond("501 Not a directory.")
            return None
        try:
            names = self.listed_names(path)  # listings.py: read as they are formatted
        except OSError as err:
            self.respond(f"550 {err.strerror}.")
            return None
        self.eblock.send_listing(chunks(self.mlsd_lines(path, names)), "MLSD")
        return path

    def ftp_LIST(self, path):
        if self.eblock.active:
            self.respond("504 LIST/NLST in MODE E: use MLSD.")
            return None
        return super().ftp_LIST(path)

    def ftp_NLST(self, path):
        if self.eblock.active:
            self.respond("504 LIST/NLST in MODE E: use MLSD.")
            return None
        return super().ftp_NLST(path)

    def ftp_ABOR(self, line):
        if self.eblock.abort():
            self.respond("226 ABOR command successful.")
            return
        super().ftp_ABOR(line)

    # -- striping (GFD.20 5.1-5.2; ftp/striping.py): one stripe, MODE E only --------
    def ftp_SPAS(self, line):
        """PASV for striped transfers: the one listening address, on a
        continuation line of 229."""
        if not spas_net_prt(line):
            self.respond("501 SPAS takes no argument or a network protocol, 1 or 2 (RFC 2428).")
            return
        if self._not_striping("SPAS"):
            return
        self.eblock.passive(False, striped=True, net_prt=line.strip())

    def ftp_SPOR(self, line):
        """PORT for striped transfers: this server is one stripe, so one
        address; it passes PORT's rules (ftp/thirdparty.py)."""
        if self._not_striping("SPOR"):
            return
        try:
            addresses = spor_addresses(line)
        except UnknownNetwork as exc:
            self.respond(f"522 {exc}.")
            return
        except ValueError as exc:
            self.respond(f"501 {exc}.")
            return
        if len(addresses) > 1:
            self.respond(f"504 SPOR names {len(addresses)} stripes; this server is one stripe: give one address.")
            return
        self.data_address_hook(*addresses[0])

    def _not_striping(self, cmd: str) -> bool:
        """True once answered: SPAS/SPOR outside MODE E (503) or after
        EPSV ALL (501, RFC 2428 sec. 4: no other data-port command)."""
        if compat.epsv_all(self):
            self.respond(f"501 {cmd} not allowed after EPSV ALL.")
            return True
        if not self.eblock.active:
            self.respond(f"503 {cmd} needs MODE E (GFD.20 striping runs in extended block mode).")
            return True
        return False

    def ftp_DCAU(self, line):
        """Data channel authentication (GFD.20): drsftp has none to offer."""
        if line.strip().upper() == "N":
            self.respond("200 DCAU N.")
        else:
            self.respond("504 Only DCAU N (no data channel authentication) is available.")

    def ftp_SBUF(self, line):
        """SBUF <size>: each stream's buffer at most this (DRS's cap; the
        static size under --tuning fixed)."""
        try:
            size = int(line.strip())
            if not 4096 <= size <= MAX_SBUF:
                raise ValueError
        except ValueError:
            self.respond(f"501 SBUF wants a size in bytes, 4096-{MAX_SBUF}.")
            return
        self.eblock.sbuf = size
        self.respond(f"200 SBUF {size}.")

    def ftp_CKSM(self, line):
        """Hashed in the HASH command's thread pool; the session waits
        for it as for HASH (ftp/hashing.py)."""
        try:
            alg, offset, length, name = cksm.parse(line)
        except ValueError as exc:
            self.respond(f"501 {exc}.")
            return
        path = self.fs.ftp2fs(name)
        if not self.fs.validpath(path) or not self.authorizer.has_perm(self.username, "r", path):
            self.respond("550 Not enough privileges.")
            return
        if not self.fs.isfile(path):
            self.respond("550 Not a regular file.")
            return
        self._hash_job = hash_pool.submit(cksm.checksum, path, alg, offset, length)
        self._poll_cksm()

    def _poll_cksm(self):
        job = self._hash_job
        if job is None or compat.closed(self):
            return
        if not job.done():
            self.ioloop.call_later(0.02, self._poll_cksm, _errback=self.handle_error)
            return
        self._hash_job = None
        try:
            self.respond(f"213 {job.result()}")
        except OSError as exc:
            self.respond(f"550 Cannot checksum: {exc.strerror}.")
        self.hash_done()

    def hash_done(self) -> None:
        self.release_held()

    def ftp_SITE_CLIENTINFO(self, line):
        self.respond("200 OK.")

    def drs_reply(self, pairs: dict[str, int]) -> None:
        if self.eblock.busy:  # the per-session sums (docs/PROTOCOL.md, "DRS in extended block mode")
            self.respond("200 " + self.eblock.drs(pairs))
            return
        super().drs_reply(pairs)


def with_eblock_commands(cmds: dict) -> dict:
    out = dict(cmds)
    out.update(EBLOCK_CMDS)
    return out


__all__ = ["EBLOCK_CMDS", "STOCK_COMMANDS", "EModeCommands", "with_eblock_commands"]
