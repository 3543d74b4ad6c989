"""The standing FTP server with the DRS command (pyftpdlib)."""

from .app import ConfigError, ServerConfig, build_server, serve  # noqa: F401
from .handler import DRSFTPHandler  # noqa: F401
