"""drsftp: FTP-compatible bulk transfer with Dynamic Right-Sizing of TCP buffers."""

__version__ = "0.1.0"
