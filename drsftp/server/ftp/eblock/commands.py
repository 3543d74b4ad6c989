"""MODE E commands of the control connection (GFD.20; docs/EBLOCK.md,
"Commands"), dispatched to the session's ESession (ftp/eblock/session.py);
the commands sent while a transfer runs wait for it in ftp/waiting.py
("Pipelined transfers").  In MODE S every command here falls through to
the stream-mode handler unchanged."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import TYPE_CHECKING, Protocol

from ....ftp.striping import UnknownNetwork, spas_net_prt, spor_addresses
from .. import compat
from ..compat import STOCK_COMMANDS, EPortHooks, extra_features, restart_idle_timer
from ..listings import chunks
from ..thirdparty import foreign_checked
from ..waiting import MAX_HELD
from .session import ESession
from .streams import Limits, StreamCount

EBLOCK_CMDS = {
    "DCAU": {"perm": None, "auth": True, "arg": True,
             "help": "Syntax: DCAU <SP> N (data channel authentication: none, GFD.20)."},
    "SBUF": {"perm": None, "auth": True, "arg": True,
             "help": "Syntax: SBUF <SP> size (per-stream TCP buffer cap, GFD.20)."},
    "SPAS": {"perm": None, "auth": True, "arg": None,
             "help": "Syntax: SPAS [<SP> net-prt] (striped passive, one stripe here; MODE E: GFD.20)."},
    "SPOR": {"perm": None, "auth": True, "arg": True,
             "help": "Syntax: SPOR <SP> h1,h2,h3,h4,p1,p2 or |net-prt|address|port| (striped port, one stripe"
                     " here; MODE E: GFD.20)."},
    "SITE CLIENTINFO": {"perm": None, "auth": True, "arg": None,
                        "help": "Syntax: SITE CLIENTINFO <SP> key=value;... (accepted)."},
}
MAX_SBUF = 1 << 31
# commands a MODE E session refuses, whatever their argument: what it has instead
STREAM_MODE_ONLY = {
    "STOU": "504 STOU is not available in MODE E.",
    "LIST": "504 LIST/NLST in MODE E: use MLSD.",
    "NLST": "504 LIST/NLST in MODE E: use MLSD.",
}


class StreamModeControl(Protocol):
    """What EModeCommands needs of the handler it is mixed before
    (handler.DRSControlMixin over pyftpdlib's FTPHandler): the state it
    shares with the stream-mode rules, and the rules it extends."""

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


class _Cork:
    """replies_together's context manager, one a session: each entry
    notes whether it is nested (the outermost sends).  A class, not a
    generator: it is entered several times a small file."""

    __slots__ = ("h", "nested")

    def __init__(self, h: EModeCommands) -> None:
        self.h = h
        self.nested: list[bool] = []

    def __enter__(self) -> None:
        h = self.h
        nested = h._corked is not None
        self.nested.append(nested)
        if not nested:
            h._corked = []

    def __exit__(self, kind, exc, tb) -> None:
        if not self.nested.pop():
            self.h._uncork(kind is None)


class EModeCommands(EPortHooks, _Handler):
    """Mixed in before DRSControlMixin: MODE, OPTS RETR, PORT/PASV, REST,
    RETR/STOR/MLSD, ABOR and DRS go to the MODE E data path while MODE E
    is in force."""

    eblock_limits = Limits()
    eblock_count = StreamCount()  # replaced per server by build_server
    _corked: list[str] | None = None  # replies held by replies_together
    _after_replies: list[Callable[[], None]]  # after_replies

    def push(self, data):
        if self._corked is not None:
            self._corked.append(data)
        else:
            super().push(data)

    def replies_together(self) -> _Cork:
        """The replies made inside go out in one send at its end: a
        transfer that ends at once (a small file on a cached stream) sends
        its 125 (and 111/112 markers) and 226 in one segment, not one
        each, and its data before them (RFC 959 orders the replies of one
        connection only).  Nested: the outermost sends."""
        return self._cork

    def _uncork(self, ok: bool) -> None:
        """The outermost replies_together ends (``ok``: without an error):
        the commands it released run, then its replies go in one send."""
        try:
            then = self._after_replies
            for _ in range(2 * MAX_HELD) if ok else ():  # (one a transfer that ended: at most MAX_HELD wait)
                if not then or compat.closed(self):
                    break
                then.pop(0)()
        finally:
            held, self._corked = self._corked, None
            rest, self._after_replies = self._after_replies, []
            closed = compat.closed(self)
            for then_ in [] if closed else rest:  # (past the bound, or after an error: the next poll)
                self.ioloop.call_later(0, then_, _errback=self.handle_error)
            if held and not closed:
                super().push("".join(held))

    def after_replies(self, then: Callable[[], None]) -> bool:
        """Run ``then`` at the end of the replies_together under way, after
        the replies made so far and with their send (a transfer's final
        reply, then the commands it released); False if none is under way."""
        if self._corked is None:
            return False
        self._after_replies.append(then)
        return True

    def flush_replies(self) -> None:
        """The replies held so far go out now (before a close)."""
        if self._corked and not compat.closed(self):
            held = "".join(self._corked)
            self._corked.clear()
            super().push(held)

    # Every command line one read brought, and every command a transfer's
    # end released, answered in one send (docs/decisions/0041): a client
    # that pipelines a batch of small files gets their replies together,
    # in order, before the next poll.
    def handle_read(self):
        with self.replies_together():
            super().handle_read()

    def release_held(self) -> None:
        with self.replies_together():
            super().release_held()

    def close_when_done(self):
        self.flush_replies()  # (pyftpdlib closes at once when nothing is queued)
        super().close_when_done()

    def push_with_producer(self, producer):
        self.flush_replies()  # (STAT PATH's listing: after the replies before it)
        super().push_with_producer(producer)

    def secure_connection(self, ssl_context):
        self.flush_replies()  # AUTH TLS's 234 in clear text, before the handshake (RFC 4217 sec. 4)
        return super().secure_connection(ssl_context)  # type: ignore[misc]

    def __init__(self, conn, server, ioloop=None):
        self.eblock = None
        self._after_replies = []
        self._cork = _Cork(self)
        super().__init__(conn, server, ioloop)
        self.eblock = ESession(self)

    # -- a running transfer holds the commands after it (ftp/waiting.py) ----------
    def holding_transfer(self) -> bool:
        return self.eblock is not None and self.eblock.busy

    def abort_holding_transfer(self) -> None:
        if self.eblock is not None:
            self.eblock.abort()  # the running transfer's 426 first, then the waiting ones'

    def close(self):
        self.flush_replies()
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
        for f in ("PARALLEL", "DCAU", "SBUF"):
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

    def _stream_mode_only(self, cmd: str) -> bool:
        """True once refused (STREAM_MODE_ONLY) in MODE E."""
        if self.eblock.active:
            self.respond(STREAM_MODE_ONLY[cmd])
        return bool(self.eblock.active)

    def ftp_STOU(self, line):
        return None if self._stream_mode_only("STOU") else super().ftp_STOU(line)

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
        return None if self._stream_mode_only("LIST") else super().ftp_LIST(path)

    def ftp_NLST(self, path):
        return None if self._stream_mode_only("NLST") else super().ftp_NLST(path)

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
