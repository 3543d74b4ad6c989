class NetemError(Exception):
    """The emulated link cannot be made, used or removed (one-line message)."""
