"""MODE E state of one control connection: the commands' side of the
extended block data path (streams: ftp/eblock/streams.py; transfers: ftp/eblock/send.py,
ftp/eblock/receive.py).  ftp/eblock/commands.py dispatches MODE, OPTS RETR, PORT/PASV, REST,
RETR/STOR/MLSD, ABOR and DRS here while MODE E is in force (GFD.20;
docs/EBLOCK.md, "Commands"; docs/DESIGN.md, "Extended block mode in the
server").  DRS during a transfer speaks for the session: the peer's sums
shared over its streams, theirs summed (drsftp/ftp/drsexchange.py;
docs/EBLOCK.md, "DRS").  Under PROT P every stream runs TLS (ftp/eblock/tls.py;
RFC 4217), under PROT C clear text.

The session's phase (MODE S or E, a transfer running, QUIT during it)
moves by one table of legal moves (ftp/eblock/state.py); its data
connections are ftp/eblock/datapath.py's."""

from __future__ import annotations

import os
import ssl
import time
from typing import Any

from ....ftp import drscmd, drsexchange
from ....ftp.eblock import RangeSet
from ....ftp.striping import spas_reply
from ....io.tuner import SocketTuner
from ....tuning import Role
from ....tuning.wirekeys import STREAMS
from ...ops.translog import mean_rtt
from ...peers import plain_ip
from ..compat import current_type, restart_idle_timer
from ..partfile import BUSY, OVER_DIRECTORY, busy, part_path
from .datapath import DataPath
from .job import Job
from .receive import RECV_CHUNK, Receive
from .send import FileSource, Send, spooled
from .state import Event, IllegalMove, SessionPhase
from .streams import Limits, Stream


