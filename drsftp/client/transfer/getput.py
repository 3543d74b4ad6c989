"""`drsftp get` / `drsftp put`: one file over one FTP session, with DRS
(docs/DESIGN.md, "Client").

The session (:mod:`.session`), then in stream mode EPSV, (ALLO,) (REST,)
and RETR or STOR through the flow table (:mod:`.flowctl`), the data
connection opened while they go out (:mod:`.dataconn`) and moved by
:mod:`.streammode`, by the rules a dataset session's files take too
(:mod:`.onefile`); ``--continue`` resumes with REST, ``--verify``
compares digests afterwards (:mod:`.verify`).
"""

from __future__ import annotations

import asyncio
import os
import time
from typing import BinaryIO

from ...ftp.flow import FlowError
from ...ftp.partname import download_part, partial_name
from ...ftp.url import FTPLocation
from ...tuning import Role, check_spec
from ..result import TransferResult
from ..session.control import ControlConnection, FTPError, Pending, os_reason, size_of
from ..session.flowctl import FlowControl
from ..session.login import open_logged_in, open_session, warn_without_drs
from ..streams.rangeplan import drop_record, held_prefix
from . import maxtime
from .attempts import already_complete, make_parents
from .dataconn import LocalWriteError
from .onefile import REST_WHAT, new_transfer, open_part, receive_data, rest_lines, run_data, send_data, transfer_done
from .options import TransferOptions, mark_written, owned, remote_key
from .streammode import check_sent, close_data, drain_sent
from .verify import verify


async def _finish(fc: FlowControl, pending: Pending, label: str) -> None:
    reply = await asyncio.wait_for(asyncio.shield(pending.final), 120)
    transfer_done(fc, pending, reply, f"{label} failed")


async def get(loc: FTPLocation, dest: str, opts: TransferOptions) -> TransferResult:
    return await maxtime.within(opts, "get", loc.path, lambda o: _get(loc, dest, o))


async def _get(loc: FTPLocation, dest: str, opts: TransferOptions) -> TransferResult:
    check_spec(opts.tuning)
    part = download_part(dest)
    ctl, (size_reply,) = await open_session(loc, opts, [f"SIZE {loc.path}"])
    try:
        warn_without_drs(ctl, opts)
        size = size_of(size_reply)
        offset, resume_dest = _local_prefix(dest, part, size, opts)
        if resume_dest and offset == size:
            return already_complete("get", loc.path, size)
        fc = FlowControl(ctl)
        xfer = new_transfer(fc, opts, Role.RECEIVER, loc.path, size, offset)
        try:
            sent: list = []
            # (REST and) RETR in one batch, while the data connection opens
            sock = await xfer.open_data(lambda: sent.extend(
                (fc.send_all(_rest(offset)), fc.send(f"RETR {loc.path}"))))
            try:
                rest, pending = sent
                await fc.check(rest, pending)
                await fc.started(pending, f"cannot retrieve {loc.path}")
                xfer.tuner.attach(sock)
                try:
                    make_parents(dest)  # (not before: a refused RETR makes no directory)
                    if resume_dest:  # (not before: a refused RETR leaves DEST as it was)
                        os.replace(dest, part)
                    f = open_part(part, offset)
                    drop_record(part)  # (the part is a prefix now, its record of no use)
                    mark_written(opts, part)
                except OSError as exc:
                    raise FTPError(f"cannot write {dest}: {os_reason(exc)}", transient=False) from exc
                with f:
                    try:
                        seconds = await run_data(xfer, receive_data(sock, f, xfer), pending, f"RETR {loc.path}")
                    except LocalWriteError as exc:
                        raise exc.naming(dest) from exc
                close_data(sock, xfer)
                if xfer.timed_out:
                    await _abort(fc, pending)
                    return xfer.result("get", loc.path, size, offset, seconds, complete=False)
                await _finish(fc, pending, f"RETR {loc.path}")
            finally:
                close_data(sock, xfer)
        finally:
            xfer.finish_view()
        if size is not None and offset + xfer.moved != size:
            raise FTPError(f"short transfer: {offset + xfer.moved} of {size} bytes (--continue resumes)")
        digest = await verify(ctl, loc.path, part) if opts.verify else None
        try:
            os.replace(part, dest)
        except OSError as exc:
            raise FTPError(f"cannot write {dest}: {os_reason(exc)}", transient=False) from exc
        result = xfer.result("get", loc.path, size, offset, seconds)
        result.sha256 = digest
        return result
    finally:
        await ctl.close()


def _local_prefix(dest: str, part: str, size: int | None, opts: TransferOptions) -> tuple[int, bool]:
    """Where a get continues, and whether it continues DEST itself (which
    becomes DEST.part once data comes): --continue takes DEST.part, else
    DEST; a retry only a DEST.part this run wrote (options.owned)."""
    if (opts.resume or owned(opts, part)) and os.path.isfile(part):
        have, resume_dest = os.path.getsize(part), False
    elif opts.resume and os.path.isfile(dest):
        have, resume_dest = os.path.getsize(dest), True
    else:
        return 0, False
    if size is not None and have > size:
        raise FTPError(f"local file ({have} B) is larger than the remote one ({size} B)", transient=False)
    # a -P get's part (its record beside it) holds ranges with holes between:
    # only the bytes up to its first gap are a prefix
    return (have if resume_dest else held_prefix(part, size)), resume_dest


