"""The asyncio FTP client with DRS."""

from ..result import TransferResult
from .control import ControlConnection, FTPError
from .transfer import TransferOptions, get, put

__all__ = ["ControlConnection", "FTPError", "TransferOptions", "TransferResult", "get", "put"]
