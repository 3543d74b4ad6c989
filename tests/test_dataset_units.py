"""Sans-IO parts of dataset jobs: listings, path safety, the planner and
-c auto's controller."""

import asyncio
import os
import posixpath

import pytest
from hypothesis import given
from hypothesis import strategies as st

from drsftp.client.trees.plan import Stat, complete, plan
from drsftp.ftp.listing import (
    DIR,
    FILE,
    LINK,
    Entry,
    parse_list,
    parse_list_line,
    parse_mlsd,
    parse_mlst_reply,
)
from drsftp.ftp.safepath import UnsafePath, check_name, local_path, remote_join
from drsftp.tuning.count.fleet import Change, FleetConfig, FleetController, Kind, Work
from drsftp.tuning.count.streams import StreamSample

# -- listings ------------------------------------------------------------------------


def test_mlsd_facts_and_names_with_spaces():
    data = (b"type=cdir;modify=20240101000000;perm=el; .\r\n"
            b"type=pdir;modify=20240101000000;perm=el; ..\r\n"
            b"type=file;size=156;modify=20071029155301.5;unique=8012; music file.mp3\r\n"
            b"Type=DIR;Modify=20071127230206;UNIQUE=801e33; ebooks\r\n"
            b"type=OS.unix=slink:/x;size=3; ln\r\n"
            b"type=file;size=0;  two leading\r\n"
            b"garbage without facts\r\n" +
            "type=file;size=7; ünï\r\n".encode())
    entries = parse_mlsd(data)
    assert [(e.name, e.type, e.size) for e in entries] == [
        ("music file.mp3", FILE, 156), ("ebooks", DIR, None), ("ln", LINK, 3),
        (" two leading", FILE, 0), ("ünï", FILE, 7)]
    assert entries[0].mtime == pytest.approx(1193673181.5)
    assert entries[0].unique == "8012" and entries[1].unique == "801e33"


def test_mlst_reply_entry():
    e = parse_mlst_reply(("Listing /a", " type=dir;modify=20240102030405; /a", "End"))
    assert e is not None and e.type == DIR and e.name == "/a"


def test_unix_list_lines():
    now = 1700000000.0  # 2023-11-14
    lines = [
        "total 12",
        "-rw-r--r--    1 1000     1000         1234 Nov 01 10:20 file with  spaces.txt",
        "drwxr-xr-x    2 0        0            4096 Jan 05  2021 dir",
        "lrwxrwxrwx    1 0        0               7 Mar 03 12:00 ln -> target",
        "-rw-r--r-- 1 owner group 5 Dec 31 23:59 late",
    ]
    entries = parse_list("\r\n".join(lines).encode(), now=now)
    assert [(e.name, e.type, e.size) for e in entries] == [
        ("file with  spaces.txt", FILE, 1234), ("dir", DIR, 4096), ("ln", LINK, 7), ("late", FILE, 5)]
    assert entries[2].target == "target"
    assert entries[1].mtime == 1609804800  # 2021-01-05
    assert entries[3].mtime < now  # "Dec 31 23:59" without a year is last year's
    assert parse_list_line("not a listing line") is None


# -- path safety ---------------------------------------------------------------------------

HOSTILE = ["..", ".", "", "../x", "/etc/x", "a/../../b", "a\x00b", "x/", "/", "a\nb", "a\rb", "\udcff"]


@pytest.mark.parametrize("name", HOSTILE)
def test_hostile_names_are_refused(name):
    with pytest.raises(UnsafePath):
        check_name(name)


@pytest.mark.parametrize("name", ["a..b", "..x", "x..", "...", "with space", "ünï", "-dash", " lead"])
def test_odd_but_safe_names_pass(name):
    assert check_name(name) == name


@given(st.lists(st.text(min_size=0, max_size=12), min_size=1, max_size=6))
def test_local_path_never_leaves_root(parts):
    root = "/dest/root"
    try:
        path = local_path(root, tuple(parts))
    except UnsafePath:
        return
    norm = posixpath.normpath(path)
    assert norm.startswith(root + "/")
    assert norm == path  # nothing to normalise away: no '.', '..' or '//'
    assert len(norm.split("/")) == len(root.split("/")) + len(parts)


@given(st.lists(st.sampled_from(["a", "..", ".", "b/c", "", "d\x00", "..e", "f.."]), min_size=1, max_size=5))
def test_local_path_accepts_exactly_the_clean_parts(parts):
    clean = all(p not in ("", ".", "..") and "/" not in p and "\x00" not in p for p in parts)
    try:
        local_path("/r", tuple(parts))
        assert clean
    except UnsafePath:
        assert not clean


