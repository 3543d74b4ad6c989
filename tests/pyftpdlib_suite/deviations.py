"""Where drsftp's server answers otherwise than stock pyftpdlib on purpose
(docs/PROTOCOL.md, "Deviations from stock pyftpdlib"): the upstream tests
that expect pyftpdlib's answer, each failing the way this list says.

conftest.py checks the list strictly: a listed test that passes, or fails
with other words than ``shows``, fails the run, so the list stays true.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Deviation:
    rule: str  # the heading in docs/PROTOCOL.md
    reason: str
    shows: tuple[str, ...]  # all found in the failure's report
    tests: tuple[str, ...]  # upstream test ids, file::Class::test


RULES = (
    Deviation(
        rule="REIN during a transfer",
        reason="503 while a transfer runs (docs/SECURITY.md, commands that corrupt a running transfer);"
               " pyftpdlib logs the session out mid-transfer",
        shows=("503 Bad sequence of commands: a transfer is running; REIN refused",),
        tests=("test_functional.py::TestFtpAuthentication::test_rein_during_transfer",
               "test_functional_ssl.py::TestFtpAuthenticationTLSMixin::test_rein_during_transfer"),
    ),
    Deviation(
        rule="ALLO takes a size",
        reason="ALLO's size is the next upload's length, which tells a complete upload from a cut one;"
               " 'ALLO x' is a syntax error (RFC 959 4.1.3: ALLO <decimal-integer>), not pyftpdlib's 202",
        shows=("501 ALLO wants a size in bytes",),
        tests=("test_functional.py::TestFtpDummyCmds::test_allo",
               "test_functional_ssl.py::TestTFtpDummyCmdsTLSMixin::test_allo"),
    ),
    Deviation(
        rule="No 150 without a data connection",
        reason="STOU with no data connection open or being made gets 425 as its final reply;"
               " pyftpdlib answers 150 and waits, forever if no PORT/PASV follows",
        shows=('filename = self.client.sendcmd("stou")', "425 Can't open data connection"),
        tests=("test_functional.py::TestFtpStoreData::test_stou",
               "test_functional.py::TestFtpStoreDataNoSendfile::test_stou",
               "test_functional.py::TestFtpStoreDataWithCustomIO::test_stou"),
    ),
    Deviation(
        rule="No reply when a passive listener times out",
        reason="the listener closes without a reply unless a transfer command waits for it; pyftpdlib's"
               " 421 answers no command, so a client takes it for the reply to its next one",
        shows=("self.client.sock.recv(BUFSIZE)", "timed out"),
        tests=("test_functional.py::TestTimeouts::test_pasv_timeout",
               "test_functional_ssl.py::TestTimeoutsTLSMixin::test_pasv_timeout"),
    ),
    Deviation(
        rule="An incomplete upload is reported by its part file",
        reason="on_incomplete_file_received gets .NAME.part, the file that holds the incomplete data;"
               " NAME is untouched (an earlier complete version, or nothing), and the hook's usual job,"
               " removing what it is given, must not remove that",
        shows=("on_incomplete_file_received:.pyftpd-tmp-", ".part,'; expected:"),
        tests=("test_functional.py::TestCallbacks::test_on_incomplete_file_received",),
    ),
    Deviation(
        rule="UNIX facts spelled as GridFTP spells them",
        reason="MLST/MLSD name the OS-specific facts UNIX.mode, UNIX.uid, UNIX.gid, as globus-gridftp-server,"
               " ProFTPD and Pure-FTPd do (docs/PROTOCOL.md#mlst-facts); RFC 3659 sec. 7.1 makes fact names"
               " case-independent, and the upstream test compares them case-sensitively",
        shows=("assert sorted(local) == sorted(returned)", "UNIX.gid"),
        tests=("test_functional.py::TestFtpListingCmds::test_mlsd_all_facts",
               "test_functional_ssl.py::TestFtpListingCmdsTLSMixin::test_mlsd_all_facts"),
    ),
    Deviation(
        rule="A reset upload is not complete",
        reason="an upload whose data connection was reset ends with 426 and stays under its temporary"
               " name; the TLS test closes its data socket with the server's TLS 1.3 session ticket unread,"
               " so its kernel resets the connection and drops what it had not sent yet (about 80% of the"
               " 1 MB), which pyftpdlib stores as whole with a 226",
        shows=("426 Connection lost (Connection reset by peer); transfer aborted after",),
        tests=("test_functional_ssl.py::TestFtpStoreDataTLSMixin::test_quit_during_transfer",),
    ),
)

DEVIATIONS = {test: rule for rule in RULES for test in rule.tests}

# Upstream tests left out with upstream's own reason (they fail with stock
# pyftpdlib too).
UNRELIABLE = {
    "test_functional_ssl.py::TestFtpListingCmdsTLSMixin::test_nlst":
        "upstream skips it on CI ('may fail on CI'): ftplib's unwrap() of an empty TLS data"
        " connection fails (SHUTDOWN_WHILE_IN_INIT) against stock pyftpdlib as well",
}
