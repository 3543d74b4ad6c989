"""pyftpdlib's functional test suite (pyftpdlib 2.2.0, MIT: LICENSE here)
run against drsftp's server handlers; README.md says what is vendored and
what differs from upstream.

Upstream's helpers (its ``tests/__init__.py``, here ``helpers.py``) are
imported with drsftp's classes in pyftpdlib's place and from the suite's
working directory, whose path they keep as the FTP users' home.
"""

import atexit
import os
import shutil
import tempfile

from .drsftp_handlers import swapped

WORKDIR = tempfile.mkdtemp(prefix="drsftp-pyftpdlib-suite-")
atexit.register(shutil.rmtree, WORKDIR, ignore_errors=True)

_cwd = os.getcwd()
os.chdir(WORKDIR)
try:
    with swapped(WORKDIR):
        from .helpers import *  # noqa: F403 (upstream's tests import these names from the package)
finally:
    os.chdir(_cwd)
