"""One file between two servers (a third-party transfer: RFC 959 sec. 2.3
and fig. 2, one user-PI and two server-PIs), sans-IO: the commands to the
source A and the destination B in the order they may go, and what each
reply means (docs/THIRDPARTY.md, "The command sequence"; docs/DESIGN.md,
"Third-party transfers").  The driver sends what :meth:`CopyFlow.opening`
and :meth:`CopyFlow.passive` return and hands back the replies; each
side's commands also pass its own :class:`drsftp.ftp.flow.TransferFlow`.

    B: [MODE E;] PASV                                  -> 227 (B's address)
    A: [MODE E; OPTS RETR Parallelism=N,N,N;]             (sent with B's PASV)
    at B's 227:
    B: [ALLO n;] [REST r;] STOR path                      (its 150 comes when A connects)
    A: PORT <B's address>; then [REST r;] RETR path      (stream mode: at PORT's 200)
    then 226 from both ends it; a 4yz/5yz from either fails it, and the
    other side's running transfer is aborted (ABOR).

- **Reverse** (stream mode only): where B refuses PASV, A listens
  (``A: PASV``) and B connects (``B: PORT <A's address>``).  In extended
  block mode the sender connects (GFD.20), so A is always the active side.
- **Cached** (extended block mode): streams the pair's last file left open
  carry the next one; no PASV, no PORT (GridFTP's ``-fast``).
- **ALLO** tells B the file's length: stream mode ends a file by closing
  the connection (RFC 959 3.4.1), so a source that dies looks done to B
  without it.
- **REST**: in stream mode the offset both resume at; in extended block
  mode the ranges B holds, which A then leaves out (GFD.20 restart).
- The address is B's as B advertises it (PASV, IPv4); what A may connect
  to is A's rule to enforce (RFC 2577 sec. 3).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field

from .eblock import MAX_STREAMS
from .replies import ProtocolError, Reply, parse_pasv


class Side(enum.Enum):
    SOURCE = "source"
    DEST = "destination"

    @property
    def other(self) -> Side:
        return Side.DEST if self is Side.SOURCE else Side.SOURCE


class Phase(enum.Enum):
    OPENING = "opening"  # waiting for the passive side's address
    RUNNING = "running"  # both transfer commands sent
    DONE = "done"  # 226 from both
    FAILED = "failed"


@dataclass(frozen=True)
class Command:
    side: Side
    line: str
    what: str  # what to call it in an error ("STOR /x")


@dataclass(frozen=True)
class CopySpec:
    source_path: str
    dest_path: str
    size: int | None = None  # the source's SIZE (ALLO); None: unknown
    mode_e: bool = False  # extended block mode (both list PARALLEL)
    streams: int = 1  # MODE E: the streams A opens
    held: tuple[tuple[int, int], ...] = ()  # what B holds already (REST); a prefix in stream mode
    cached: bool = False  # MODE E streams of the pair's last file are open

    def __post_init__(self) -> None:
        if not self.mode_e and (self.cached or len(self.held) > 1 or (self.held and self.held[0][0] != 0)):
            raise ValueError("stream mode resumes from a prefix only, on a new data connection")
        if not 1 <= self.streams <= MAX_STREAMS:
            raise ValueError(f"streams must be 1-{MAX_STREAMS}")


@dataclass(frozen=True)
class Done:
    replies: dict[Side, Reply]


@dataclass(frozen=True)
class Failed:
    side: Side  # whose reply (or connection) failed it
    reason: str  # "STOR /x: 553 ...", or the connection's error
    reply: Reply | None
    abort: tuple[Side, ...] = ()  # the transfers still running: ABOR them


Outcome = Done | Failed


def port_argument(host: str, port: int) -> str:
    """PORT's h1,h2,h3,h4,p1,p2 (RFC 959 4.1.2) for an IPv4 address."""
    parts = host.split(".")
    if len(parts) != 4 or not all(p.isdigit() and int(p) < 256 for p in parts) or not 0 < port < 65536:
        raise ValueError(f"not an IPv4 address and port: {host}:{port}")
    return ",".join(parts + [str(port >> 8), str(port & 255)])


