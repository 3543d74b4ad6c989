"""A hostile server's listings never make `drsftp get -r` write outside
DEST: names with '..', '/', NUL, CR/LF, '.', duplicates, directory loops
and endless depth (an in-process fake server on loopback)."""

import asyncio
import hashlib
import os
import threading
import uuid

from drsftp.client.transfer.getput import TransferOptions
from drsftp.client.trees.dataset import MAX_DEPTH, JobOptions, run_get
from drsftp.ftp.url import parse_url


class FakeFTP:
    """Just enough FTP for a get -r: MLST, MLSD and RETR from a table."""

    def __init__(self, listings, busy=(), lag=0.0):
        self.listings = listings  # path -> MLSD body (bytes); other paths list `deep_forever`
        self.busy = set(busy)  # paths whose first RETR gets 450
        self.cksm = []  # CKSM arguments seen (every file's content is b"EVIL")
        self.lag = lag  # seconds a 229 waits, and a data connection stays open after its 226
        self.events = []  # ("recv", line), ("send", reply), ("eof", path), in the order they happened
        self.retrieved = []
        self.loop = asyncio.new_event_loop()
        self.ready = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()
        assert self.ready.wait(10)

    def _run(self):
        asyncio.set_event_loop(self.loop)
        self.server = self.loop.run_until_complete(asyncio.start_server(self._session, "127.0.0.1", 0))
        self.port = self.server.sockets[0].getsockname()[1]
        self.ready.set()
        self.loop.run_forever()

    def stop(self):
        async def shutdown():
            self.server.close()
            tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
            for t in tasks:
                t.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

        asyncio.run_coroutine_threadsafe(shutdown(), self.loop).result(10)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)
        self.loop.close()

    async def _session(self, reader, writer):
        def say(text):
            self.events.append(("send", text))
            writer.write(text.encode("utf-8", "surrogateescape") + b"\r\n")

        lines = asyncio.Queue()

        async def read_lines():
            for _ in range(100000):  # bounded
                raw = await reader.readline()
                line = raw.decode("utf-8", "surrogateescape").rstrip("\r\n") if raw else None
                self.events.append(("recv", line))
                await lines.put(line)
                if line is None:
                    return

        def close_data(w, path):
            self.events.append(("eof", path))
            w.close()

        reading = asyncio.ensure_future(read_lines())
        say("220 fake")
        passive = None
        for _ in range(100000):  # bounded
            line = await lines.get()
            if line is None:
                break
            verb, _, arg = line.partition(" ")
            verb = verb.upper()
            if verb == "USER":
                say("331 pass")
            elif verb == "PASS":
                say("230 in")
            elif verb == "FEAT":
                say("211-Features:\r\n MLST type*;size*;modify*;unique*;\r\n CKSM SHA256\r\n211 End")
            elif verb == "CKSM":
                self.cksm.append(arg)
                say("213 " + hashlib.sha256(b"EVIL").hexdigest())
            elif verb in ("TYPE", "OPTS"):
                say("200 ok")
            elif verb == "MLST":
                say(f"250-Listing {arg}\r\n type=dir; {arg}\r\n250 End")
            elif verb == "EPSV":
                conn = asyncio.get_running_loop().create_future()

                async def accept(r, w, conn=conn):
                    conn.set_result(w)

                passive = (await asyncio.start_server(accept, "127.0.0.1", 0), conn)
                await asyncio.sleep(self.lag)
                say(f"229 Entering Extended Passive Mode (|||{passive[0].sockets[0].getsockname()[1]}|)")
            elif verb == "RETR" and arg in self.busy and passive is not None:
                self.busy.discard(arg)
                self.retrieved.append(arg)
                passive[0].close()
                passive = None
                say("450 busy, try later")
            elif verb in ("MLSD", "RETR") and passive is not None:
                srv, conn = passive
                say("150 here it comes")
                w = await asyncio.wait_for(conn, 10)
                if verb == "MLSD":
                    body = self.listings.get(arg, b"type=dir; deep\r\n")
                else:
                    self.retrieved.append(arg)
                    body = b"EVIL"
                w.write(body)
                await w.drain()
                srv.close()
                passive = None
                say("226 done")  # then the data ends, self.lag later (as a sender whose data is in flight)
                asyncio.get_running_loop().call_later(self.lag, close_data, w, arg)
            elif verb == "QUIT":
                say("221 bye")
                break
            else:
                say("502 no")
            await writer.drain()
        reading.cancel()
        writer.close()


