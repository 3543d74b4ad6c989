"""A tree's files on one pair of sessions, pipelined, sans-IO: which
commands go to the source A and the destination B, and when, and what
each reply means for each file (docs/THIRDPARTY.md, "Trees"; decision
0024).  The files run in extended block mode on the pair's cached streams
(GFD.20; GridFTP's ``-fast -pp``); the driver sends what :meth:`PipeFlow.
sendable` returns and hands back every reply.

    open:  B: MODE E; PASV     A: MODE E; OPTS RETR Parallelism=N,N,N;
           at B's 227  A: PORT <B's address>
    file k A: [REST r;] RETR k          as soon as the driver adds it
           B: [ALLO n;] [REST r;] STOR k  once A started k (its 1yz) and B
                                          answered the STOR before it

- **A runs ahead.**  A takes each RETR after the one before (EBLOCK.md,
  "Pipelined transfers") and sends its blocks right after the last one's
  EODs; B's streams keep what comes before its STOR for that STOR
  (EBLOCK.md#early-blocks).  How far ahead is the driver's choice (the
  files it adds).
- **B's STORs follow A's starts.**  B gets STOR k only once A answered
  RETR k with 1yz, so every STOR B runs has its blocks coming, in the same
  order as A sends them; a RETR A refuses has no blocks and gets no STOR.
  B gets it only once it answered the STOR before, so none stands behind a
  STOR B might refuse (a refused STOR takes no stream, and its blocks
  would go to the next STOR).
- **A refusal of RETR k** (A's first reply is a 4yz/5yz) fails k alone.
- **Any other failure of k** (B refusing STOR k, whose blocks are on the
  streams; a 4yz/5yz after a 1yz on either side; a refused MODE E, OPTS,
  PASV, PORT or REST) **breaks the streams**: k fails; the files after k go
  back to the driver (not their failure); each side's transfers of k and
  later are aborted (ABOR) once that side has no earlier file left, so the
  files before k still finish; once every command is answered, the next
  file opens new streams (B's PASV closes the old ones, and with them any
  block of k).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field

from .replies import ProtocolError, Reply, parse_pasv
from .thirdparty import Side, port_argument, rest_argument


class Stage(enum.Enum):
    WAITING = "waiting"  # not sent to this side
    SENT = "sent"  # its transfer command went out
    STARTED = "started"  # answered 1yz
    DONE = "done"  # answered 226/250
    ENDED = "ended"  # answered otherwise (refused, failed, not run)


class State(enum.Enum):
    CLOSED = "closed"  # no streams: the next file opens them
    OPENING = "opening"  # MODE E and PASV out, B's address awaited
    OPEN = "open"  # streams (or PORT) in place: files run
    SETTLING = "settling"  # the streams broke: ABOR, every reply awaited, then CLOSED


@dataclass(eq=False)
class PipeFile:
    """One file of the pair: its paths, size (ALLO), the ranges B holds
    (REST), and how far each side has taken it."""

    seq: int  # its place in command order
    source_path: str
    dest_path: str
    size: int | None = None
    held: tuple[tuple[int, int], ...] = ()
    a: Stage = Stage.WAITING
    b: Stage = Stage.WAITING
    cached: bool = False  # streams an earlier file of the pair carried carry it

    @property
    def done(self) -> bool:
        return self.a is Stage.DONE and self.b is Stage.DONE

    def stage(self, side: Side) -> Stage:
        return self.a if side is Side.SOURCE else self.b

    def set_stage(self, side: Side, stage: Stage) -> None:
        if side is Side.SOURCE:
            self.a = stage
        else:
            self.b = stage

    def transfer_line(self, side: Side) -> str:
        """Its RETR to A, its STOR to B."""
        return f"RETR {self.source_path}" if side is Side.SOURCE else f"STOR {self.dest_path}"


@dataclass(eq=False)
class Send:
    """A command for ``side``; ``file``: the file it belongs to (None: the
    streams' setup or ABOR); ``transfer``: RETR/STOR (two replies)."""

    side: Side
    line: str
    what: str  # its name in an error sentence
    file: PipeFile | None = None
    transfer: bool = False


@dataclass
class FileDone:
    file: PipeFile


@dataclass
class FileFailed:
    file: PipeFile
    side: Side
    reason: str  # "STOR /x failed on the destination ...: 553 ..."
    reply: Reply | None
    alone: bool  # the streams go on (a RETR refused); else they broke


@dataclass
class FileBack:
    """Not this file's failure: its streams broke first; it goes back."""

    file: PipeFile


Event = FileDone | FileFailed | FileBack


@dataclass
class PipeFlow:
    streams: int = 1  # the streams A opens (OPTS RETR Parallelism)
    names: dict[Side, str] = field(default_factory=lambda: {side: f"the {side.value}" for side in Side})
    state: State = State.CLOSED
    files: list[PipeFile] = field(default_factory=list)  # in command order, until both sides end them
    outstanding: dict[Side, list[Send]] = field(default_factory=lambda: {Side.SOURCE: [], Side.DEST: []})
    broke_at: int | None = None  # SETTLING: the first file the break took
    aborted: set[Side] = field(default_factory=set)
    _port: str | None = None  # PORT's argument, from B's 227
    _seq: int = 0
    _used: bool = False  # the streams carried a file (the next is cached)

    @classmethod
    def on_open_streams(cls, streams: int, names: dict[Side, str] | None = None) -> PipeFlow:
        """A flow on streams an earlier file of the pair left open."""
        flow = cls(streams, names) if names is not None else cls(streams)
        flow.state, flow._used = State.OPEN, True
        return flow

    # -- the driver's side ----------------------------------------------------------------
    def add(self, source_path: str, dest_path: str, size: int | None = None,
            held: tuple[tuple[int, int], ...] = ()) -> PipeFile:
        f = PipeFile(self._seq, source_path, dest_path, size, held)
        self._seq += 1
        self.files.append(f)
        return f

    @property
    def settled(self) -> bool:
        """No command awaits a reply."""
        return not any(self.outstanding.values())

    def sendable(self) -> list[Send]:
        """What may go now, in order; each is then counted outstanding."""
        out: list[Send] = []
        if self.state is State.SETTLING:
            out += self._aborts()
            if self.settled:
                self.state, self.broke_at, self.aborted = State.CLOSED, None, set()
        if self.state is State.CLOSED and self.files:
            out += self._open()
        if self.state is State.OPEN:
            out += self._retrs() + self._stors()
        for s in out:
            self.outstanding[s.side].append(s)
        return out

    def began(self, send: Send, reply: Reply) -> None:
        """``send``'s transfer answered 1yz."""
        f = send.file
        if f is None or not send.transfer:
            return
        if f.stage(send.side) is Stage.SENT:
            f.set_stage(send.side, Stage.STARTED)

    def answered(self, send: Send, reply: Reply) -> list[Event]:
        """``send``'s final reply (a transfer's: after its 1yz, or in its place)."""
        if send in self.outstanding[send.side]:
            self.outstanding[send.side].remove(send)
        if (send.file is not None and send.file not in self.files) or (
                send.file is None and self.state is State.SETTLING):
            return []  # (its file ended or went back; a setup command or ABOR answered in a break)
        if send.transfer and send.file is not None:
            return self._transfer_reply(send, send.file, reply)
        if send.line.startswith(("ABOR", "ALLO")):
            return []  # (ALLO: a server may not need it, RFC 959 4.1.3)
        if send.line == "PASV" and reply.code == 227:  # (any other: refused, below)
            try:
                self._port = port_argument(*parse_pasv(reply))
            except (ProtocolError, ValueError):
                return self._break(send.file, Side.DEST, f"{self.names[Side.DEST]} answered PASV with no IPv4"
                                   f" address: {reply}", reply)
            if self.state is State.OPENING:
                self.state = State.OPEN
            return []
        if reply.ok and send.line != "PASV":
            return []
        why = (f"{send.what} failed: {reply}" if send.line != "PASV" else
               f"{self.names[Side.DEST]} refused PASV ({reply}); in extended block mode the source connects"
               " (GFD.20), so the destination must listen")
        return self._break(send.file, send.side, why, reply)

    def lost(self, side: Side, why: str) -> list[Event]:
        """``side``'s control connection failed: the first unfinished file
        fails, the rest go back; the pair is of no more use."""
        events = self._break(None, side, f"lost the control connection to {self.names[side]}: {why}", None)
        self.outstanding = {Side.SOURCE: [], Side.DEST: []}
        return events

    # -- what goes when -------------------------------------------------------------------
    def _open(self) -> list[Send]:
        self.state, self._port, self._used = State.OPENING, None, False
        n = self.streams
        return [Send(Side.DEST, "MODE E", f"extended block mode (MODE E) on {self.names[Side.DEST]}"),
                Send(Side.SOURCE, "MODE E", f"extended block mode (MODE E) on {self.names[Side.SOURCE]}"),
                Send(Side.SOURCE, f"OPTS RETR Parallelism={n},{n},{n};",
                     f"OPTS RETR Parallelism on {self.names[Side.SOURCE]}"),
                Send(Side.DEST, "PASV", f"passive mode (PASV) on {self.names[Side.DEST]}")]

    def _retrs(self) -> list[Send]:
        out: list[Send] = []
        if self._port is not None:
            out.append(Send(Side.SOURCE, f"PORT {self._port}", f"active mode (PORT) on {self.names[Side.SOURCE]}"))
            self._port = None
        for f in self.files:
            if f.a is Stage.WAITING:
                f.a = Stage.SENT
                out += self._transfer(f, Side.SOURCE)
        return out

    def _stors(self) -> list[Send]:
        for f in self.files:
            if f.b is Stage.SENT:
                return []  # B has not answered the STOR before
            if f.b is not Stage.WAITING:
                continue
            if f.a is not Stage.STARTED and f.a is not Stage.DONE:
                return []  # A has not started it: the later ones wait too (A's order)
            f.b = Stage.SENT
            f.cached = self._used
            self._used = True
            return self._transfer(f, Side.DEST)  # one STOR awaiting its first reply at a time
        return []

    def _transfer(self, f: PipeFile, side: Side) -> list[Send]:
        out: list[Send] = []
        if side is Side.DEST and f.size is not None:
            out.append(Send(Side.DEST, f"ALLO {f.size}", "ALLO", f))
        rest = rest_argument(f.held, True)
        if rest is not None:
            out.append(Send(side, f"REST {rest}", f"resume (REST) on {self.names[side]}", f))
        line = f.transfer_line(side)
        out.append(Send(side, line, f"{line} on {self.names[side]}", f, transfer=True))
        return out

    def _aborts(self) -> list[Send]:
        """ABOR to a side whose transfers left are all of the broken file
        or later (an earlier file there still finishes first)."""
        out = []
        for side in Side:
            if side in self.aborted:
                continue
            mine = [s.file.seq for s in self.outstanding[side] if s.file is not None]
            if mine and self.broke_at is not None and min(mine) >= self.broke_at:
                self.aborted.add(side)
                out.append(Send(side, "ABOR", f"ABOR on {self.names[side]}"))
        return out

    # -- replies --------------------------------------------------------------------------
    def _transfer_reply(self, send: Send, f: PipeFile, reply: Reply) -> list[Event]:
        side = send.side
        started = f.stage(side) is Stage.STARTED
        ok = reply.code in (226, 250)  # (RFC 959: closing the data connection; file action done)
        f.set_stage(side, Stage.DONE if ok else Stage.ENDED)
        if ok:
            if f.done:
                self.files.remove(f)
                return [FileDone(f)]
            return []
        reason = f"{f.transfer_line(side)} failed on {self.names[side]}: {reply}"
        if side is Side.SOURCE and not started and f.b is Stage.WAITING:
            self.files.remove(f)  # A refused it: no block, no STOR; the rest go on
            f.b = Stage.ENDED
            return [FileFailed(f, side, reason, reply, alone=True)]
        return self._break(f, side, reason, reply)

    def _break(self, f: PipeFile | None, side: Side, reason: str, reply: Reply | None) -> list[Event]:
        """The streams broke at ``f`` (None: the first file not ended):
        it fails, the later ones go back.  Settling already, an earlier
        file's failure moves the break down to it; a later one's is part
        of the break (that file went back)."""
        if f is None:
            f = next(iter(self.files), None)
        self.state = State.SETTLING
        self._port = None
        at = f.seq if f is not None else self._seq  # (None: the streams' setup with no file left)
        if self.broke_at is not None and at >= self.broke_at:
            return []
        self.broke_at = at
        events: list[Event] = []
        for g in list(self.files):
            if g.seq < at:
                continue  # finishes on its own, or fails on its own
            self.files.remove(g)
            events.append(FileFailed(g, side, reason, reply, alone=False) if g is f else FileBack(g))
        return events
