"""Pipelined session setup (docs/DESIGN.md "Pipelined session setup"):
commands whose replies do not decide what is sent next go out together,
and a refusal is still reported as the refused command's failure.

A raw asyncio fake server holds its replies until the client has been
quiet for a moment, then answers everything received: each group of
commands it records is one round trip of the client's."""

from __future__ import annotations

import asyncio
import os
import re

import pytest

from drsftp.client.session.control import FTPError
from drsftp.client.session.flowctl import FlowControl
from drsftp.client.streams import parallel
from drsftp.client.transfer import getput as transfer
from drsftp.client.transfer.getput import TransferOptions
from drsftp.client.trees.dataset import JobOptions, run_get
from drsftp.ftp.eblock import data_header, eod
from drsftp.ftp.flow import Accepted, FlowError, Refused, State, TransferFlow, TransferStarted
from drsftp.ftp.replies import Reply
from drsftp.ftp.url import FTPLocation

QUIET = 0.15  # seconds without a byte from the client that close a group
PAYLOAD = os.urandom(300_000)


class FakeServer:
    """Answers FTP commands from a table; ``refuse`` maps a verb to the
    reply it gets instead.  ``groups``: the verbs of each round trip."""

    def __init__(self, feat: tuple[str, ...] = (), refuse: dict[str, str] | None = None) -> None:
        self.feat, self.refuse = feat, refuse or {}
        self.groups: list[list[str]] = []
        self.port_addr: tuple[str, int] | None = None
        self.pasv: asyncio.Server | None = None
        self.pasv_conn: asyncio.Future | None = None
        self.want_reader = False  # STOR: the passive connection's reader
        self.stored = b""

    async def __aenter__(self) -> FakeServer:
        self.server = await asyncio.start_server(self._session, "127.0.0.1", 0)
        self.port = self.server.sockets[0].getsockname()[1]
        return self

    async def __aexit__(self, *exc) -> None:
        self.server.close()
        if self.pasv is not None:
            self.pasv.close()

    async def _session(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.write(b"220 fake\r\n")
        buf = b""
        try:
            for _ in range(100):  # groups, at most
                group: list[str] = []
                while True:
                    try:
                        data = await asyncio.wait_for(reader.read(4096), QUIET if group or buf else 30)
                    except TimeoutError:
                        break
                    if not data:
                        return
                    buf += data
                    *lines, buf = buf.split(b"\r\n")
                    group += [line.decode() for line in lines]
                if not group:
                    return
                self.groups.append([line.split(" ")[0].upper() for line in group])
                for line in group:
                    if not await self._answer(line, writer):
                        return
        finally:
            writer.close()

    async def _answer(self, line: str, writer: asyncio.StreamWriter) -> bool:
        verb, _, arg = line.partition(" ")
        verb = verb.upper()
        if verb in self.refuse:
            writer.write(self.refuse[verb].encode() + b"\r\n")
            return True
        if verb == "QUIT":
            writer.write(b"221 bye\r\n")
            return False
        if verb == "FEAT":
            writer.write(b"211-Features:\r\n" + b"".join(f" {f}\r\n".encode() for f in self.feat) + b"211 End\r\n")
        elif verb == "USER":
            writer.write(b"331 password\r\n")
        elif verb == "PASS":
            writer.write(b"230 in\r\n")
        elif verb in ("SIZE",):
            writer.write(f"213 {len(PAYLOAD)}\r\n".encode())
        elif verb == "MDTM":
            writer.write(b"213 20260101000000\r\n")
        elif verb == "REST":
            writer.write(b"350 ok\r\n")
        elif verb == "PORT":
            nums = [int(x) for x in arg.split(",")]
            self.port_addr = (".".join(map(str, nums[:4])), nums[4] * 256 + nums[5])
            writer.write(b"200 ok\r\n")
        elif verb in ("EPSV", "PASV"):
            self.pasv_conn = asyncio.get_running_loop().create_future()
            fut = self.pasv_conn
            self.pasv = await asyncio.start_server(lambda r, w: fut.set_result(r if self.want_reader else w)
                                                   if not fut.done() else None,
                                                   "127.0.0.1", 0)
            port = self.pasv.sockets[0].getsockname()[1]
            writer.write(f"229 ok (|||{port}|)\r\n".encode() if verb == "EPSV" else
                         f"227 ok (127,0,0,1,{port >> 8},{port & 255})\r\n".encode())
        elif verb == "MLST":
            kind = "dir" if arg.rstrip("/") == "/d" else "file"
            writer.write(f"250-Listing {arg}\r\n type={kind};size={len(PAYLOAD)}; {arg}\r\n250 End\r\n".encode())
        elif verb == "MLSD":
            if arg.rstrip("/") != "/d" or self.pasv_conn is None:
                writer.write(b"501 not a directory\r\n" if self.pasv_conn else b"425 use PASV first\r\n")
                return True
            writer.write(b"150 here\r\n")
            await self._send_data(f"type=file;size={len(PAYLOAD)}; f1\r\n".encode(), passive=True)
            writer.write(b"226 done\r\n")
        elif verb == "STOR":
            writer.write(b"150 send\r\n")
            assert self.pasv_conn is not None
            conn = await asyncio.wait_for(self.pasv_conn, 10)
            self.stored = await asyncio.wait_for(conn.read(), 10)
            writer.write(b"226 stored\r\n")
        elif verb == "RETR":
            writer.write(b"150 here\r\n")
            await self._send_data()
            writer.write(b"226 done\r\n")
        else:  # TYPE, MODE, OPTS, ALLO
            writer.write(b"200 ok\r\n")
        return True

    async def _send_data(self, payload: bytes = PAYLOAD, passive: bool = False) -> None:
        if self.port_addr is not None and not passive:  # MODE E, active: the sender connects (GFD.20)
            _, w = await asyncio.open_connection(*self.port_addr)
            w.write(data_header(0, len(payload)) + payload + eod(eof_streams=1, close=True))
        else:
            assert self.pasv_conn is not None
            w = await asyncio.wait_for(self.pasv_conn, 10)
            self.pasv_conn = None
            assert isinstance(w, asyncio.StreamWriter)
            w.write(payload)
        await w.drain()
        w.close()


def _opts() -> TransferOptions:
    return TransferOptions(tuning="kernel", progress=False, use_drs_command=False, connect_timeout=10)


def _loc(port: int) -> FTPLocation:
    return FTPLocation("127.0.0.1", port, "u", "pw", "/f")


def test_single_stream_get_sends_the_login_and_size_in_one_round_trip(tmp_path):
    async def main():
        async with FakeServer(feat=("SIZE",)) as srv:
            result = await transfer.get(_loc(srv.port), str(tmp_path / "f"), _opts())
            return srv.groups, result

    groups, result = asyncio.run(main())
    assert (tmp_path / "f").read_bytes() == PAYLOAD and result.bytes == len(PAYLOAD)
    assert groups[:3] == [["FEAT", "USER", "PASS", "TYPE", "SIZE"], ["EPSV"], ["RETR"]]


def test_mode_e_get_sends_mode_opts_port_retr_in_one_round_trip(tmp_path):
    async def main():
        async with FakeServer(feat=("SIZE", "MDTM", "PARALLEL")) as srv:
            result = await parallel.get(_loc(srv.port), str(tmp_path / "f"), _opts(), 2)
            return srv.groups, result

    groups, result = asyncio.run(main())
    assert (tmp_path / "f").read_bytes() == PAYLOAD and result.bytes == len(PAYLOAD)
    assert groups[:2] == [["FEAT", "USER", "PASS", "TYPE", "SIZE", "MDTM"], ["MODE", "OPTS", "PORT", "RETR"]]


def test_single_stream_put_sends_allo_and_stor_in_one_round_trip(tmp_path):
    src = tmp_path / "src"
    src.write_bytes(PAYLOAD)

    async def main():
        async with FakeServer(feat=("SIZE",)) as srv:
            srv.want_reader = True
            result = await transfer.put(str(src), _loc(srv.port), _opts())
            return srv.groups, srv.stored, result

    groups, stored, result = asyncio.run(main())
    assert stored == PAYLOAD and result.bytes == len(PAYLOAD)
    assert groups[:3] == [["FEAT", "USER", "PASS", "TYPE"], ["EPSV"], ["ALLO", "STOR"]]


def test_a_refused_password_reads_as_a_login_failure_not_a_later_command(tmp_path):
    async def main():
        async with FakeServer(refuse={"PASS": "530 no", "TYPE": "530 log in first",
                                      "SIZE": "530 log in first"}) as srv:
            with pytest.raises(FTPError) as err:
                await transfer.get(_loc(srv.port), str(tmp_path / "f"), _opts())
            return srv.groups, str(err.value)

    groups, message = asyncio.run(main())
    assert message == "login refused for 'u': 530 no"
    assert groups[0] == ["FEAT", "USER", "PASS", "TYPE", "SIZE"]


def test_user_230_then_503_to_the_pipelined_pass_is_logged_in(tmp_path):
    async def main():
        async with FakeServer(feat=("SIZE",), refuse={"USER": "230 no password needed",
                                                      "PASS": "503 already logged in"}) as srv:
            return await transfer.get(_loc(srv.port), str(tmp_path / "f"), _opts())

    assert asyncio.run(main()).bytes == len(PAYLOAD)


def test_a_refused_command_mid_batch_names_it_after_the_later_replies(tmp_path):
    async def main():
        async with FakeServer(feat=("SIZE", "MDTM", "PARALLEL"),
                              refuse={"OPTS": "501 bad parallelism", "RETR": "425 no data connection"}) as srv:
            with pytest.raises(FTPError) as err:
                await parallel.get(_loc(srv.port), str(tmp_path / "f"), _opts(), 2)
            return srv.groups, str(err.value)

    groups, message = asyncio.run(main())
    assert message == "OPTS RETR Parallelism failed: 501 bad parallelism"
    assert groups[1] == ["MODE", "OPTS", "PORT", "RETR"]


def test_flow_control_batch_reads_every_reply_and_keeps_the_flow_in_step():
    async def main():
        async with FakeServer(refuse={"MODE": "504 no such mode"}) as srv:
            from drsftp.client.session.control import ControlConnection

            ctl = await ControlConnection.open("127.0.0.1", srv.port)
            try:
                fc = FlowControl(ctl)
                with pytest.raises(FTPError, match=r"^extended block mode \(MODE E\) failed: 504"):
                    await fc.batch([("MODE E", "extended block mode (MODE E)"), ("TYPE I", None), ("NOOP", None)])
                state, in_flight = fc.flow.state, list(fc.flow.in_flight)
                # in step: the next command's reply is its own
                assert (await fc.step("TYPE I")).code == 200
                return srv.groups, state, in_flight
            finally:
                await ctl.close()

    groups, state, in_flight = asyncio.run(main())
    assert groups[0] == ["MODE", "TYPE", "NOOP"] and state is State.READY and in_flight == []


# -- the sans-IO flow -------------------------------------------------------------


def R(code: int, text: str = "x") -> Reply:
    return Reply(code, (text,))


def test_flow_allows_a_mode_e_batch_before_any_reply():
    f = TransferFlow()
    for line in ("MODE E", "OPTS RETR Parallelism=4,4,4;", "PORT 127,0,0,1,4,1", "REST 0-100", "RETR /f"):
        f.send(line)
    assert f.state is State.READY and f.expected is State.TRANSFER
    assert list(f.in_flight) == ["MODE", "OPTS", "PORT", "REST", "RETR"]
    with pytest.raises(FlowError):
        f.send("PASV")  # nothing after the transfer command
    for verb, code in (("MODE", 200), ("OPTS", 200), ("PORT", 200), ("REST", 350)):
        assert isinstance(f.receive(verb, R(code)), Accepted)
    assert f.state is State.RESTARTED
    assert isinstance(f.receive("RETR", R(150)), TransferStarted) and f.state is State.TRANSFER
    assert list(f.in_flight) == ["RETR"]


def test_flow_a_refusal_mid_batch_blocks_sending_until_the_batch_is_answered():
    f = TransferFlow()
    for line in ("MODE E", "PORT 127,0,0,1,4,1", "RETR /f"):
        f.send(line)
    f.receive("MODE", R(200))
    assert isinstance(f.receive("PORT", R(501)), Refused)
    with pytest.raises(FlowError, match="refused"):
        f.send("EPSV")  # the state the batch leads to is unknown now
    assert isinstance(f.receive("RETR", R(425)), Refused)
    assert f.state is State.READY and f.expected is State.READY
    f.send("EPSV")


def test_flow_replies_must_come_in_command_order():
    f = TransferFlow()
    f.send("TYPE I")
    f.send("MODE E")
    with pytest.raises(FlowError, match=re.escape("MODE while TYPE")):
        f.receive("MODE", R(200))


def _get_r(tmp_path, srv_kw: dict, path: str):
    async def main():
        async with FakeServer(**srv_kw) as srv:
            loc = FTPLocation("127.0.0.1", srv.port, "u", "pw", path)
            result = await run_get([(loc, True)], str(tmp_path / "dest") + "/", _opts(),
                                   JobOptions(recursive=True, sessions=1))
            return srv.groups, result

    return asyncio.run(main())


def test_get_r_asks_for_the_source_listing_with_the_log_in(tmp_path):
    groups, result = _get_r(tmp_path, {"feat": ("MLST", "EPSV")}, "/d/")
    assert groups[0] == ["FEAT", "USER", "PASS", "TYPE", "MLST", "EPSV", "MLSD"]
    assert "MLSD" not in [v for g in groups[1:] for v in g]  # listed once
    assert result.count("ok") == 1 and (tmp_path / "dest" / "f1").read_bytes() == PAYLOAD


def test_get_r_lists_the_usual_way_when_the_early_epsv_is_refused(tmp_path):
    groups, result = _get_r(tmp_path, {"feat": ("MLST",), "refuse": {"EPSV": "500 EPSV not understood"}}, "/d/")
    assert groups[0][-2:] == ["EPSV", "MLSD"]
    assert [v for g in groups[1:] for v in g].count("MLSD") == 1  # (after PASV)
    assert result.count("ok") == 1 and (tmp_path / "dest" / "f1").read_bytes() == PAYLOAD


def test_get_r_of_a_file_reads_the_early_listing_refusal_first(tmp_path):
    groups, result = _get_r(tmp_path, {"feat": ("MLST", "EPSV")}, "/f")
    assert groups[0][-2:] == ["EPSV", "MLSD"]
    assert result.count("ok") == 1 and (tmp_path / "dest" / "f").read_bytes() == PAYLOAD
