"""What the command line sets for a transfer, on every client path
(single, -P, jobs)."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field


@dataclass
class TransferOptions:
    tuning: str = "drs"
    force_buffers: bool = False
    resume: bool = False  # --continue: also an older DEST, or the remote file of the final name
    # a --retries attempt (attempts.with_retries): continues only what this
    # run began writing, the names in ``wrote`` (owned()), never an older
    # file that was there before it
    resume_own: bool = False
    wrote: set[str] = field(default_factory=set)  # shared by replace()'s copies: one run's
    progress: bool | None = None  # None: only when stderr is a terminal
    use_drs_command: bool = True
    idle_timeout: float = 60.0
    max_time: float | None = None  # stop (ABOR) after this many seconds, like curl --max-time
    deadline: Deadline | None = None  # max_time's instant, set when the command starts (maxtime.py)
    verify: bool = False  # compare SHA-256 with the server's afterwards (client/transfer/verify.py)
    connect_timeout: float = 15.0
    tls: bool = False  # explicit FTPS: AUTH TLS, PBSZ 0, PROT P (RFC 4217)
    ca_file: str | None = None  # trust these CAs instead of the system store
    insecure: bool = False  # no certificate or name check (said on stderr)
    clear_data: bool = False  # with tls: PROT C, data connections in clear text (copy --tls-data clear)
    pasv_address: bool = False  # connect where PASV says (a server's --data-interface), not to the control host


def mark_written(opts: TransferOptions, key: str) -> None:
    """This run began writing ``key`` (a .part path, or remote_key()): a retry may continue it."""
    opts.wrote.add(key)


def owned(opts: TransferOptions, key: str) -> bool:
    """A retry's ``key`` to continue: one this run itself began writing."""
    return opts.resume_own and key in opts.wrote


def remote_key(host: str, port: int, path: str) -> str:
    return f"ftp://{host}:{port}{path}"


@dataclass(eq=False)
class Deadline:
    """--max-time as one instant from the command's start (client/transfer/maxtime.py)."""

    at: float  # the event loop's clock (loop.time())
    guard: asyncio.Timeout | None = None  # the transfer's own, until its data phase

    @classmethod
    def after(cls, seconds: float) -> Deadline:
        return cls(asyncio.get_running_loop().time() + seconds)

    def left(self) -> float:
        return max(0.0, self.at - asyncio.get_running_loop().time())

    @property
    def passed(self) -> bool:
        return self.left() <= 0

    def lift(self) -> None:
        """The data phase begins: it stops itself at the deadline."""
        if self.guard is not None and not self.guard.expired():  # (expired: its cancel lands next)
            self.guard.reschedule(None)