class ESession:
    """MODE E state of one control connection."""

    def __init__(self, handler) -> None:
        self.h = handler
        self.limits: Limits = handler.eblock_limits
        self.phase = SessionPhase()  # MODE S/E, a transfer running, QUIT during it (ftp/eblock/state.py)
        self.data = DataPath(self, handler)  # PORT's address or PASV's listener, the open streams
        self.parallelism = 1  # streams for RETR (OPTS RETR Parallelism)
        self.job: Job | None = None  # the transfer running (phase TRANSFER or QUITTING)
        self.rest: RangeSet | None = None  # REST ranges for the next transfer
        self._recv_buf: bytearray | None = None  # receive_buffer
        self.last_markers = float("-inf")  # when a STOR's last 111/112 markers went (ftp/eblock/receive.py)
        self._data_timer: Any = None  # watch_data's

    @property
    def active(self) -> bool:
        """MODE E in force."""
        return self.phase.extended

    @property
    def busy(self) -> bool:
        return self.phase.running

    @property
    def quit_pending(self) -> bool:
        """QUIT came during a transfer: the session closes after its final reply."""
        return self.phase.quit_came

    @quit_pending.setter
    def quit_pending(self, value: bool) -> None:  # (EModeCommands.ftp_QUIT, during a transfer)
        if not value:
            raise IllegalMove("a QUIT cannot be taken back")
        self.phase.move(Event.QUIT)

    @property
    def data_timeout(self) -> float:
        timeout = getattr(self.h.dtp_handler, "timeout", None)
        return 120.0 if timeout is None else timeout

    # -- the data path (ftp/eblock/datapath.py), as streams.Session and job.TransferSession name it --
    @property
    def streams(self) -> list[Stream]:
        return self.data.streams

    @property
    def stream_error(self) -> str | None:
        return self.data.stream_error

    @stream_error.setter
    def stream_error(self, reply: str | None) -> None:
        self.data.stream_error = reply

    @property
    def sbuf(self) -> int | None:
        return self.data.sbuf

    @sbuf.setter
    def sbuf(self, size: int | None) -> None:  # (SBUF, ftp/eblock/commands.py)
        self.data.sbuf = size

    @property
    def tls_context(self) -> ssl.SSLContext | None:
        return self.data.tls_context

    @property
    def tls_client(self) -> bool:
        return self.data.tls_client

    def new_tuner(self, role: Role, peer: str | None) -> SocketTuner:
        return self.data.new_tuner(role, peer)

    def connect(self) -> Stream | None:
        return self.data.connect()

    def stream_closed(self, s: Stream) -> None:
        self.data.stream_closed(s)

    def refuse(self, ip: str) -> str | None:
        """Why an accepted data connection is refused, or None."""
        return self.data.refuse(ip, self.job if isinstance(self.job, Receive) else None)

    # -- a transfer's start and end --------------------------------------------
    def watch_data(self) -> None:
        """One data-timeout timer a session: it fires at the earliest when
        the running transfer may have been idle its timeout, then waits for
        the rest (a transfer a small file, its own timer made and cancelled,
        cost more than its check)."""
        if self._data_timer is None and self.job is not None:
            self._data_timer = self.h.ioloop.call_later(self.job.timeout, self._check_data,
                                                        _errback=self.h.handle_error)

    def _check_data(self) -> None:
        self._data_timer = None
        job = self.job
        wait = job.check_timeout() if job is not None else None
        if wait is not None and self.job is job:
            self._data_timer = self.h.ioloop.call_later(wait, self._check_data, _errback=self.h.handle_error)

    def _started(self, job: Job) -> None:
        self.phase.move(Event.START)
        self.job = job

    def job_ended(self, job: Job, complete: bool, failed: bool) -> None:
        """``job`` ended (``complete``: with 226), before its final reply;
        ``failed``: the commands held behind it are not run."""
        if self.job is job:
            self.job = None
            self.phase.move(Event.END)
        self.transfer_ended(failed)
        self.log(job, complete)

    def log(self, job: Job, complete: bool) -> None:
        """The transfer log's line of a RETR or STOR (ops/translog.py; a
        listing has none, as in stream mode): the streams that carried it."""
        if job.path is not None:
            peers = sorted({s.peer for s in job.members if s.peer and self.h.foreign_data_peer(s.peer)})
            self.h.log_finished_transfer("get" if job.role is Role.SENDER else "put", job.path, job.moved,
                                         time.monotonic() - job.started, len(job.members), complete,
                                         rtt=mean_rtt([s.tuner.stats.rtt_avg for s in job.members if s.tuner]),
                                         data_peer=peers[0] if peers else None)

    def transfer_ended(self, failed: bool = False) -> None:
        restart_idle_timer(self.h)
        # after the final reply, which follows this call: the commands that
        # waited run; after a failure they are answered, not run (the client
        # knows its streams are gone; docs/EBLOCK.md, "Pipelined transfers")
        # (in the replies_together under way, if one is: one send for the
        # final reply and what the released commands answer)
        then = self.h.drop_held if failed else self.h.release_held
        if not self.h.after_replies(then):
            self.h.ioloop.call_later(0, then, _errback=self.h.handle_error)
        if self.quit_pending:  # after the final reply, which follows this call (RFC 959, QUIT)
            self.h.ioloop.call_later(0, self.h.close_when_done, _errback=self.h.handle_error)

    # -- commands ----------------------------------------------------------
    def mode(self, arg: str) -> bool:
        """MODE E / MODE S; False: not ours (the stock handler answers)."""
        mode = arg.strip().upper()
        if mode == "E":
            self.phase.move(Event.MODE_E)
            self.h.respond("200 Mode set to E.")
            return True
        if mode == "S":
            self.phase.move(Event.MODE_S)
            self.rest = None
            self.data.drop_streams()
        return False

    def opts_retr(self, arg: str) -> None:
        """``OPTS RETR Parallelism=N,N,N;`` (GFD.20): the first number."""
        n = None
        for opt in arg.split(";"):
            key, _, value = opt.strip().partition("=")
            if key.strip().lower() == "parallelism":
                try:
                    n = int(value.split(",")[0])
                except ValueError:
                    n = 0
        if n is None:
            self.h.respond("501 OPTS RETR wants Parallelism=N,N,N;")
        elif not 1 <= n <= self.limits.per_session:
            self.h.respond(f"501 Parallelism must be 1-{self.limits.per_session}.")
        else:
            self.parallelism = n
            self.h.respond("200 OPTS Command Successful.")

    def port(self, ip: str, port: int) -> None:
        if self.data.clear_text_refused():  # (the address passed ftp/thirdparty.py's rules)
            return
        self.data.use_port(ip, port)
        self.h.respond("200 PORT Command successful.")

    def passive(self, extmode: bool, striped: bool = False, net_prt: str = "") -> None:
        """PASV, EPSV (``extmode``) or SPAS (``striped``, with its net-prt
        or "": ftp/striping.py)."""
        h = self.h
        if self.data.clear_text_refused():
            return
        local_ip = h.data_bind_address()  # (ftp/thirdparty.py answered what PASV/EPSV cannot name)
        v6 = ":" in plain_ip(local_ip)
        if v6 and striped and net_prt != "2":  # (no net-prt: RFC 959's form, IPv4 only; 1: IPv4)
            h.respond("522 Network protocol not supported, use (2): SPAS 2.")
            return
        if v6 and not extmode and not striped:
            h.respond("425 PASV carries IPv4 addresses only: use EPSV.")
            return
        port = self.data.listen(local_ip)
        if port is None:
            h.respond("425 Can't open data channel: no free passive port.")
            return
        h.passive_opened()  # (SPAS too: no peer has come to it yet)
        if extmode:
            h.respond(f"229 Entering extended passive mode (|||{port}|).")
        else:
            masq = h.masquerade_address
            ip = masq if masq and (":" in masq) == v6 else plain_ip(local_ip)  # (a NAT's address of the same family)
            h.respond(spas_reply(ip, port, bool(net_prt)) if striped
                      else f"227 Entering Passive Mode ({ip.replace('.', ',')},{port >> 8},{port & 255}).")

    def restart(self, arg: str) -> None:
        """REST in MODE E: the ranges the receiver already holds (GFD.20);
        a plain number n is the range 0-n."""
        text = arg.strip()
        try:
            ranges = RangeSet([(0, int(text))]) if text.isdigit() else RangeSet.parse(text)
            if not len(ranges) and text not in ("0", ""):
                raise ValueError
            if any(b > self.limits.max_file for _, b in ranges) or len(ranges) > 4096:
                raise ValueError
        except ValueError:
            self.h.respond("501 REST wants a byte count or ranges such as 0-1048576,2097152-3145728.")
            return
        self.rest = ranges
        self.h.respond(f"350 Restart markers accepted: {ranges.marker() or '0-0'}.")

    def _check_transfer(self) -> bool:
        if current_type(self.h) != "i":
            self.h.respond("504 MODE E moves binary data only: send TYPE I first.")
            return False
        return True

    def retr(self, path: str) -> None:
        if not self._check_transfer():
            return
        rest, self.rest = self.rest, None
        try:
            f = self.h.fs.open(path, "rb")
            source = FileSource(f)
        except OSError as exc:
            self.h.respond(f"550 {exc.strerror}.")
            return
        size = source.size
        ranges = rest.missing(size) if rest is not None else [(0, size)]
        if rest is not None and any(b > size for _, b in rest):
            source.close()
            self.h.respond(f"554 REST ranges past the end of the file ({size} bytes).")
            return
        self._send(source, ranges, "RETR", self.h.fs.fs2ftp(path))

    def send_listing(self, chunks, cmd: str) -> None:
        """A listing (MLSD) over MODE E streams: the bytes ``chunks``
        yield, spooled (esend.spooled) so its size is known for the
        block plan."""
        self.rest = None
        try:
            source = spooled(chunks)
        except OSError as exc:
            self.h.respond(f"451 Local error: {exc.strerror}; listing aborted.")
            return
        self._send(source, [(0, source.size)], cmd)

    def receive_buffer(self) -> bytearray:
        if self._recv_buf is None:
            self._recv_buf = bytearray(RECV_CHUNK)
        return self._recv_buf

    def _send(self, source, ranges, cmd: str, path: str | None = None) -> None:
        with self.h.replies_together():
            self._start_send(source, ranges, cmd, path)

    def _start_send(self, source, ranges, cmd: str, path: str | None) -> None:
        h = self.h
        data = self.data
        cached = data.cached(Role.SENDER)
        if data.clear_text_refused() or data.stream_failed() or (not cached and data.port_withdrawn()):
            source.close()
            return
        if not cached and data.port_addr is None:
            source.close()
            if data.listener is not None:
                h.respond(f"425 MODE E data flows from the connecting side: {cmd} needs PORT or EPRT.")
            else:
                h.respond("425 Use PORT or EPRT first.")
            return
        job = Send(self, source, ranges, len(cached) or self.parallelism)
        job.path = path
        self._started(job)
        if cached:
            h.respond("125 Beginning transfer; reusing existing data connection.")
            streams = cached
        else:
            h.respond("150 Beginning transfer.")
            streams = [s for s in (data.connect() for _ in range(self.parallelism)) if s is not None]
            if not streams:
                job.fail("425 Cannot open data connection.")
                return
        for s in streams:
            s.new_transfer()
            job.members.add(s)
        for s in streams:
            # a cached stream takes the first bytes now, without a poll: a
            # small file goes out whole before its 125 (replies_together);
            # a full socket waits for WRITE (pump)
            if not s.connecting and not job.finished:
                job.pump(s)
        job.arm()

    def stor(self, path: str, expected: int | None) -> None:
        h = self.h
        if not self._check_transfer():
            return
        rest, self.rest = self.rest, None
        if os.path.isdir(path):
            h.respond(OVER_DIRECTORY)
            return
        data = self.data
        cached = data.cached(Role.RECEIVER)
        if data.clear_text_refused() or data.stream_failed() or (not cached and data.listener_withdrawn()):
            return
        if not cached and data.listener is None:
            if data.port_addr is not None:
                h.respond("425 MODE E data flows from the connecting side: STOR needs PASV or EPSV.")
            else:
                h.respond("425 Use PASV or EPSV first.")
            return
        with h.replies_together():
            self._start_receive(path, expected, rest, cached)

    def _start_receive(self, path: str, expected: int | None, rest: RangeSet | None, cached: list[Stream]) -> None:
        h = self.h
        if rest is not None and not len(rest):
            rest = None  # (REST 0: nothing held, a fresh upload, never one into the file in place)
        temp = part_path(path)
        if busy(temp):  # another session writes it: two writers would interleave
            h.respond(BUSY)
            return
        flags = os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)
        if rest is None:
            flags |= os.O_TRUNC
        elif not os.path.exists(temp) and os.path.isfile(path):
            temp = path  # resuming a file some other way: continue it in place
        if rest is not None and len(rest):
            # REST names ranges this file holds (GFD.20 restart): a file
            # shorter than they reach (gone, or another upload's) lacks them
            try:
                have = os.stat(temp).st_size
            except OSError:
                have = 0
            if have < max(b for _, b in rest):
                h.respond(f"554 REST ranges past the end of the partial upload ({have} bytes).")
                return
        try:
            fd = os.open(temp, flags, 0o666)
        except OSError as exc:
            h.respond(f"550 {exc.strerror}.")
            return
        job = Receive(self, fd, temp, path, expected, rest, fresh=rest is None)
        self._started(job)
        job.path = self.h.fs.fs2ftp(path)
        h.respond("125 Beginning transfer; reusing existing data connection." if any(s.used for s in cached)
                  else "150 Beginning transfer.")
        for s in cached:
            s.new_transfer()
        for s in cached:
            if not job.finished:
                s.resume_reading(at_once=True)  # what came before the STOR's reply is read now
        job.arm()

    def abort(self, reply: str | None = "426 Transfer aborted via ABOR.") -> bool:
        if self.job is None:
            return False
        self.job.fail(reply)
        return True

    def drs(self, pairs: dict[str, int]) -> str | None:
        """DRS during a MODE E transfer: the peer's per-session sums shared
        over our streams, our streams' reports summed into one (docs/PROTOCOL.md,
        "DRS in extended block mode"); ``streams=N`` asks the sender (RETR)
        for N streams."""
        job = self.job
        if job is None:
            return None
        if STREAMS in pairs and isinstance(job, Send):
            job.set_streams(max(1, min(pairs[STREAMS], self.limits.per_session)))
        streams = set(job.members)
        if isinstance(job, Receive):  # every open stream may carry this STOR's blocks
            streams.update(s for s in self.data.streams if s.role is Role.RECEIVER)
        tuners = [s.tuner for s in streams if s.tuner is not None and not s.closed]
        share = drsexchange.stream_share(pairs, len(tuners))
        for t in tuners:
            t.on_peer_pairs(share)
        report = drsexchange.session_report((t.report() for t in tuners),
                                            streams=sum(1 for s in streams if not s.closed))
        return "DRS " + drscmd.format_pairs(dict(report))

    def close(self) -> None:
        if self._data_timer is not None:
            self._data_timer.cancel()
            self._data_timer = None
        if self.job is not None:
            self.job.fail(None)
        self.data.drop_streams()
