"""The asyncio FTP client with DRS."""

from .result import TransferResult
from .session.control import ControlConnection, FTPError
from .transfer.getput import TransferOptions, get, put

__all__ = ["ControlConnection", "FTPError", "TransferOptions", "TransferResult", "get", "put"]