def rest_argument(held: tuple[tuple[int, int], ...], mode_e: bool) -> str | None:
    """REST's argument for what B holds: the offset (stream mode, RFC 959
    3.5) or the ranges (extended block mode, GFD.20); None: from the start."""
    if not held or all(b <= a for a, b in held):
        return None
    if not mode_e:
        return str(held[0][1])
    return ",".join(f"{a}-{b}" for a, b in held if b > a)


@dataclass
class CopyFlow:
    spec: CopySpec
    phase: Phase = Phase.OPENING
    passive_side: Side = Side.DEST
    finals: dict[Side, Reply] = field(default_factory=dict)
    started: set[Side] = field(default_factory=set)  # sides whose transfer command went out
    address: tuple[str, int] | None = None  # the passive side's data address
    names: dict[Side, str] = field(default_factory=lambda: {side: f"the {side.value}" for side in Side})

    def opening(self) -> list[Command]:
        """The first commands: the passive side's PASV (with MODE E to both,
        and A's parallelism); on cached streams, the transfer commands."""
        s = self.spec
        out: list[Command] = []
        if s.cached:  # (MODE E in force on both; B's STOR first: it is there before A's blocks)
            return self._transfer(Side.DEST) + self._transfer(Side.SOURCE)
        if s.mode_e:
            out.append(Command(Side.DEST, "MODE E", f"extended block mode (MODE E) on {self.names[Side.DEST]}"))
            out.append(Command(Side.SOURCE, "MODE E", f"extended block mode (MODE E) on {self.names[Side.SOURCE]}"))
            n = s.streams
            out.append(Command(Side.SOURCE, f"OPTS RETR Parallelism={n},{n},{n};",
                               f"OPTS RETR Parallelism on {self.names[Side.SOURCE]}"))
        out.append(Command(Side.DEST, "PASV", f"passive mode (PASV) on {self.names[Side.DEST]}"))
        return out

    def passive(self, side: Side, reply: Reply) -> list[Command]:
        """The reply to a PASV: the active side's PORT and the passive
        side's transfer command (in MODE E the active side's too); or, B
        having refused in stream mode, A's PASV (reverse).  A refusal with
        no way round is a :class:`CopyError`."""
        if self.phase is not Phase.OPENING or side is not self.passive_side:
            raise CopyError(f"a PASV reply from the {side.value} was not expected")
        if reply.code != 227:
            if side is Side.DEST and not self.spec.mode_e:
                self.passive_side = Side.SOURCE  # reverse: A listens, B connects
                return [Command(Side.SOURCE, "PASV", f"passive mode (PASV) on {self.names[Side.SOURCE]}")]
            why = ("in extended block mode the source connects (GFD.20), so the destination must listen"
                   if side is Side.DEST else "neither server takes PASV")
            raise CopyError(f"{self.names[side]} refused PASV ({reply}); {why}")
        try:
            self.address = parse_pasv(reply)
            arg = port_argument(*self.address)
        except (ProtocolError, ValueError) as exc:
            raise CopyError(f"{self.names[side]} answered PASV with no IPv4 address: {reply}") from exc
        active = side.other
        out = [Command(active, f"PORT {arg}", f"active mode (PORT) on {self.names[active]}")]
        out += self._transfer(side)
        if self.spec.mode_e:
            out += self._transfer(active)
        return out

    def port_accepted(self) -> list[Command]:
        """The active side took PORT (200): in stream mode its transfer
        command goes now.  pyftpdlib connects at PORT and answers once
        connected; a RETR that reaches it while it still connects gets its
        150 before PORT's 200 (replies out of command order), so in stream
        mode the transfer command waits for that 200."""
        active = self.active_side
        if self.spec.mode_e or active in self.started:
            return []
        return self._transfer(active)

    @property
    def active_side(self) -> Side:
        return self.passive_side.other

    def _transfer(self, side: Side | None = None) -> list[Command]:
        """B's ALLO, REST and STOR, A's REST and RETR (``side``: one of them)."""
        s = self.spec
        rest = rest_argument(s.held, s.mode_e)
        out: list[Command] = []
        for one in (Side.DEST, Side.SOURCE):
            if side is not None and one is not side:
                continue
            if one is Side.DEST and s.size is not None:
                out.append(Command(Side.DEST, f"ALLO {s.size}", "ALLO"))
            if rest is not None:
                out.append(Command(one, f"REST {rest}", f"resume (REST) on {self.names[one]}"))
            line = f"STOR {s.dest_path}" if one is Side.DEST else f"RETR {s.source_path}"
            out.append(Command(one, line, f"{line} on {self.names[one]}"))
            self.started.add(one)
        if self.started == {Side.SOURCE, Side.DEST}:
            self.phase = Phase.RUNNING
        return out

    def refused(self, command: Command, reply: Reply) -> Failed:
        """A command before the transfer ones was refused (MODE E, OPTS,
        PORT, REST): the copy fails; transfers already sent are aborted."""
        return self._fail(command.side, f"{command.what} failed: {reply}", reply)

    def final(self, side: Side, reply: Reply) -> Outcome | None:
        """A transfer command's final reply: Done once both said 226/250;
        Failed at the first 4yz/5yz (the other side, still running, is
        aborted); None while the other's is awaited."""
        if self.phase in (Phase.DONE, Phase.FAILED):
            return None
        self.finals[side] = reply
        if not 200 <= reply.code < 300:
            return self._fail(side, self.transfer_failed(side, reply), reply)
        if all(s in self.finals for s in Side):
            self.phase = Phase.DONE
            return Done(dict(self.finals))
        return None

    def transfer_failed(self, side: Side, reply: Reply) -> str:
        """The sentence for ``side``'s transfer command's error reply (452:
        its storage is full, RFC 959 4.2, said in words with the path)."""
        verb = "STOR" if side is Side.DEST else "RETR"
        path = self.spec.dest_path if side is Side.DEST else self.spec.source_path
        if reply.code == 452:
            return f"no space left on {self.names[side]} for {path} ({verb} failed: {reply})"
        return f"{verb} {path} failed on {self.names[side]}: {reply}"

    def cause(self, failed: Failed, reply: Reply) -> Failed:
        """The other side's error reply that came after ``failed``'s: a
        transfer's 426 (its data connection closed) follows the one that
        closed it, which names the cause (a full disk's 452)."""
        side = failed.side.other
        self.finals[side] = reply
        return Failed(side, self.transfer_failed(side, reply), reply, ())

    def data_refused(self, failed: Failed, passive_connected: bool, moved: int) -> str | None:
        """The sentence for a copy whose data connection the passive side
        did not take: the active side's transfer failed with a 4yz (its
        connection closed at once) while the passive side's still waits
        with nothing received.  A server takes a data
        connection from a third host only when told to (RFC 2577 sec. 3;
        drsftp serve: --third-party-peers), and drops others unanswered,
        so the active side's error alone would name the wrong cause.
        None: not that failure."""
        passive = self.passive_side
        if (failed.side is passive or failed.reply is None or not 400 <= failed.reply.code < 500
                or passive not in failed.abort or passive_connected or moved):
            return None
        return (f"{self.names[passive]} did not take the data connection from {self.names[failed.side]}"
                f" ({failed.reason.rstrip('.')}): a server takes one from another host than its client's only"
                f" where it lists that host, as drsftp serve's --third-party-peers does")

    def lost(self, side: Side, why: str) -> Failed:
        """The ``side``'s control connection failed."""
        return self._fail(side, f"lost the control connection to {self.names[side]}: {why}", None)

    def _fail(self, side: Side, reason: str, reply: Reply | None) -> Failed:
        self.phase = Phase.FAILED
        other = side.other
        running = (other,) if other in self.started and other not in self.finals else ()
        return Failed(side, reason, reply, running)


class CopyError(Exception):
    """A copy that cannot go on: one sentence for the user."""