def test_remote_join():
    assert remote_join("/d/", ("a b", "c")) == "/d/a b/c"
    assert remote_join("/", ("x",)) == "/x"
    with pytest.raises(UnsafePath):
        remote_join("/d", ("..",))


# -- planner -----------------------------------------------------------------------------------


def test_plan_fresh_copy_makes_dirs_first_and_moves_everything():
    src = {("a",): Stat(is_dir=True), ("a", "b"): Stat(is_dir=True), ("a", "b", "f"): Stat(5, 100.0),
           ("g",): Stat(0, 100.0), ("e",): Stat(is_dir=True)}
    p = plan(src, {})
    assert p.mkdirs == [("a",), ("e",), ("a", "b")]
    assert [t.rel for t in p.transfers] == [("a", "b", "f"), ("g",)]
    assert p.total_bytes == 5 and not p.deletes and not p.skipped


def test_plan_sync_skips_complete_files_and_resumes_partial_ones():
    src = {("same",): Stat(10, 100.0), ("newer",): Stat(10, 200.0), ("short",): Stat(10, 100.0),
           ("part",): Stat(10, 100.0), ("bigpart",): Stat(10, 100.0)}
    dst = {("same",): Stat(10, 100.0), ("newer",): Stat(10, 100.0), ("short",): Stat(4, 100.0)}
    p = plan(src, dst, sync=True, partial={("part",): 6, ("bigpart",): 11})
    assert p.skipped == [("same",)]
    moves = {t.rel: t.resume_from for t in p.transfers}
    assert moves == {("newer",): 0, ("short",): 0, ("part",): 6, ("bigpart",): 0}
    # without --sync everything moves again
    assert len(plan(src, dst).transfers) == 5


def test_plan_checksum_compares_same_size_files_instead_of_times():
    p = plan({("f",): Stat(3, 200.0)}, {("f",): Stat(3, 100.0)}, sync=True, checksum=True)
    assert [t.rel for t in p.checks] == [("f",)] and not p.transfers


def test_plan_deletes_only_with_delete_children_first():
    src = {("keep",): Stat(1, 1.0)}
    dst = {("keep",): Stat(1, 1.0), ("old",): Stat(is_dir=True), ("old", "x"): Stat(1, 1.0), ("y",): Stat(2, 1.0)}
    assert plan(src, dst, sync=True).deletes == []
    p = plan(src, dst, sync=True, delete=True)
    assert p.deletes == [("old", "x"), ("old",), ("y",)]


def test_plan_reports_file_directory_conflicts():
    src = {("d",): Stat(is_dir=True), ("d", "f"): Stat(1, 1.0), ("g",): Stat(1, 1.0)}
    dst = {("d",): Stat(5, 1.0), ("g",): Stat(is_dir=True)}
    p = plan(src, dst, delete=True)
    assert {rel for rel, _ in p.conflicts} == {("d",), ("d", "f"), ("g",)}
    assert not p.transfers and not p.deletes


def test_complete_rule():
    assert complete(Stat(5, 100.0), Stat(5, 99.5))
    assert not complete(Stat(5, 100.0), Stat(5, 90.0))
    assert complete(Stat(5, 100.0), Stat(5, 90.0), use_mtime=False)
    assert not complete(Stat(5, 100.0), Stat(6, 100.0))
    assert not complete(Stat(None, 100.0), Stat(5, 100.0))


# -- -c auto: sessions x streams ---------------------------------------------------------------------------------------


BIG = "big.bin"
QUIET = [StreamSample(0.100, 0.100, 0)]  # no queue, no loss


def climb(ctl: FleetController, goodput_of, work_of, steps: int) -> list[tuple[int, int]]:
    """(sessions, the big file's streams) at each of ``steps`` updates,
    goodput a function of them."""
    seen = []
    for _ in range(steps):
        shape = (ctl.sessions, ctl.streams.get(BIG, 0))
        seen.append(shape)
        ctl.update(goodput_of(*shape), QUIET, work_of(*shape))
    return seen


def small_files(n_files: int = 10_000) -> Work:
    return Work(queued_files=n_files, queued_bytes=n_files << 20, bytes_left=n_files << 20)


def test_fleet_climbs_sessions_while_goodput_grows_and_settles_at_the_knee():
    ctl = FleetController(FleetConfig(start_sessions=4, session_settle=2, settle=2, max_backoff=8))
    seen = [s for s, _ in climb(ctl, lambda s, _: 10.0 * min(s, 12), lambda s, _: small_files(), 80)]
    assert seen[0] == 4 and 6 in seen and 9 in seen and 13 in seen  # x1.5 while each step pays
    assert max(seen) <= 19  # one probe past the knee, never a run-away
    assert sum(1 for n in seen[-30:] if n == 13) >= 20  # settled at the knee (13 pays 8%: short of 10%)


