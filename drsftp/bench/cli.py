"""`drsftp bench MODE`, `drsftp benchreport`, `drsftp datapath`, `drsftp netemcheck`:
the commands of the bench, each mode's options in its own package."""

from __future__ import annotations

from .benchreport import add_parser as add_benchreport
from .checks.cli import add_parsers as add_checks
from .compare.cli import add_parser as add_compare
from .compete.cli import add_parser as add_compete
from .field.cli import add_parser as add_field
from .smallfiles.cli import add_parser as add_smallfiles
from .thirdparty.cli import add_parser as add_third

MODES = ("compare", "field", "compete", "third-party", "smallfiles")


def add_parser(sub) -> None:
    p = sub.add_parser("bench", help="measure drsftp on an emulated WAN: " + ", ".join(MODES))
    modes = p.add_subparsers(dest="mode", required=True, metavar="{" + ",".join(MODES) + "}")
    add_compare(modes)
    add_field(modes)
    add_compete(modes)
    add_third(modes)
    add_smallfiles(modes)
    add_checks(sub)
    add_benchreport(sub)
