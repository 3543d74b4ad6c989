class NetemError(Exception):
    """The emulated link cannot be made, used or removed (one-line message)."""


class NetemUsageError(NetemError):
    """A bad option or value, refused before anything is made: a usage
    error, exit 2 as every usage error (drsftp/cli.py, main)."""