def test_fleet_gives_sessions_back_when_they_do_not_help():
    ctl = FleetController(FleetConfig(start_sessions=8, session_settle=2, judge=1))
    work = small_files()
    assert ctl.update(100.0, QUIET, work) is None  # the first sessions' slow start
    assert ctl.update(100.0, QUIET, work) == Change(Kind.SESSION, 4) and ctl.sessions == 12
    assert ctl.update(101.0, QUIET, work) is None  # settling
    assert ctl.update(101.0, QUIET, work) == Change(Kind.SESSION, -4) and ctl.sessions == 8


def test_fleet_adds_nothing_while_the_path_queues_or_loses():
    ctl = FleetController(FleetConfig(start_sessions=4, session_settle=1))
    queued = [StreamSample(0.200, 0.100, 0)]
    assert all(ctl.update(100.0, queued, small_files()) is None for _ in range(10))
    losing = [[StreamSample(0.100, 0.100, r)] for r in range(1, 11)]  # a retransmit every interval
    assert all(ctl.update(100.0, sample, small_files()) is None for sample in losing)
    assert ctl.sessions == 4


def test_fleet_gives_back_a_probe_that_brings_a_queue():
    ctl = FleetController(FleetConfig(start_sessions=4, session_settle=3))
    for _ in range(2):
        ctl.update(100.0, QUIET, small_files())
    assert ctl.update(100.0, QUIET, small_files()) == Change(Kind.SESSION, 2)
    queued = [StreamSample(0.200, 0.100, 0)]
    assert ctl.update(150.0, queued, small_files()) is None  # (its own slow start: one interval's grace)
    assert ctl.update(150.0, queued, small_files()) == Change(Kind.SESSION, -2) and ctl.sessions == 4


def test_fleet_gives_a_stream_to_the_big_file_while_it_is_the_long_pole():
    ctl = FleetController(FleetConfig(start_sessions=8, session_settle=1, settle=1, judge=1))
    ALL = QUIET * 12  # 8 sessions and the file's 4 streams: a stream must add 5%
    assert ctl.start_file(BIG) == 4
    big = Work(queued_files=100, queued_bytes=100 << 16, big_left={BIG: 1 << 30}, bytes_left=(1 << 30) + (100 << 16))
    assert ctl.update(100.0, ALL, big) == Change(Kind.STREAM, 1, BIG)
    assert ctl.streams[BIG] == 5 and ctl.sessions == 8
    assert ctl.update(120.0, ALL, big) is None  # it paid (20% > 5%): it stays
    assert ctl.streams[BIG] == 5
    # the queued files now outweigh it: sessions next
    many = Work(queued_files=10_000, queued_bytes=10_000 << 20, big_left={BIG: 1 << 20}, bytes_left=10_000 << 20)
    changes = [ctl.update(120.0, ALL, many) for _ in range(5)]
    assert Change(Kind.SESSION, 4) in changes and ctl.streams[BIG] == 5


def test_fleet_leaves_a_file_whose_streams_cannot_change():
    ctl = FleetController(FleetConfig(start_sessions=2, session_settle=1, settle=1, judge=1))
    ctl.start_file(BIG)
    big = Work(queued_files=0, queued_bytes=0, big_left={BIG: 1 << 30}, bytes_left=1 << 30)
    change = ctl.update(100.0, QUIET, big)
    assert change == Change(Kind.STREAM, 1, BIG)
    ctl.refused(change)  # a server without DRS streams=N
    assert ctl.streams[BIG] == 4
    assert all(ctl.update(100.0, QUIET, big) is None for _ in range(20))
    ctl.end_file(BIG)
    assert BIG not in ctl.streams


def test_fleet_with_fixed_sessions_adds_none_and_a_job_near_its_end_none_either():
    ctl = FleetController(FleetConfig(session_settle=1), fixed_sessions=4)
    assert all(ctl.update(100.0, QUIET, small_files()) is None for _ in range(20)) and ctl.sessions == 4
    ctl = FleetController(FleetConfig(start_sessions=4, session_settle=1))
    ctl.note_rtt(0.1)
    end = Work(queued_files=100, queued_bytes=100 << 20, bytes_left=100 << 20)  # 1 s at 100 MB/s < 30 RTTs
    assert all(ctl.update(100e6, QUIET, end) is None for _ in range(20))


