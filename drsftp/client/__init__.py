"""The asyncio FTP client with DRS."""

from .control import ControlConnection, FTPError  # noqa: F401
from .transfer import TransferOptions, TransferResult, get, put  # noqa: F401
