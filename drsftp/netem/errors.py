import functools
from collections.abc import Callable


class NetemError(Exception):
    """The emulated link cannot be made, used or removed (one-line message)."""


class NetemUsageError(NetemError):
    """A bad option or value, refused before anything is made: a usage error."""


def usage_exit(func: Callable[..., int]) -> Callable[..., int]:
    """A subcommand whose NetemUsageError leaves as the command line's
    UsageError: exit 2, as every usage error (drsftp/cli.py)."""
    @functools.wraps(func)
    def run(args) -> int:
        try:
            return func(args)
        except NetemUsageError as exc:
            from ..cli import UsageError

            raise UsageError(str(exc)) from None
    return run
