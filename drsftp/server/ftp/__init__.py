"""The FTP front of ``drsftp serve`` (pyftpdlib): the control connection's handler and
commands, and its data planes: stream mode (stream/), extended block mode (eblock/), FTPS (tls/)."""
