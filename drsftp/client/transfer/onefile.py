"""One file over one stream-mode data connection: the rules a single get
or put (:mod:`.getput`) and each file of a dataset session
(:mod:`drsftp.client.trees.remote`) share, one home each
(docs/DESIGN.md, "Client"; docs/DATASETS.md).

* :func:`new_transfer`: the data socket's tuner and the transfer's state;
* :func:`rest_lines`: REST before the transfer command (RFC 959 sec. 4.1.3);
* :func:`open_part`: the download file;
* :func:`receive_data`, :func:`send_data`: the data path, in TLS under PROT P;
* :func:`run_data`: the data phase, timed from its first byte;
* :func:`transfer_done`: its end, the final reply as the flow table takes it.
"""

from __future__ import annotations

import asyncio
import os
import socket
import time
from collections.abc import Coroutine
from typing import Any

from ...ftp.flow import TransferDone
from ...ftp.replies import Reply
from ...io.tuner import SocketTuner
from ...tuning import Role
from ..session.control import FTPError, Pending
from ..session.flowctl import FlowControl
from .dataconn import send_tls
from .options import TransferOptions
from .streammode import StreamTransfer, drive_data, receive_file, send_file, server_says_why

REST_WHAT = "resume (REST)"  # what a refused REST is called: "resume (REST) failed: 502 ..."


def new_transfer(fc: FlowControl, opts: TransferOptions, role: Role, path: str, total: int | None,
                 offset: int) -> StreamTransfer:
    """The transfer of ``path`` (its name labels the progress bar) through
    the flow ``fc``, with its data socket's tuner.  SO_RCVLOWAT batching
    off over TLS: a close_notify is smaller than a batch."""
    tuner = SocketTuner(opts.tuning, role, allow_force=opts.force_buffers, batch_reads=fc.ctl.tls is None)
    return StreamTransfer(fc, tuner, opts, os.path.basename(path), total, offset)


def rest_lines(offset: int) -> tuple[str, ...]:
    """REST before the transfer command, resuming at ``offset`` (RFC 959
    sec. 4.1.3; a refusal is called :data:`REST_WHAT`); none from the start."""
    return (f"REST {offset}",) if offset else ()


def open_part(part: str, offset: int):
    """The download file, positioned at ``offset``.  A fresh download never
    truncates an old file in place: on ext4 (auto_da_alloc) a truncate then
    rewrite is flushed to disk on close, costing ~0.3 s per GiB."""
    if not offset:
        try:
            os.unlink(part)
        except FileNotFoundError:
            pass
    fd = os.open(part, os.O_WRONLY | os.O_CREAT, 0o644)
    f = open(fd, "wb", buffering=0, closefd=True)  # noqa: SIM115 (the caller closes it)
    if offset and os.fstat(fd).st_size > offset:
        f.truncate(offset)
    f.seek(offset)
    return f


def receive_data(sock: socket.socket, f, xfer: StreamTransfer) -> Coroutine[Any, Any, None]:
    """The get data path: into ``f`` up to the EOF, in TLS under PROT P."""
    return receive_file(sock, f, xfer, xfer.ctl.tls, xfer.ctl.host)


def send_data(sock: socket.socket, f, offset: int, count: int, xfer: StreamTransfer) -> Coroutine[Any, Any, None]:
    """The put data path: ``count`` bytes of ``f`` from ``offset``, through
    TLS under PROT P (the transport flushes, then sends close_notify), else
    from a thread (streammode.send_file)."""
    if xfer.ctl.tls is not None:
        return send_tls(sock, f, offset, count, xfer, xfer.ctl.tls, xfer.ctl.host)
    return send_file(sock, f, offset, count, xfer)


async def run_data(xfer: StreamTransfer, io: Coroutine[Any, Any, None], pending: Pending, label: str) -> float:
    """The data phase, once the transfer command's 1yz is in: ``io``
    (:func:`receive_data` or :func:`send_data`) under the ticker, timed
    from here (``xfer.started``), a failure explained by the server's
    final reply to ``pending`` (streammode.server_says_why).  The seconds
    it took."""
    xfer.started = time.monotonic()
    await server_says_why(drive_data(asyncio.ensure_future(io), xfer), pending, label)
    return time.monotonic() - xfer.started


def transfer_done(fc: FlowControl, pending: Pending, reply: Reply, what: str) -> Reply:
    """``reply``, the transfer command's final reply, where the flow table
    takes it as the transfer's end (226/250: stream mode's EOF ended the
    whole file, RFC 959 sec. 3.4.1); an FTPError naming ``what`` otherwise."""
    if not isinstance(fc.ended(pending, reply), TransferDone):
        raise FTPError(f"{what}: {reply}", reply)
    return reply