def test_fleet_stays_within_bounds_when_more_is_always_worse():
    ctl = FleetController(FleetConfig(start_sessions=2, max_sessions=16, session_settle=1, settle=1, max_backoff=4))
    seen = [s for s, _ in climb(ctl, lambda s, _: 1000.0 / s, lambda s, _: small_files(), 60)]
    assert all(2 <= n <= 16 for n in seen) and seen.count(2) > len(seen) // 2


def test_fleet_limit_sessions_caps_the_count():
    ctl = FleetController(FleetConfig(start_sessions=16))
    ctl.limit_sessions(5)
    assert ctl.sessions == 5
    # goodput rising all along: no session is proposed past the cap
    assert [ctl.update(1.0 * i, QUIET, small_files()) for i in range(40)] == [None] * 40 and ctl.sessions == 5


def test_os_sep_is_slash():  # local_path joins with '/': POSIX only
    assert os.sep == "/"


# -- transfers start during the walk -------------------------------------------------------


def test_listing_lines_reach_the_parser_whole_as_they_arrive():
    from drsftp.client.trees.listings import _Collect

    async def main():
        got: list[bytes] = []
        sink = _Collect("listing", got.append)
        name = "grüße.bin".encode()
        line1 = b"type=file;size=1; a.bin\r\n"
        line2 = b"type=file;size=2; " + name + b"\r\n"
        cut = len(line1) + len(line2) - 6  # inside the multi-byte name
        data = line1 + line2 + b"type=dir; sub"  # the last line without its newline
        sink.data_received(data[:cut])
        assert got == [line1]  # what is whole, at once
        sink.data_received(data[cut:])
        assert got == [line1, line2]
        sink.eof_received()
        assert got[-1] == b"type=dir; sub" and sink.done.done()
        return [e.name for chunk in got for e in parse_mlsd(chunk)]

    assert asyncio.run(main()) == ["a.bin", "grüße.bin", "sub"]


class _SlowListing:
    """A session whose listing arrives in two parts, ``gap`` apart."""

    def __init__(self, parts: dict[str, list[list[Entry]]], log: list) -> None:
        self.parts, self.log = parts, log
        self.ctl = _Ctl()
        self.transfers = 0  # (RemoteSession's: listings the server started)

    async def listing(self, path, on_entries=None):
        every = []
        for i, part in enumerate(self.parts[path]):
            if i:
                await asyncio.sleep(0.05)
            self.log.append(("listed", path, i))
            every += part
            if on_entries is not None:
                on_entries(part)
        return every


def test_the_walk_hands_over_entries_as_each_listing_part_arrives():
    from drsftp.client.transfer.getput import TransferOptions
    from drsftp.client.trees.job.treejob import JobOptions, TreeJob
    from drsftp.ftp.url import FTPLocation

    parts = {"/d": [[Entry("a", FILE, 1), Entry("sub", DIR)], [Entry("b", FILE, 2)]],
             "/d/sub": [[Entry("c", FILE, 3)]]}

    async def main():
        log: list = []
        job = TreeJob("get", FTPLocation("h", 21, "u", "p", "/d"), TransferOptions(progress=False),
                  JobOptions(recursive=True, sessions=2, progress=False))
        job.walking = True
        trees = await job.walk_remote([(0, "/d")], lambda i, found: log.append(("found", sorted(found))),
                                      first=_SlowListing(parts, log))  # type: ignore[arg-type]
        return log, trees

    log, trees = asyncio.run(main())
    assert log.index(("found", [("a",), ("sub",)])) < log.index(("listed", "/d", 1))  # before the rest came
    assert ("found", [("sub", "c")]) in log and ("found", [("b",)]) in log
    assert set(trees[0]) == {("a",), ("sub",), ("b",), ("sub", "c")}


def test_workers_wait_for_the_walk_and_wake_on_new_files():
    from drsftp.client.transfer.getput import TransferOptions
    from drsftp.client.trees.job.treejob import JobOptions, TreeJob
    from drsftp.ftp.url import FTPLocation

    async def main():
        job = TreeJob("get", FTPLocation("h", 21, "u", "p", "/d"), TransferOptions(progress=False),
                  JobOptions(recursive=True, sessions=2, progress=False))
        job.walking = True
        waiter = asyncio.ensure_future(job.more())
        await asyncio.sleep(0.02)
        assert not waiter.done()  # nothing queued, still walking
        job.enqueue(0, plan({("x",): Stat(5, 0.0), ("big",): Stat(50, 0.0)}, {}))
        await asyncio.wait_for(waiter, 1)
        assert [it.t.rel for it in job.queue] == [("x",), ("big",)]  # pop() takes the largest first
        job.queue.clear()
        waiter = asyncio.ensure_future(job.more())
        await asyncio.sleep(0.02)
        job.walked()
        await asyncio.wait_for(waiter, 1)  # the walk's end wakes it: nothing more is coming
        assert not job.walking

    asyncio.run(main())


