"""Data connections whose peer is not the client: third-party
(server-to-server) transfers, the bounce rule, and the data interface
(docs/PROTOCOL.md, "Third-party transfers"; docs/SECURITY.md).

- The bounce attack stays closed (RFC 2577 sec. 3): PORT/EPRT naming an
  address other than the control connection's peer is refused (501,
  naming ``--third-party-peers``) unless the address is in
  ``--third-party-peers``, as a passive listener drops a connection from
  such an address (no reply: none was asked for).  A port below 1024 is
  never a foreign data peer's, whatever the list.  An empty list is
  pyftpdlib's rule exactly.
- ``--data-interface ADDR`` (GridFTP's ``-data-interface``): passive
  listeners bind it and PASV names it; active data connections leave from
  it.  EPSV's reply names a port only (RFC 2428 sec. 3), which the client
  joins to the control connection's address: where that is not the data
  interface, EPSV is refused so that the client falls back to PASV.
- ``--masquerade-address ADDR`` (pyftpdlib's ``masquerade_address``): what
  PASV names instead, for a server behind NAT.
- A data connection to or from another address than the client's is a
  path the control connection's RTT says nothing about: its tuners are
  told so (docs/DESIGN.md#third-party-path).
- A passive listener that a peer came to, and that a reload (SIGHUP) has
  since taken off ``--third-party-peers``, is that peer's: it would only
  wait out the data timeout for a connection it must refuse, so it is
  closed and the transfer on it answered 425 at once (withdrawn_peer).
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator

from ..peers import PeerList, plain_ip
from . import compat

log = logging.getLogger("drsftp.server")

PRIVILEGED = 1024  # ports below this are never a data connection's (RFC 2577 sec. 3)


@contextlib.contextmanager
def foreign_checked(handler) -> Iterator[None]:
    """For one pyftpdlib call, its own foreign-address check passes: drsftp
    checked the address already (pyftpdlib's public permit_foreign_addresses,
    set on the session for the call only)."""
    had = "permit_foreign_addresses" in vars(handler)
    old = handler.permit_foreign_addresses
    handler.permit_foreign_addresses = True
    try:
        yield
    finally:
        if had:
            handler.permit_foreign_addresses = old
        else:
            del handler.permit_foreign_addresses


class DataPeers:
    """Mixed into the control handler: who may be at the other end of a
    data connection, and which address this end uses."""

    # set per server by build_server (app.py)
    third_party_peers = PeerList()
    data_interface: str | None = None
    # the session's passive listener: the peers allowed when it opened, the foreign ones that came
    _pasv_peers = PeerList()
    _pasv_came: frozenset[str] = frozenset()

    # -- who the data peer may be -----------------------------------------------------
    def foreign_data_peer(self, ip: str) -> bool:
        """``ip`` is not the control connection's peer."""
        return plain_ip(ip) != plain_ip(self.remote_ip)  # type: ignore[attr-defined]

    def data_peer_allowed(self, ip: str) -> bool:
        """The client, a listed third-party peer, or anyone where an embedder
        set pyftpdlib's permit_foreign_addresses."""
        return (not self.foreign_data_peer(ip) or ip in self.third_party_peers
                or bool(self.permit_foreign_addresses))  # type: ignore[attr-defined]

    def third_party_possible(self) -> bool:
        """A passive listener may be joined by another host than the client."""
        return bool(self.third_party_peers) or bool(self.permit_foreign_addresses)  # type: ignore[attr-defined]

    def refused_data_address(self, ip: str, port: int) -> bool:
        """PORT/EPRT's address: refused (501, logged, True) when it names
        another host than the client's that is not listed, or a privileged
        port (always for a foreign host; for the client's own unless
        permit_privileged_ports)."""
        foreign = self.foreign_data_peer(ip)
        if foreign and not self.data_peer_allowed(ip):
            reply = (f"501 Rejected data connection to foreign address {ip}:{port};"
                     " allow it with --third-party-peers.")
            why = "not the client's address and not in --third-party-peers"
        elif port < PRIVILEGED and (foreign or not self.permit_privileged_ports):  # type: ignore[attr-defined]
            reply = f'501 PORT against the privileged port "{port}" refused.'
            why = "a privileged port"
        else:
            return False
        log.warning("refused a data connection to %s:%d for the client at %s: %s", ip, port,
                    self.remote_ip, why)  # type: ignore[attr-defined]
        self.respond(reply)  # type: ignore[attr-defined]
        return True

    def refused_foreign_accept(self, ip: str, port: int) -> bool:
        """A passive listener's connection from ``ip``: True (logged, counted
        as a bounce) when it is to be dropped.  No reply: none was asked for,
        and the listener waits on for the right peer."""
        if self.data_peer_allowed(ip):
            return False
        log.warning("dropped a data connection from %s:%d on the passive port of the client at %s: not the"
                    " client's address and not in --third-party-peers", ip, port,
                    self.remote_ip)  # type: ignore[attr-defined]
        self.note_refusal("bounce")  # type: ignore[attr-defined]
        self.note_passive_peer(ip)
        gone = self.withdrawn_peer()
        if gone is not None:  # no peer it serves will come: closed, the waiting transfer answered
            compat.stop_connecting(self)
            self.fail_queued_transfer(self.withdrawn_reply(gone))  # type: ignore[attr-defined]
        return True

    # -- a passive listener's peers ----------------------------------------------------
    def passive_opened(self) -> None:
        """A new passive listener (PASV/EPSV): no peer has come to it yet."""
        self._pasv_peers = self.third_party_peers
        self._pasv_came = frozenset()

    def note_passive_peer(self, ip: str) -> None:
        """A connection came to the passive listener from ``ip`` (taken or not)."""
        if self.foreign_data_peer(ip):
            self._pasv_came = self._pasv_came | {plain_ip(ip)}

    def withdrawn_peer(self) -> str | None:
        """A third-party peer that came to the passive listener, was listed
        when it opened, and that a reload has taken off --third-party-peers
        since, where no foreign peer that came is still allowed: the
        listener is that peer's, whose connections are now refused."""
        came = self._pasv_came
        if any(self.data_peer_allowed(ip) for ip in came):
            return None
        gone = sorted(ip for ip in came if ip in self._pasv_peers)
        return gone[0] if gone else None

    @staticmethod
    def withdrawn_reply(ip: str) -> str:
        """The transfer's reply on a withdrawn peer's listener (RFC 959 sec. 4.2: 425, no data connection)."""
        return (f"425 No data connection will come: {ip} was taken off --third-party-peers after PASV;"
                " the passive port is closed.")

    # -- which address this end uses ----------------------------------------------------
    def data_bind_address(self) -> str:
        """The address data sockets bind: the data interface, or the control
        connection's own."""
        return self.data_interface or self.socket.getsockname()[0]  # type: ignore[attr-defined]

    def refused_passive(self, extmode: bool) -> bool:
        """PASV/EPSV that cannot name the data interface: True once answered.
        EPSV names a port only (RFC 2428 sec. 3), PASV IPv4 addresses only.
        One let through opens a new listener (passive_opened)."""
        refused = self._passive_refused(extmode)
        if not refused:
            self.passive_opened()
        return refused

    def _passive_refused(self, extmode: bool) -> bool:
        di = self.data_interface
        if di is None:
            return False
        local = plain_ip(self.socket.getsockname()[0])  # type: ignore[attr-defined]
        if extmode and plain_ip(di) != local:
            self.respond(f"502 EPSV names no address, and data connections here use {di} (--data-interface),"  # type: ignore[attr-defined]
                         " not this connection's: use PASV.")
            return True
        if not extmode and (":" in plain_ip(di) or ":" in (self.masquerade_address or "")):  # type: ignore[attr-defined]
            self.respond("425 PASV carries IPv4 addresses only: use EPSV.")  # type: ignore[attr-defined]
            return True
        return False

    def note_data_path(self, tuner, peer: str | None) -> None:
        """Tell a data socket's tuner whose path it is on: the client's (the
        control connection's RTT is a reference) or another host's, a path
        nothing measured (docs/DESIGN.md#third-party-path).  ``peer`` None:
        a passive listener's, whose peer is known only at accept; foreign
        when a third-party peer may join it."""
        foreign = self.third_party_possible() if peer is None else self.foreign_data_peer(peer)
        if foreign:
            tuner.note_foreign_path()
        else:
            tuner.note_control_rtt(self.socket)  # type: ignore[attr-defined]