def test_hostile_listing_cannot_write_outside_dest(tmp_path):
    abs_target = f"/tmp/drs-escape-{uuid.uuid4().hex}"
    listing = "\r\n".join([
        "type=file;size=4; ../escape1",
        f"type=file;size=4; {abs_target}",
        "type=file;size=4; a/../../escape2",
        "type=file;size=4; sub/x",
        "type=dir; ..",
        "type=dir; .",
        "type=dir; ../../up",
        "type=file;size=4; nul\x00name",
        "type=file;size=4; ok.txt",
        "type=file;size=4; ok.txt",  # listed twice
        "type=file;size=4; ..ok",  # an ordinary name
        "type=dir;unique=L1; loop",
        "type=dir; deep",
        "",
    ]).encode()
    fake = FakeFTP({
        "/d": listing,
        "/d/loop": b"type=dir;unique=L1; loop\r\ntype=file;size=4; in_loop\r\n",  # itself again
    })
    dest = tmp_path / "a" / "b" / "dest"
    try:
        loc = parse_url(f"ftp://u:p@127.0.0.1:{fake.port}/d")
        res = asyncio.run(asyncio.wait_for(
            run_get([(loc, True)], str(dest), TransferOptions(use_drs_command=False),
                    JobOptions(recursive=True, sessions=2)), 120))
    finally:
        fake.stop()
    # every file written is inside DEST, and only the safe names were written
    written = set()
    for dirpath, _, files in os.walk(tmp_path):
        for name in files:
            written.add(os.path.relpath(os.path.join(dirpath, name), tmp_path))
    assert written == {"a/b/dest/ok.txt", "a/b/dest/..ok", "a/b/dest/loop/in_loop"}
    assert not os.path.exists(abs_target)
    assert not any("escape" in p or os.path.basename(p) == "up" for p in fake.retrieved)
    # the unsafe names were reported, not followed; the endless chain stopped at the limit
    errors = [o.error for o in res.outcomes if o.status == "failed"]
    assert sum("unsafe name" in e for e in errors) >= 7
    assert any(f"deeper than {MAX_DEPTH}" in e for e in errors)
    depth = max(len(os.path.relpath(d, dest).split(os.sep)) for d, _, _ in os.walk(dest))
    assert depth == MAX_DEPTH
    assert res.count("ok") == 3


def test_a_transient_reply_is_retried_with_retries_and_counted_without(tmp_path):
    listing = b"type=file;size=4; a\r\ntype=file;size=4; b\r\ntype=file;size=4; c\r\n"
    for retries, failed in ((0, ["b"]), (1, [])):
        fake = FakeFTP({"/d": listing}, busy={"/d/b"})
        dest = tmp_path / f"r{retries}"
        try:
            loc = parse_url(f"ftp://u:p@127.0.0.1:{fake.port}/d")
            res = asyncio.run(asyncio.wait_for(
                run_get([(loc, True)], str(dest), TransferOptions(use_drs_command=False),
                        JobOptions(recursive=True, sessions=1, retries=retries)), 60))
        finally:
            fake.stop()
        assert sorted(os.path.basename(o.path) for o in res.outcomes if o.status == "failed") == failed
        assert sorted(os.listdir(dest)) == sorted({"a", "b", "c"} - set(failed))
        assert fake.retrieved.count("/d/b") == 1 + retries


def test_checksum_sync_uses_gridftp_cksm_where_there_is_no_hash(tmp_path):
    listing = b"type=file;size=4;modify=20200101000000; same\r\ntype=file;size=4;modify=20200101000000; diff\r\n"
    dest = tmp_path / "d"
    dest.mkdir()
    (dest / "same").write_bytes(b"EVIL")
    (dest / "diff").write_bytes(b"GOOD")  # same size, newer: only a digest tells
    fake = FakeFTP({"/d": listing})
    try:
        loc = parse_url(f"ftp://u:p@127.0.0.1:{fake.port}/d")
        res = asyncio.run(asyncio.wait_for(
            run_get([(loc, True)], str(dest), TransferOptions(use_drs_command=False),
                    JobOptions(recursive=True, sessions=1, sync=True, checksum=True)), 60))
    finally:
        fake.stop()
    assert sorted(fake.cksm) == ["SHA256 0 -1 /d/diff", "SHA256 0 -1 /d/same"]
    assert fake.retrieved == ["/d/diff"]
    assert (dest / "diff").read_bytes() == b"EVIL"
    assert {os.path.basename(o.path): o.status for o in res.outcomes} == {"same": "skipped", "diff": "ok"}


def test_commands_are_pipelined_and_the_next_file_starts_at_the_226(tmp_path):
    listing = b"".join(b"type=file;size=4; f%d\r\n" % i for i in range(4))
    orders = {}
    for pipeline in (True, False):
        fake = FakeFTP({"/d": listing}, lag=0.15)
        try:
            loc = parse_url(f"ftp://u:p@127.0.0.1:{fake.port}/d")
            res = asyncio.run(asyncio.wait_for(
                run_get([(loc, True)], str(tmp_path / str(pipeline)), TransferOptions(use_drs_command=False),
                        JobOptions(recursive=True, sessions=1, pipeline=pipeline)), 60))
        finally:
            fake.stop()
        assert res.count("ok") == 4
        orders[pipeline] = [e for e in fake.events if e[0] != "send" or e[1][:3] in ("229", "226")]
    ev = orders[True]
    for i in (1, 2, 3):  # the files after the first: the session knows EPSV by then
        retr = ev.index(("recv", f"RETR /d/f{i}"))
        epsv = max(j for j in range(retr) if ev[j] == ("recv", "EPSV"))
        # RETR was sent with EPSV, before the 229 answered it
        assert ev[epsv + 1] == ("recv", f"RETR /d/f{i}"), ev[epsv:retr + 1]
        # and both went out at the previous file's 226, before its data had ended
        assert ev.index(("eof", f"/d/f{i - 1}")) > retr
    ev = orders[False]
    for i in (1, 2, 3):
        retr = ev.index(("recv", f"RETR /d/f{i}"))
        assert ev[retr - 1][1].startswith("229")  # one command at a time
        assert ev.index(("eof", f"/d/f{i - 1}")) < retr