def test_fleet_a_server_limit_during_a_probe_never_leaves_it_without_sessions():
    ctl = FleetController(FleetConfig(start_sessions=4, session_settle=1, judge=1))
    assert ctl.update(100.0, QUIET, small_files()) == Change(Kind.SESSION, 2)
    ctl.limit_sessions(2)  # the server refused the new ones, and some old
    assert ctl.sessions == 2
    # the probe ended with the limit: nothing of it is given back later
    # (that would take the server's two away), and no probe passes the limit
    assert [ctl.update(50.0, QUIET, small_files()) for _ in range(10)] == [None] * 10 and ctl.sessions == 2


class _Ctl:
    """A fake control connection: ``lost`` once closed; the NOOPs sent."""

    def __init__(self) -> None:
        self.lost = False
        self.sent: list[str] = []
        self.features: set[str] = set()
        self.router = type("Router", (), {"pending": 0})()
        self.writer = type("Writer", (), {"is_closing": lambda _: False})()

    @property
    def closed(self) -> bool:
        return self.lost

    def send_unwaited(self, line):
        from drsftp.client.session.control import FTPError

        if self.lost:
            raise FTPError("control connection closed by the server")
        self.sent.append(line)


def _lost_connection():
    from drsftp.client.session.control import FTPError

    return FTPError("control connection lost")


class _Breaking(_SlowListing):
    """Lists like _SlowListing; its connection breaks on ``breaks``, before
    the server started that listing (no 1yz) unless ``began``."""

    def __init__(self, parts, log, breaks: str, began: bool = False) -> None:
        super().__init__(parts, log)
        self.breaks, self.began = breaks, began
        self.closed = False

    async def listing(self, path, on_entries=None):
        if self.ctl.lost:
            from drsftp.client.session.control import FTPError

            raise FTPError("control connection closed by the server")
        if path == self.breaks:
            self.transfers += self.began
            self.ctl.lost = True
            raise _lost_connection()
        self.transfers += 1
        return await super().listing(path, on_entries)

    async def close(self):
        self.closed = True


def _job(sessions, walking=True):
    from drsftp.client.transfer.getput import TransferOptions
    from drsftp.client.trees.job.treejob import JobOptions, TreeJob
    from drsftp.ftp.url import FTPLocation

    job = TreeJob("get", FTPLocation("h", 21, "u", "p", "/d"), TransferOptions(progress=False),
              JobOptions(recursive=True, sessions=sessions, progress=False))
    job.walking = walking  # files move meanwhile: the workers hold their sessions
    job.live = 1
    return job


_ABC = {"/d": [[Entry("a", DIR), Entry("b", DIR), Entry("c", DIR)]],
        "/d/a": [[Entry("x", FILE, 1)]], "/d/b": [[Entry("y", FILE, 2)]], "/d/c": [[Entry("z", FILE, 3)]]}


def _walk_breaking(first_breaks: str, began: bool, others_break: str = "") -> tuple:
    async def main():
        log: list = []
        job = _job(4)
        opened: list[_Breaking] = []

        async def session():
            opened.append(_Breaking(_ABC, log, breaks=others_break))
            return opened[-1]

        job.session = session  # type: ignore[method-assign]
        first = _Breaking(_ABC, log, breaks=first_breaks, began=began)  # todo pops the last found first
        trees = await job.walk_remote([(0, "/d")], lambda i, found: None, first=first)  # type: ignore[arg-type]
        return job, trees, log, opened

    job, trees, log, opened = asyncio.run(main())
    return [o.path for o in job.result.outcomes if o.status == "failed"], trees, log, opened


def test_a_lister_whose_session_breaks_mid_listing_fails_that_directory_alone():
    failed, trees, _log, _ = _walk_breaking("/d/c", began=True)
    assert failed == ["/d/c"]  # the server had started it: it is reported, not listed twice
    assert ("a", "x") in trees[0] and ("b", "y") in trees[0]  # the rest listed on another session


def test_a_session_that_breaks_before_a_listing_began_leaves_it_to_another():
    """The server closed the session (an idle timeout) as the listing was
    asked: no fault of the directory's (DATASETS.md#idle)."""
    failed, trees, log, _ = _walk_breaking("/d/c", began=False)
    assert failed == []
    assert ("c", "z") in trees[0] and ("a", "x") in trees[0] and ("b", "y") in trees[0]
    assert log.count(("listed", "/d/c", 0)) == 1


