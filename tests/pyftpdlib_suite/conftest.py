"""pyftpdlib's functional tests with drsftp's handlers (drsftp_handlers.py);
the answers drsftp gives otherwise on purpose are deviations.py's list."""

from __future__ import annotations

import os
import threading

import pytest

from . import WORKDIR
from .deviations import DEVIATIONS, UNRELIABLE
from .drsftp_handlers import STOCK_RUN, swapped
from .helpers import FtpdThreadWrapper
from .resources import for_each_test_method  # noqa: F401 (upstream's leak check, an autouse fixture)

HERE = os.path.dirname(os.path.abspath(__file__))


def _ours(path) -> bool:
    return os.path.dirname(str(path)) == HERE


def upstream_id(item) -> str:
    """``file::Class::test``, as deviations.py names them."""
    return item.nodeid.rpartition("/")[2]


def pytest_configure(config):
    config.addinivalue_line("markers", "xdist_group(name): upstream's pytest-xdist grouping (unused here)")


@pytest.hookimpl(wrapper=True)
def pytest_make_collect_report(collector):
    """A test module binds pyftpdlib's handler names when it is imported."""
    if isinstance(collector, pytest.Module) and _ours(collector.path):
        with swapped(WORKDIR):
            return (yield)
    return (yield)


@pytest.fixture(autouse=True)
def drsftp_handlers(monkeypatch):
    """Each test runs in the users' home with drsftp's handlers in place;
    a server a failed test left running is stopped, so the next test's
    server is the only one on the shared ioloop."""
    monkeypatch.chdir(WORKDIR)
    with swapped(WORKDIR):
        yield
    for thread in threading.enumerate():
        if isinstance(thread, FtpdThreadWrapper) and thread.is_alive():
            thread._stop_flag = True
            thread.join(10)
            thread.server.close_all()


def _skipped_upstream(item) -> bool:
    for mark in item.iter_markers():
        if mark.name == "skip" or (mark.name == "skipif" and any(bool(c) for c in mark.args)):
            return True
    return False


def _left_out(item) -> bool:
    """Upstream's skips here (this suite forbids skips: they are not
    collected instead), the UNRELIABLE list, and the stream-mode classes
    test_functional_ssl imports (they run in test_functional)."""
    return (_skipped_upstream(item) or upstream_id(item) in UNRELIABLE
            or (item.cls is not None and item.cls.__module__ != item.module.__name__))


def pytest_collection_modifyitems(config, items):
    ours = [item for item in items if _ours(item.path)]
    drop = [item for item in ours if _left_out(item)]
    if drop:
        config.hook.pytest_deselected(items=drop)
        dropped = set(drop)
        items[:] = [item for item in items if item not in dropped]
    modules = {upstream_id(item).partition("::")[0]: item.module for item in ours}
    stale = [tid for tid in [*DEVIATIONS, *UNRELIABLE] if not _defined(tid, modules)]
    if stale:
        raise pytest.UsageError(f"deviations.py lists tests the suite does not have: {stale}")


def _defined(tid: str, modules: dict) -> bool:
    """The upstream test ``file::Class::test`` exists (or its file was not collected)."""
    file, cls, name = tid.split("::")
    if file not in modules:
        return True
    return callable(getattr(getattr(modules[file], cls, None), name, None))


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item, call):
    """A listed deviation passes only when it fails as listed; a listed
    test that passes fails (drsftp now answers as pyftpdlib: strike it)."""
    report = yield
    deviation = DEVIATIONS.get(upstream_id(item)) if _ours(item.path) and not STOCK_RUN else None
    if deviation is None or report.when != "call":
        return report
    if report.passed:
        report.outcome = "failed"
        report.longrepr = (f"listed as a deviation ({deviation.rule}) but passed: remove it from"
                           " tests/pyftpdlib_suite/deviations.py and docs/PROTOCOL.md")
    elif report.failed and all(s in str(report.longrepr) for s in deviation.shows):
        report.outcome = "passed"
        report.longrepr = None
        report.sections.append(("drsftp deviation", f"{deviation.rule}: {deviation.reason}"))
    return report
