"""Sans-IO parts of dataset jobs: listings, path safety, the planner and
-c auto's controller."""

import os
import posixpath

import pytest
from hypothesis import given
from hypothesis import strategies as st

from drsftp.client.concurrency import AutoConcurrency
from drsftp.client.plan import Stat, complete, plan
from drsftp.ftp.listing import (
    DIR,
    FILE,
    LINK,
    parse_list,
    parse_list_line,
    parse_mlsd,
    parse_mlst_reply,
)
from drsftp.ftp.safepath import UnsafePath, check_name, local_path, remote_join

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


# -- -c auto ---------------------------------------------------------------------------------------


def run_controller(ctl, goodput_of, steps):
    seen = []
    for _ in range(steps):
        seen.append(ctl.n)
        ctl.update(goodput_of(ctl.n))
    return seen


def test_auto_climbs_while_goodput_grows_and_settles_at_the_knee():
    # goodput rises linearly to 12 sessions, flat after
    ctl = AutoConcurrency(start=4, maximum=32, hold=3)
    seen = run_controller(ctl, lambda n: 10.0 * min(n, 12), 40)
    assert seen[:4] == [4, 6, 9, 13]  # climbs while each step pays
    assert max(seen) <= 20  # one probe past the knee, never a run-away
    assert sum(1 for n in seen[-20:] if 12 <= n <= 13) >= 15  # settled at the knee, probing now and then


def test_auto_steps_back_when_more_sessions_do_not_help():
    ctl = AutoConcurrency(start=4, hold=5)
    assert ctl.update(100.0) == 6  # first probe up
    assert ctl.update(101.0) == 4  # no gain: back
    for _ in range(5):
        assert ctl.update(100.0) == 4  # held


def test_auto_backs_off_when_goodput_collapses_at_the_same_count():
    ctl = AutoConcurrency(start=8, hold=10)
    ctl.update(100.0)  # probe to 12
    ctl.update(100.0)  # no gain: back to 8, hold
    assert ctl.n == 8
    ctl.update(100.0)
    assert ctl.update(40.0) == 7  # a 60% fall: fewer sessions


def test_auto_stays_within_bounds():
    ctl = AutoConcurrency(start=50, minimum=2, maximum=16, hold=1)
    seen = run_controller(ctl, lambda n: float(n), 30)
    assert all(2 <= n <= 16 for n in seen)
    ctl = AutoConcurrency(start=2, minimum=2, maximum=16, hold=1)
    seen = run_controller(ctl, lambda n: 1000.0 / n, 30)  # more is always worse
    assert all(2 <= n <= 16 for n in seen) and seen.count(2) > len(seen) // 2


def test_os_sep_is_slash():  # local_path joins with '/': POSIX only
    assert os.sep == "/"
