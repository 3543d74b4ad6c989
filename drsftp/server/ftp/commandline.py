"""What a command line must be before ``drsftp serve`` runs it
(docs/DESIGN.md, "Server"; RFC 959 4.1.1, 5.3):

- at most 2048 bytes: a longer line gets 500 and is discarded to its end,
  never run in pieces (pyftpdlib ran its tail as a command of its own);
- nothing after QUIT: lines pipelined behind it are not run;
- a login first: commands pyftpdlib answers 530 before login get 530
  before their argument is looked at;
- no CR, LF or NUL in an argument: 553 for a command that creates the
  name, else 501 (drsftp.ftp.safepath.line_break_refusal; a name with a
  line break forged listing lines, a NUL closed the session).
"""

from __future__ import annotations

import logging

from ...ftp.safepath import line_break_refusal
from . import compat

_PYFTPDLIB = logging.getLogger("pyftpdlib")
_KNOWN = {_PYFTPDLIB.debug: logging.DEBUG, _PYFTPDLIB.info: logging.INFO}
_LEVELS = {"debug": logging.DEBUG, "info": logging.INFO, "warning": logging.WARNING, "error": logging.ERROR}


class CommandLines:
    """Mixed into the control handler (handler.DRSControlMixin, whose
    pre_process_command asks the ``refused_*`` rules in order)."""

    MAX_LINE = 2048

    def __init__(self, conn, server, ioloop=None):
        super().__init__(conn, server, ioloop)
        self._quit_received = False  # QUIT ends the session: later commands are not run (RFC 959 4.1.1)

    def collect_incoming_data(self, data):
        """pyftpdlib answers 500 to a line over 2048 bytes but then keeps
        collecting, so the line's tail ran as a command of its own (reply
        desync; command smuggling).  Discard up to the line's end instead."""
        if getattr(self, "_discarding", False) or self._quit_received:
            return
        if compat.line_buffer_add(self, data) > self.MAX_LINE:
            self.respond_w_warning("500 Command too long.")
            compat.line_buffer_clear(self)
            self._discarding = True

    def found_terminator(self):
        if self._quit_received:  # lines sent after QUIT (pipelined with it): the session is over
            compat.line_buffer_clear(self)
            return
        if getattr(self, "_discarding", False):
            self._discarding = False
            compat.line_buffer_clear(self)
            return
        super().found_terminator()

    def log(self, msg, logfun=_PYFTPDLIB.info):
        """pyftpdlib's log of a reply, only when its level is on: it built
        the session's prefix for every reply, logged or not (a small
        file's replies paid it several times; docs/decisions/0041)."""
        known = _KNOWN.get(logfun)  # (the common calls, a reply's and a command's: their level known)
        if known is not None:
            if _PYFTPDLIB.isEnabledFor(known):
                super().log(msg, logfun=logfun)
            return
        owner, level = getattr(logfun, "__self__", None), _LEVELS.get(getattr(logfun, "__name__", ""))
        if isinstance(owner, logging.Logger) and level is not None and not owner.isEnabledFor(level):
            return
        super().log(msg, logfun=logfun)

    def ftp_QUIT(self, line):
        self._quit_received = True
        super().ftp_QUIT(line)

    def refused_before_login(self, cmd, arg) -> bool:
        """Not logged in, ``cmd`` gets 530 (True) if it needs a login:
        before the argument's syntax (pyftpdlib answers a bare one 501), a
        client not logged in learns only that it must log in."""
        if self.authenticated or not self._needs_login(cmd, arg):
            return False
        msg = "Log in with USER and PASS first."
        self.respond("530 " + msg)
        self.log_cmd(cmd, arg, 530, msg)
        return True

    def _needs_login(self, cmd, arg) -> bool:
        """The command is one pyftpdlib answers 530 before login (STAT with
        a path is LIST; SITE's sub-commands have entries of their own)."""
        if cmd == "SITE" and arg:
            cmd = f"SITE {arg.split(' ')[0].upper()}"
        entry = self.proto_cmds.get(cmd)
        return entry is not None and bool(entry["auth"] or (cmd == "STAT" and arg))

    def refused_line_break(self, cmd, arg) -> bool:
        """An argument holding CR, LF or NUL is refused (True), whatever the
        command: a file stored under such a name wrote a line of its own
        into every listing (a forged entry), and pyftpdlib passed a NUL to
        os.path.realpath, whose ValueError closed the session."""
        reply = line_break_refusal(cmd, arg)
        if reply is None:
            return False
        self.respond(reply)
        self.log_cmd(cmd, repr(arg), int(reply[:3]), reply[4:])  # repr: no line break reaches a log
        return True