def test_a_directory_that_breaks_every_session_fails_after_a_bounded_number_of_tries():
    from drsftp.client.trees.job.treejob import LOST_AGAIN

    failed, trees, _log, opened = _walk_breaking("/d/c", began=False, others_break="/d/c")
    assert failed == ["/d/c"]
    assert ("a", "x") in trees[0] and ("b", "y") in trees[0]
    assert len(opened) == LOST_AGAIN + 1  # (each try broke its session: one more opened for the rest)


def _walk_abc_from(first_kind):
    """Walk _ABC from a first session of ``first_kind`` (a _Breaking that
    misbehaves); sessions opened later behave.  (job, trees, first, opened)."""
    async def main():
        log: list = []
        job = _job(2)
        opened: list[_Breaking] = []

        async def session():
            opened.append(_Breaking(_ABC, log, breaks=""))
            return opened[-1]

        job.session = session  # type: ignore[method-assign]
        first = first_kind(_ABC, log, breaks="")
        trees = await job.walk_remote([(0, "/d")], lambda i, found: None, first=first)  # type: ignore[arg-type]
        return job, trees, first, opened

    return asyncio.run(main())


def test_a_lister_drops_a_session_the_server_closed_while_it_waited():
    """A stale session (closed by the server's idle timeout while its lister
    waited) is dropped and another opened: no directory fails."""

    class _GoesStale(_Breaking):
        async def listing(self, path, on_entries=None):
            entries = await super().listing(path, on_entries)
            self.ctl.lost = True  # (closed while idle after this listing)
            return entries

    job, trees, first, opened = _walk_abc_from(_GoesStale)
    assert not [o for o in job.result.outcomes if o.status == "failed"]
    assert len(trees[0]) == 6 and first.closed and len(opened) == 1
    assert job.spare == opened  # (the stale one is not handed to a worker)


def test_a_listing_that_times_out_drops_its_session():
    class _Hangs(_Breaking):
        async def listing(self, path, on_entries=None):
            if path == "/d/c":
                self.transfers += 1  # (started, then stalled)
                raise TimeoutError()
            return await super().listing(path, on_entries)

    job, trees, first, opened = _walk_abc_from(_Hangs)
    assert [o.path for o in job.result.outcomes if o.status == "failed"] == ["/d/c"]
    assert first.closed and first not in job.spare  # dropped as broken, not kept for a worker
    assert ("a", "x") in trees[0] and ("b", "y") in trees[0] and len(opened) == 1


class _Counting:
    """A session whose every listing takes ``delay``; counts how many run at
    once.  With ``state``: it breaks on its listing after ``breaks_after``
    (started: the server had answered 1yz), and frees the server's slot
    (``state["full"] = False``)."""

    def __init__(self, parts, stats: dict, delay: float = 0.05, state: dict | None = None,
                 breaks_after: int | None = None) -> None:
        self.parts, self.stats, self.delay = parts, stats, delay
        self.state, self.breaks_after = state, breaks_after
        self.ctl = _Ctl()
        self.transfers = 0
        self.closed = False

    async def listing(self, path, on_entries=None):
        self.stats["now"] += 1
        self.stats["most"] = max(self.stats["most"], self.stats["now"])
        try:
            await asyncio.sleep(self.delay)
        finally:
            self.stats["now"] -= 1
        self.transfers += 1
        if self.breaks_after is not None and self.transfers > self.breaks_after:
            self.ctl.lost = True
            if self.state is not None:
                self.state["full"] = False  # its server slot is free again
            raise _lost_connection()
        entries = [e for part in self.parts[path] for e in part]
        if on_entries is not None:
            on_entries(entries)
        return entries

    async def close(self):
        self.closed = True


def _deep_parts(n: int) -> dict:
    parts = {"/d": [[Entry(f"s{k}", DIR) for k in range(n)]]}
    parts.update({f"/d/s{k}": [[Entry("f", FILE, k + 1)]] for k in range(n)})
    return parts


def _walk_deep(sessions: int | None, opener, first=None, prepare=None) -> tuple:
    stats = {"now": 0, "most": 0, "opened": 0}
    parts = _deep_parts(24)

    async def main():
        job = _job(sessions)
        if prepare is not None:
            prepare(job)

        async def session():
            stats["opened"] += 1
            return await opener(parts, stats)

        job.session = session  # type: ignore[method-assign]
        trees = await job.walk_remote([(0, "/d")], lambda i, found: None,
                                      first=first or _Counting(parts, stats))  # type: ignore[arg-type]
        stats["opens_pending"] = sum(1 for f in job.opening if not f.done())  # at the walk's end
        return job, trees

    job, trees = asyncio.run(main())
    return job, trees, stats


