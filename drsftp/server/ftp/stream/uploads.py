"""Stream-mode uploads under a temporary name in ``drsftp serve``
(docs/DESIGN.md, "Server"; the part file: ftp/partfile.py).

- STOR writes ``.NAME.part`` and renames it when complete, so an
  interrupted upload never looks complete; REST + STOR continues the part
  file (or NAME itself, resumed some other way); APPE appends to NAME.
- ALLO (RFC 959) announces the upload's size: a shorter upload is not
  complete (stream mode ends a file by closing the connection, RFC 959
  3.4.1, so a client that died looks done).
- A complete upload is renamed before the 226 if its part file's name
  still leads to the file it wrote (else 451: the file there is another's);
  an incomplete one stays for REST (451), unless it wrote nothing to a
  part file of its own.
- One upload writes a part file at a time: a STOR whose part file another
  session is writing gets 450 (two writers would interleave).
- QUIT during an upload keeps reading the control connection: its close
  ends the upload, never renamed into place.
- A STOR onto a directory is refused before a part file is made; with no
  data connection to come, STOR and APPE answer 425 before truncating or
  creating anything (ftp/stream/finalreply.py).
"""

from __future__ import annotations

import calendar
import contextlib
import datetime
import logging
import os
import time
from typing import Any

from pyftpdlib.filesystems import FilesystemError
from pyftpdlib.utils import strerror

from .. import compat, partfile

log = logging.getLogger("drsftp.server")


class UploadCommands:
    """STOR, APPE's open and ALLO; mixed into the control handler
    (handler.DRSControlMixin)."""

    def __init__(self, conn, server, ioloop=None):
        super().__init__(conn, server, ioloop)
        # temporary path -> (final path, expected size, part file started afresh)
        self._upload_targets: dict[str, tuple[str, int | None, bool]] = {}
        self._allo: int | None = None  # size announced by ALLO for the next STOR

    def ftp_STOR(self, file, mode="w"):
        """STOR writes ``.NAME.part`` and renames it when complete, so an
        interrupted upload never looks complete; REST + STOR continues the
        temporary file.  APPE appends to the file itself (mode 'a')."""
        if "a" in mode:
            return None if self._refused_before_open(file) else super().ftp_STOR(file, mode)
        expected, self._allo = self._allo, None
        if os.path.isdir(file):
            compat.restart_position(self, 0)
            self.respond(partfile.OVER_DIRECTORY)
            return None
        temp = partfile.part_path(file)
        if partfile.busy(temp):  # another session writes it: refused before it is truncated or appended to
            compat.restart_position(self, 0)
            self.respond(partfile.BUSY)
            return None
        if os.path.islink(temp):  # (opened, it would write where the link points, maybe outside the home)
            compat.restart_position(self, 0)
            self.respond(partfile.PART_LINK)
            return None
        fresh = not compat.restart_position(self)  # REST continues a part file; STOR alone starts it anew
        if fresh and self._refused_before_open(temp):
            return None
        if not fresh and not os.path.exists(temp) and os.path.isfile(file):
            temp = file  # resuming a file some other way: continue it in place
        result = super().ftp_STOR(temp, mode)
        if result is not None and temp != file:
            self._upload_targets[temp] = (file, expected, fresh)
            partfile.claim(temp)
        return result

    def _refused_before_open(self, path) -> bool:
        """A STOR without REST truncates its part file and APPE may create
        its file: with no data connection to come, 425 before either
        (only opening's own 550, the directory missing, comes first)."""
        if not self._without_data_path or not os.path.isdir(os.path.dirname(path)):
            return False
        self.respond(self.NO_DATA_PATH)
        return True

    def ftp_ALLO(self, line):
        """RFC 959 ALLO: drsftp takes the size as the upload's expected
        length, so a connection that closes early is not a complete file."""
        try:
            size = int(line.split()[0])
            if size < 0:
                raise ValueError
        except (ValueError, IndexError):
            self.respond("501 ALLO wants a size in bytes.")
            return
        self._allo = size
        self.respond(f"200 ALLO {size} bytes: the upload must be that long.")

    def ftp_MFMT(self, path, timeval):
        """pyftpdlib's MFMT (draft-somers-ftp-mfxx: ``MFMT YYYYMMDDHHMMSS
        path``, UTC) at a third of its cost, a put's one command a file
        besides its transfer: no realpath (the path passed validpath; isfile
        follows links as well), the time read by its fixed fields (strptime
        cost more than the rest)."""
        line = self.fs.fs2ftp(path)
        secs = _mfmt_seconds(timeval)
        if secs is None:
            self.respond("550 Invalid time format; expected: YYYYMMDDHHMMSS.")
            return None
        if not self.fs.isfile(path):
            self.respond(f"550 {line} is not retrievable")
            return None
        try:
            self.run_as_current_user(self.fs.utime, path, secs)
            mtime = self.run_as_current_user(self.fs.getmtime, path)
            lmt = time.strftime("%Y%m%d%H%M%S", (time.gmtime if self.use_gmt_times else time.localtime)(mtime))
        except ValueError:  # a time before 1900
            self.respond("550 Can't determine file's last modification time.")
            return None
        except (OSError, FilesystemError) as err:
            self.respond(f"550 {strerror(err)}.")
            return None
        self.respond(f"213 Modify={lmt}; {line}.")
        return lmt, path

    def take_upload_target(self, temp) -> tuple[str, int | None, bool] | None:
        """(final path, expected size, part file started afresh) of the
        upload written to ``temp``; the data channel takes it at its close,
        and the part file is free for another upload from then on."""
        target = self._upload_targets.pop(temp, None)
        if target is not None:
            partfile.release(temp)
        return target

    def _drop_upload(self, f) -> None:
        """Close the file of a transfer that never started; an upload's part
        file it made is removed (nothing was written)."""
        target = self.take_upload_target(getattr(f, "name", ""))
        f.close()
        if target is not None and target[2]:
            partfile.discard_if_empty(f.name)

    def ftp_QUIT(self, line):
        """RFC 959 4.1.1: QUIT during a transfer keeps the session open for
        its final reply.  Stock pyftpdlib stops reading the control
        connection then, so a client that closed it went unnoticed and a
        stream-mode upload, ended by the data connection's EOF (RFC 959
        3.4.1), was renamed into place as if complete.  During an upload
        this session keeps reading (lines after QUIT are dropped:
        ftp/commandline.py): the control connection's close ends the upload,
        kept under its part name."""
        if not self._upload_targets or self.data_channel is None:
            return super().ftp_QUIT(line)
        self.respond("221 Goodbye: closing after the running upload.")
        compat.quit_after_transfer(self)
        if self.authenticated and self.username:
            self.on_logout(self.username)
        return None

    def close(self):
        if not compat.closed(self):  # a STOR still waiting for its data connection
            f = compat.queued_upload(self)
            if f is not None:
                self._drop_upload(f)
        super().close()