async def put(src: str, loc: FTPLocation, opts: TransferOptions) -> TransferResult:
    return await maxtime.within(opts, "put", loc.path, lambda o: _put(src, loc, o))


async def _put(src: str, loc: FTPLocation, opts: TransferOptions) -> TransferResult:
    check_spec(opts.tuning)
    f, total, ctl = await open_put(src, loc, opts)
    with f:
        try:
            offset = 0
            key = remote_key(loc.host, loc.port, loc.path)
            if opts.resume or owned(opts, key):
                offset = await uploaded_prefix(ctl, loc.path, src, total, final=opts.resume)
                if offset == total:
                    return already_complete("put", loc.path, total)
            fc = FlowControl(ctl)
            xfer = new_transfer(fc, opts, Role.SENDER, src, total, offset)
            try:
                sent: list = []
                # ALLO, (REST,) STOR in one batch, while the data connection
                # opens.  ALLO: the size, so a server can tell an upload cut
                # short from a complete one (stream mode ends both by closing).
                sock = await xfer.open_data(lambda: sent.extend(
                    (fc.send(f"ALLO {total}"), fc.send_all(_rest(offset)), fc.send(f"STOR {loc.path}"))))
                try:
                    allo, rest, pending = sent
                    await fc.reply(allo)  # (refused or not: a server may not need it, RFC 959 4.1.3)
                    await fc.check(rest, pending)
                    await fc.started(pending, f"cannot store {loc.path}")
                    mark_written(opts, key)
                    xfer.tuner.attach(sock)
                    await run_data(xfer, send_data(sock, f, offset, total - offset, xfer), pending, f"STOR {loc.path}")
                    if xfer.timed_out:
                        xfer.moved = xfer.progress_bytes()
                        seconds = time.monotonic() - xfer.started
                        close_data(sock, xfer)
                        await _abort(fc, pending)
                        return xfer.result("put", loc.path, total, offset, seconds, complete=False)
                    await drain_sent(sock, xfer, xfer.tuner)
                    seconds = time.monotonic() - xfer.started
                    sock.close()
                    await _finish(fc, pending, f"STOR {loc.path}")
                    check_sent(xfer, total - offset, src)
                finally:
                    close_data(sock, xfer)
            finally:
                xfer.finish_view()
            result = xfer.result("put", loc.path, total, offset, seconds)
            result.sha256 = await verify(ctl, loc.path, src) if opts.verify else None
            return result
        finally:
            await ctl.close()


async def open_put(src: str, loc: FTPLocation, opts: TransferOptions) -> tuple[BinaryIO, int, ControlConnection]:
    """The file to put, its size and a logged-in session (the absence of
    DRS said): an unreadable file fails before any connection is made."""
    try:
        f = open(src, "rb")  # noqa: SIM115 (the caller closes it)
    except OSError as exc:
        raise FTPError(f"cannot read {src}: {os_reason(exc)}", transient=False) from exc
    try:
        ctl = await open_logged_in(loc, opts)
    except BaseException:
        f.close()
        raise
    warn_without_drs(ctl, opts)
    return f, os.fstat(f.fileno()).st_size, ctl


async def uploaded_prefix(ctl: ControlConnection, path: str, src: str, total: int, final: bool = True) -> int:
    """What an interrupted stream-mode put left on the server, a prefix of
    the file: on a drsftp server (which keeps an unfinished upload under a
    temporary name, and continues that one at REST) that name's size where
    it has one, not the size of an older file of the final name; else the
    remote file's size.  ``final`` False (a retry of this run's own put):
    on a drsftp server never the final name's, which is an older file."""
    offset = 0
    drs = "DRS" in ctl.features
    if drs:
        offset = await ctl.size(partial_name(path)) or 0
    if not offset and (final or not drs):
        offset = await ctl.size(path) or 0
    if offset > total:
        raise FTPError(f"remote file ({offset} B) is larger than {src} ({total} B)", transient=False)
    return offset


def _rest(offset: int) -> list[tuple[str, str]]:
    """:func:`onefile.rest_lines` as steps: a refusal fails the transfer as
    "resume (REST) failed"."""
    return [(line, REST_WHAT) for line in rest_lines(offset)]


async def _abort(fc: FlowControl, pending: Pending) -> None:
    """ABOR (RFC 959 4.1.3): the server answers 426 for the transfer, then 226."""
    try:
        abor = fc.send("ABOR")
        await asyncio.wait_for(asyncio.gather(pending.final, abor.final, return_exceptions=True), 10)
    except (TimeoutError, FTPError, FlowError):
        pass


