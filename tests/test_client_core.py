"""The client's drivers of the transfer core, without a server: the DRS
exchange over a control connection (drsftp/client/transfer/drsclient.py) and
--verify/--checksum (drsftp/client/transfer/verify.py)."""

import asyncio
import hashlib

import pytest

from drsftp.client.session.control import FTPError, Pending
from drsftp.client.transfer import verify
from drsftp.client.transfer.drsclient import DRSDriver
from drsftp.ftp.flow import FlowError, TransferFlow
from drsftp.ftp.replies import Reply


def _answer(pending: Pending, code: int, text: str = "") -> None:
    pending.final.set_result(Reply(code, (text,)))


def test_one_drs_command_at_a_time_its_reply_handed_over_and_a_500_ends_the_exchange():
    async def main():
        sent, got = [], []
        drs = DRSDriver(True, lambda pairs, seconds: got.append(pairs))
        drs.exchange.min_interval = 0.0  # (its pacing by time: test_transfer_core)

        def send(line):
            sent.append(Pending(line.split()[0]))
            return sent[-1]

        drs.maybe_send(send, 0.0, lambda: {"rtt_us": 900, "rate": 7})
        drs.maybe_send(send, 0.0, lambda: {"rtt_us": 900})  # the first is still out
        assert len(sent) == 1 and drs.exchange.pending
        _answer(sent[0], 200, "DRS rtt_us=5000 rate=77")
        await asyncio.sleep(0)
        assert got == [{"rtt_us": 5000, "rate": 77}] and drs.exchange.replies == 1
        drs.maybe_send(send, 0.0, lambda: {})
        _answer(sent[1], 500, "Unknown command")
        await asyncio.sleep(0)
        assert not drs.exchange.enabled and len(got) == 1
        drs.maybe_send(send, 0.0, lambda: {})
        assert len(sent) == 2  # off for the rest of the session

    asyncio.run(main())


def test_drs_outside_a_transfer_is_not_sent_and_a_streams_request_counts_its_200():
    async def main():
        flow = TransferFlow()
        drs = DRSDriver(True, lambda pairs, seconds: None)

        def send(line):
            flow.send(line)  # (what FlowControl.send checks first)
            return Pending("DRS")

        with pytest.raises(FlowError):
            flow.send("DRS")
        drs.maybe_send(send, None, lambda: {"rate": 1})  # no transfer runs: refused by the flow, not raised
        assert not drs.exchange.pending

        asked = []

        def record(line):
            asked.append((line, Pending("DRS")))
            return asked[-1][1]

        drs.ask(record, {"streams": 3})
        assert asked[0][0] == "DRS streams=3"
        _answer(asked[0][1], 200, "DRS rate=1")
        await asyncio.sleep(0)
        assert drs.exchange.replies == 1 and not drs.exchange.pending

    asyncio.run(main())


class _Control:
    """What verify.py asks of a control connection: FEAT and replies."""

    def __init__(self, features, replies):
        self.features, self.replies, self.sent = set(features), dict(replies), []

    async def command(self, line, timeout=60.0):
        self.sent.append(line)
        code, text = self.replies.get(line.split(" ", 1)[0], (500, "Unknown command."))
        return Reply(code, (text,))


@pytest.fixture
def local(tmp_path):
    path = tmp_path / "f.bin"
    path.write_bytes(b"drsftp" * 1000)
    return str(path), hashlib.sha256(path.read_bytes()).hexdigest()


def test_verify_takes_hash_where_feat_lists_it_else_tries_cksm(local):
    path, digest = local
    ctl = _Control({"HASH"}, {"OPTS": (200, "OK"), "HASH": (213, f"SHA-256 0-6000 {digest} /f.bin")})
    assert asyncio.run(verify.verify(ctl, "/f.bin", path)) == digest
    assert ctl.sent == ["OPTS HASH SHA-256", "HASH /f.bin"]
    grid = _Control(set(), {"CKSM": (213, digest.upper())})  # GridFTP: CKSM not in FEAT before login
    assert asyncio.run(verify.same_digest(grid, "/f.bin", path))
    assert grid.sent == ["CKSM SHA256 0 -1 /f.bin"]


def test_verify_fails_on_a_mismatch_and_when_the_server_has_no_digest(local):
    path, _ = local
    other = "0" * 64
    with pytest.raises(FTPError, match="verification failed") as err:
        asyncio.run(verify.verify(_Control(set(), {"CKSM": (213, other)}), "/f.bin", path))
    assert not err.value.transient
    assert not asyncio.run(verify.same_digest(_Control(set(), {"CKSM": (213, other)}), "/f.bin", path))
    with pytest.raises(FTPError) as err:
        asyncio.run(verify.verify(_Control(set(), {}), "/f.bin", path))  # 500 to CKSM: neither is offered
    assert str(err.value) == "--verify: the server does not offer HASH; the file was not verified"
    with pytest.raises(FTPError, match="--checksum: CKSM failed: 213"):
        asyncio.run(verify.same_digest(_Control(set(), {"CKSM": (213, "not hex")}), "/f.bin", path))
    with pytest.raises(FTPError, match="--verify: HASH failed: 550"):
        asyncio.run(verify.verify(_Control({"HASH"}, {"HASH": (550, "No such file.")}), "/f.bin", path))