class UploadPlacement:
    """The rename at the end of an upload; mixed into the data channel
    (datachannel.DRSDataMixin), whose close calls _finish_upload."""

    # what it reads and sets of pyftpdlib's DTPHandler
    cmd_channel: Any
    file_obj: Any  # the transfer's file
    receive: bool
    transfer_finished: bool

    def _finish_upload(self) -> None:
        """A complete upload is renamed into place before the 226 is sent;
        an incomplete one stays under its temporary name (resumable), unless
        it wrote nothing to a part file of its own (nothing to resume)."""
        target = self.cmd_channel.take_upload_target(getattr(self.file_obj, "name", None))
        if target is None or not self.receive:
            return
        final, expected, fresh = target
        if compat.closed(self.cmd_channel):
            # the session that ordered the STOR is gone (or it sent ABOR): the
            # data connection's EOF alone does not prove the upload complete
            self.transfer_finished = False
        if not self.transfer_finished or not (compat.final_reply(self) or "").startswith("226"):
            if fresh:
                with contextlib.suppress(OSError, ValueError):
                    self.file_obj.flush()  # what it holds counts as written
                partfile.discard_if_empty(self.file_obj.name)
            return
        try:
            self.file_obj.flush()
            size = os.fstat(self.file_obj.fileno()).st_size
            if not partfile.same_file(self.file_obj.name, self.file_obj.fileno()):
                self.file_obj.close()
                self.transfer_finished = False
                compat.set_final_reply(self, partfile.REPLACED, log.warning)
                return
            self.file_obj.close()
            if expected is not None and size != expected:
                # Stream mode ends a file by closing the connection (RFC 959
                # 3.4.1), so a client that died looks done: the size it
                # announced with ALLO tells the difference.
                self.transfer_finished = False
                kept = "" if fresh and partfile.discard_if_empty(self.file_obj.name) else "; kept for REST to resume"
                reply = f"451 Upload incomplete: {size} of {expected} bytes{kept}."
                compat.set_final_reply(self, reply, log.warning)
                return
            os.replace(self.file_obj.name, final)
            self.file_obj = _MovedUpload(final)  # pyftpdlib reports this name to log_transfer, on_file_received
        except OSError as exc:
            self.transfer_finished = False
            compat.set_final_reply(self, f"451 Cannot move the upload into place: {exc.strerror}.", log.warning)


class _MovedUpload:
    """A complete upload's file, closed and renamed into place: what
    pyftpdlib's DTPHandler.close reads of it (``closed``, ``name``)."""

    closed = True

    def __init__(self, name: str) -> None:
        self.name = name

    def close(self) -> None:
        pass


def _mfmt_seconds(timeval: str) -> float | None:
    """``YYYYMMDDHHMMSS`` (UTC) as seconds since the epoch; None if it is not one."""
    if len(timeval) != 14 or not timeval.isascii() or not timeval.isdigit():
        return None
    try:
        when = datetime.datetime(int(timeval[:4]), int(timeval[4:6]), int(timeval[6:8]), int(timeval[8:10]),
                                 int(timeval[10:12]), int(timeval[12:]))
    except ValueError:
        return None
    return float(calendar.timegm(when.timetuple()))