def test_a_deep_walk_lists_on_sessions_of_its_own_under_c_auto():
    """More directories waiting than the walk's sessions can take: under
    -c auto it opens more, so listings overlap (each costs round trips),
    at most WALK_LISTERS; they go to the workers afterwards."""
    from drsftp.client.trees.walk import WALK_LISTERS

    async def opener(parts, stats):
        return _Counting(parts, stats)

    job, trees, stats = _walk_deep(None, opener)
    assert len(trees[0]) == 48 and not [o for o in job.result.outcomes if o.status == "failed"]
    assert stats["most"] == WALK_LISTERS and stats["opened"] == WALK_LISTERS - 1
    assert len(job.spare) == WALK_LISTERS


def test_the_walks_own_sessions_beyond_what_workers_take_are_closed_at_its_end():
    """Workers hold 14 of the 16 sessions -c auto starts with: of the walk's
    8, 2 stay for the workers, the others are closed rather than idle."""
    stats0 = {"now": 0, "most": 0}
    opened: list = [_Counting(_deep_parts(24), stats0)]  # the walk's first session

    async def opener(parts, stats):
        opened.append(_Counting(parts, stats))
        job_ref[0].live += 1  # (TreeJob.session counts what it opens)
        return opened[-1]

    job_ref: list = []

    def prepare(job):
        job_ref.append(job)
        job.live = 1 + 14  # the walk's session, and the workers'

    job, trees, _stats = _walk_deep(None, opener, first=opened[0], prepare=prepare)
    assert len(trees[0]) == 48 and len(opened) == 8
    assert len(job.spare) == 2 and job.live == 16 == job.allowed
    assert sum(s.closed for s in opened) == 6


def test_a_deep_walk_under_a_fixed_c_keeps_to_its_one_session():
    """-c N counts every session but the walk's one: with files moving, a
    deep tree is listed on it alone."""

    async def opener(parts, stats):
        return _Counting(parts, stats)

    _, trees, stats = _walk_deep(3, opener)
    assert len(trees[0]) == 48
    assert stats["most"] == 1 and stats["opened"] == 0


def test_a_server_refusing_the_walks_extra_sessions_loses_no_directory():
    from drsftp.client.session.control import FTPError

    async def opener(parts, stats):
        raise FTPError("421 too many connections")

    job, trees, stats = _walk_deep(None, opener)
    assert len(trees[0]) == 48  # every directory listed, on the one session there is
    assert not [o for o in job.result.outcomes if o.status == "failed"]
    assert stats["most"] == 1 and stats["opened"] >= 1


def test_refused_listers_stay_to_reopen_when_the_walks_session_breaks():
    """The server refuses the walk's extra sessions (at its limit), then
    the walk's one session breaks mid-listing, which frees a slot: a lister
    reopens, and only the directory being listed fails (before: 22 of 24,
    the refused listers having ended)."""
    from drsftp.client.session.control import FTPError
    from drsftp.client.trees.walk import WALK_LISTERS

    state = {"full": True}
    opens = {"refused": 0}

    async def opener(parts, stats):
        await asyncio.sleep(0.005)
        if state["full"]:
            opens["refused"] += 1
            raise FTPError("421 too many connections")
        return _Counting(parts, stats, delay=0.01)

    parts = _deep_parts(24)
    stats0 = {"now": 0, "most": 0}
    first = _Counting(parts, stats0, delay=0.01, state=state, breaks_after=3)
    job, trees, _ = _walk_deep(None, opener, first=first)
    failed = [o.path for o in job.result.outcomes if o.status == "failed"]
    assert len(failed) == 1 and len(trees[0]) == 47, failed
    # the listers' first opens went out together; after a refusal none until the break
    assert opens["refused"] <= WALK_LISTERS - 1
    assert first.closed


@pytest.mark.timeout(60)  # (a walk that waited for the opens would never end)
def test_a_hanging_open_holds_no_directory_back():
    """A lister opening a session (up to the 15 s connect timeout) holds
    no directory meanwhile: the walk's session lists them all, and the
    walk ends while the opens still hang."""
    from drsftp.client.trees.walk import WALK_LISTERS

    async def opener(parts, stats):
        await asyncio.Event().wait()  # a server that never answers

    stats0 = {"now": 0, "most": 0}
    job, trees, stats = _walk_deep(None, opener, first=_Counting(_deep_parts(24), stats0, delay=0.01))
    assert len(trees[0]) == 48 and not [o for o in job.result.outcomes if o.status == "failed"]
    # every open still hanging when the walk ended (they go on: a worker
    # may take what they bring)
    assert stats["opened"] == stats["opens_pending"] == len(job.opening) == WALK_LISTERS - 1


