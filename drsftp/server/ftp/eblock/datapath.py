"""The data connections of one MODE E session in ``drsftp serve``: where
its streams go (PORT/EPRT) or come from (the PASV/EPSV listener), the open
streams it keeps between transfers, their tuners and their TLS
(docs/EBLOCK.md, "Data connections" and "TLS on the streams"; the commands
that use them: eblock/session.py)."""

from __future__ import annotations

import errno
import socket
import ssl

from ....io.tuner import SocketTuner
from ....tuning import Role
from ..compat import data_protected
from .job import Job
from .listener import Listener
from .streams import Session, Stream, StreamCount


class DataPath:
    """PORT's address xor PASV's listener, and the open streams (cached)."""

    def __init__(self, session: Session, handler) -> None:
        self.session = session  # the streams' and the listener's (ESession)
        self.h = handler
        self.limits = session.limits
        self.count: StreamCount = self.h.eblock_count
        self.port_addr: tuple[str, int] | None = None  # PORT/EPRT: where to connect
        self.listener: Listener | None = None  # PASV/EPSV
        self.streams: list[Stream] = []  # open streams, both directions (cached)
        self.sbuf: int | None = None  # SBUF: per-stream buffer cap
        self.stream_error: str | None = None  # a stream's TLS failed between transfers: the next one's reply

    @property
    def tls_context(self) -> ssl.SSLContext | None:
        """The streams' TLS context under PROT P (the TLS client's under
        SSCN ON), None under PROT C."""
        if not data_protected(self.h):
            return None
        return getattr(self.h, "etls_client_context" if self.tls_client else "etls_context", None)

    @property
    def tls_client(self) -> bool:
        """SSCN ON: this end is the TLS client on its streams (ftp/tls/sscn.py)."""
        return bool(getattr(self.h, "sscn_client", False))

    def new_tuner(self, role: Role, peer: str | None) -> SocketTuner:
        """A stream's tuner; ``peer``: its data peer's address (None: a
        listener's, not known yet; thirdparty.DataPeers.note_data_path)."""
        h = self.h
        spec = h.tuning_spec
        if self.sbuf and spec.startswith("fixed"):
            spec = f"fixed:{self.sbuf}"  # SBUF: the static size under --tuning fixed
        # The tuner sets no read low-water mark (SO_RCVLOWAT): a MODE E
        # stream stays open after its EOD, so a fixed mark would hold a
        # transfer's last bytes (stream mode ends with a FIN instead); the
        # stream sets it after each read from its blocks (Stream.batch_reads).
        tuner = SocketTuner(spec, role, allow_force=h.allow_force, limits=h.host_limits, budget=h.buffer_budget,
                            batch_reads=False, parallel=True)
        if self.sbuf:
            tuner.cap_size(self.sbuf)
        h.note_data_path(tuner, peer)
        return tuner

    # -- streams -----------------------------------------------------------
    def refuse(self, ip: str, waiting: Job | None) -> str | None:
        """Why an accepted data connection is refused, or None; ``waiting``:
        the STOR that waits for streams, if one does."""
        self.h.note_passive_peer(ip)
        if not self.h.data_peer_allowed(ip):
            self.h.note_refusal("bounce")
            if waiting is not None and not self.cached(Role.RECEIVER):
                self.listener_withdrawn(waiting)
            return "not the control connection's address, nor in --third-party-peers"
        if len(self.streams) >= self.limits.per_session:
            self.h.note_refusal("limit")
            return f"more than {self.limits.per_session} streams in one session"
        if not self.count.take(self.limits.per_server):
            self.h.note_refusal("limit")
            return f"more than {self.limits.per_server} streams on this server"
        return None

    def connect(self) -> Stream | None:
        """A new outgoing stream to the PORT/EPRT address (connecting)."""
        if self.port_addr is None or len(self.streams) >= self.limits.per_session:
            return None
        if not self.count.take(self.limits.per_server):
            return None
        ip, port = self.port_addr
        sock = socket.socket(socket.AF_INET6 if ":" in ip else socket.AF_INET, socket.SOCK_STREAM)
        sock.setblocking(False)
        stream = Stream(self.session, sock, Role.SENDER)
        stream.secure(self.tls_context, self.tls_client)
        stream.connecting = True
        self.streams.append(stream)
        stream.handshake = self.new_tuner(Role.SENDER, ip)
        stream.handshake.before_handshake(sock, reserve_as=stream.handshake)  # fixes the window scale
        try:
            sock.bind((self.h.data_bind_address(), 0))  # --data-interface, or the control connection's address
        except OSError:
            pass
        err = sock.connect_ex((ip, port))
        if err not in (0, errno.EINPROGRESS):
            stream.close()
            return None
        stream.want(self.h.ioloop.WRITE)
        return stream

    def stream_closed(self, s: Stream) -> None:
        if s in self.streams:
            self.streams.remove(s)
            self.count.give()

    def drop_streams(self) -> None:
        self.stream_error = None
        for s in list(self.streams):
            s.close()
        if self.listener is not None:
            self.listener.close()
            self.listener = None

    def cached(self, role: Role) -> list[Stream]:
        """The open streams of ``role``; those set up under the other PROT
        level, or the other TLS role (SSCN), are closed first (PROT P
        streams run TLS, PROT C ones not), and so are those to a peer a
        reload took off --third-party-peers."""
        tls = self.tls_context is not None
        h = self.h
        for s in [s for s in self.streams if s.role is role and (
                (s.tls is not None) != tls or (s.tls is not None and s.tls.client != self.tls_client)
                or (s.peer is not None and not h.data_peer_allowed(s.peer)))]:
            s.close()
        return [s for s in self.streams if s.role is role]

    # -- the data address: PORT's, or PASV's listener -----------------------
    def use_port(self, ip: str, port: int) -> None:
        self.drop_streams()
        self.port_addr = (ip, port)

    def listen(self, local_ip: str) -> int | None:
        """A new listener on ``local_ip`` (PASV, EPSV, SPAS): its port, or
        None with every passive port taken."""
        self.drop_streams()
        self.port_addr = None
        ports = list(self.h.passive_ports) if self.h.passive_ports else [0]
        sock = None
        for p in ports[:200]:  # bounded: a full range answers 425
            sock = socket.socket(socket.AF_INET6 if ":" in local_ip else socket.AF_INET, socket.SOCK_STREAM)
            try:
                sock.bind((local_ip, p))
                break
            except OSError:
                sock.close()
                sock = None
        if sock is None:
            return None
        sock.setblocking(False)
        self.listener = Listener(self.session, sock)
        port: int = sock.getsockname()[1]
        return port

    # -- what fails a transfer before it starts ------------------------------
    def clear_text_refused(self) -> bool:
        """PROT P without the streams' TLS context (no certificate for
        them): refused, never clear text (RFC 4217)."""
        if data_protected(self.h) and self.tls_context is None:
            self.h.respond("534 MODE E data connections cannot be encrypted here: MODE S for PROT P.")
            return True
        return False

    def port_withdrawn(self) -> bool:
        """PORT's address is a peer a reload (SIGHUP) took off
        --third-party-peers: it is forgotten and the transfer gets 425."""
        if self.port_addr is None or self.h.data_peer_allowed(self.port_addr[0]):
            return False
        self.port_addr = None
        self.h.respond("425 PORT's address is no longer among --third-party-peers: send PORT again.")
        return True

    def listener_withdrawn(self, waiting: Job | None = None) -> bool:
        """The passive listener is a peer's that a reload (SIGHUP) took off
        --third-party-peers (thirdparty.DataPeers.withdrawn_peer): closed,
        and the STOR (``waiting``, or the one being run) gets 425 at once
        instead of waiting out the data timeout."""
        gone = self.h.withdrawn_peer() if self.listener is not None else None
        if gone is None:
            return False
        assert self.listener is not None
        self.listener.close()
        self.listener = None
        if waiting is not None:
            waiting.fail(self.h.withdrawn_reply(gone))
        else:
            self.h.respond(self.h.withdrawn_reply(gone))
        return True

    def stream_failed(self) -> bool:
        """A stream's TLS failed before this transfer: it fails (425)."""
        if self.stream_error is None:
            return False
        reply, self.stream_error = self.stream_error, None
        self.h.respond(reply)
        return True