# -- stale sessions (DATASETS.md#idle) --------------------------------------------------


class _Stale:
    """A session the server closed while it waited: every command fails."""

    def __init__(self, log: list) -> None:
        self.ctl = _Ctl()
        self.transfers = 0
        self.pipeline = True
        self.log = log

    def start(self, *lines):
        self.log.append(lines)
        self.ctl.lost = True
        raise _lost_connection()

    async def close(self):
        pass


def test_a_file_whose_session_breaks_before_it_started_pays_no_try_but_cannot_loop():
    from drsftp.client.trees.dataset import _get_worker
    from drsftp.client.trees.job.treejob import LOST_AGAIN, Source

    async def main():
        job = _job(1, walking=False)
        job.sources.append(Source("/d", "/tmp/never-written", DIR))
        job.enqueue(0, plan({("x",): Stat(5, 0.0)}, {}))
        sent: list = []

        async def session():
            return _Stale(sent)

        job.session = session  # type: ignore[method-assign]
        for _ in range(LOST_AGAIN + 2):  # (the worker ends at each lost session; run_queue spawns another)
            if not job.queue:
                break
            await _get_worker(job, 0)
        return job, sent

    job, sent = asyncio.run(main())
    assert len(sent) == LOST_AGAIN + 1  # requeued free LOST_AGAIN times, then it paid its try (--retries 0)
    assert [o.status for o in job.result.outcomes] == ["failed"] and not job.queue


def test_an_idle_session_sends_noop_every_keepalive_interval_but_not_while_a_reply_is_awaited(monkeypatch):
    from drsftp.client.trees.job import sessions as jobmod

    monkeypatch.setattr(jobmod, "KEEPALIVE", 0.02)

    async def wait(pending: int) -> list:
        sess = _Stale([])
        sess.ctl.router.pending = pending
        event = asyncio.Event()
        asyncio.get_running_loop().call_later(0.15, event.set)
        await asyncio.wait_for(jobmod.idle_wait(event, sess), 2)  # type: ignore[arg-type]
        return sess.ctl.sent

    assert 3 <= len(asyncio.run(wait(0))) <= 8 and set(asyncio.run(wait(0))) == {"NOOP"}
    assert asyncio.run(wait(1)) == []  # (a transfer's reply awaited: a MODE E session is not idle)


def test_workers_waiting_for_the_walk_keep_their_session_alive(monkeypatch):
    from drsftp.client.trees.job import sessions as jobmod

    monkeypatch.setattr(jobmod, "KEEPALIVE", 0.02)

    async def main():
        job = _job(2)
        sess = _Stale([])
        waiter = asyncio.ensure_future(job.more(sess))  # type: ignore[arg-type]
        await asyncio.sleep(0.1)
        assert not waiter.done()
        job.walked()
        await asyncio.wait_for(waiter, 1)
        return sess.ctl.sent

    assert len(asyncio.run(main())) >= 2


def test_a_spare_session_the_server_closed_is_not_handed_out():
    async def main():
        job = _job(2)
        stale, fresh = _Stale([]), _Stale([])
        stale.ctl.lost = True
        job.spare = [fresh, stale]  # type: ignore[list-item]
        job.live = 3
        got = await job.session()
        await asyncio.gather(*job._closing)
        return job, got, fresh

    job, got, fresh = asyncio.run(main())
    assert got is fresh and job.spare == [] and job.live == 2


def test_spare_sessions_are_kept_alive_while_a_walk_runs_before_any_file_moves(monkeypatch):
    """--delete (and put --sync) walk first: the job's spare sessions idle
    through the whole walk with no worker and no monitor yet."""
    from drsftp.client.trees.job import sessions as jobmod

    monkeypatch.setattr(jobmod, "KEEPALIVE", 0.02)

    class _Slow:
        def __init__(self):
            self.ctl = _Stale([]).ctl
            self.transfers = 0

        async def listing(self, path, on_entries=None):
            await asyncio.sleep(0.15)
            return []

        async def close(self):
            pass

    async def main():
        job = _job(2)
        spare = _Stale([])
        job.spare = [spare]  # type: ignore[list-item]
        job.live = 2
        await job.walk_remote([(0, "/d")], first=_Slow())  # type: ignore[arg-type]
        return spare.ctl.sent

    assert len(asyncio.run(main())) >= 2
