"""The client's get data path (a BufferedProtocol over the data socket), on loopback."""

import asyncio
import errno
import io
import logging
import threading
import types

import pytest
from conftest import tcp_pair

from drsftp.client.transfer.streammode import close_data, receive_file

MiB = 1 << 20


def _send(sock, total, close=True):
    def run():
        block = bytes(range(256)) * 4096  # 1 MiB with a pattern
        try:
            left = total
            while left > 0:
                sock.sendall(block[:min(left, len(block))])
                left -= len(block)
        except OSError:
            pass  # the receiver went away (the cancel test)
        finally:
            if close:
                sock.close()
    t = threading.Thread(target=run, daemon=True)
    t.start()
    return t


def _xfer():
    return types.SimpleNamespace(moved=0, data_transport=None)


def test_every_byte_reaches_the_file_in_order_and_eof_ends_the_receive():
    sender, receiver = tcp_pair("receiver")
    f, xfer = io.BytesIO(), _xfer()
    t = _send(sender, 24 * MiB + 12345)

    async def main():
        await asyncio.wait_for(receive_file(receiver, f, xfer), 30)
        close_data(receiver, xfer)
        await asyncio.sleep(0)  # the transport's connection_lost runs

    asyncio.run(main())
    t.join(10)
    data = f.getvalue()
    assert xfer.moved == len(data) == 24 * MiB + 12345
    assert data[:MiB] == bytes(range(256)) * 4096 and data[-12345:] == (bytes(range(256)) * 49)[:12345]
    assert receiver.fileno() == -1  # closed


class _FullDisk(io.BytesIO):
    def write(self, b):
        if self.tell() + len(b) > 3 * MiB:
            raise OSError(errno.ENOSPC, "No space left on device")
        return super().write(b)


def test_a_full_disk_ends_the_receive_with_the_files_error_and_no_loop_noise(caplog):
    sender, receiver = tcp_pair("receiver")
    f, xfer = _FullDisk(), _xfer()
    t = _send(sender, 64 * MiB)

    async def main():
        try:
            with pytest.raises(OSError) as err:
                await asyncio.wait_for(receive_file(receiver, f, xfer), 30)
            return err.value
        finally:
            close_data(receiver, xfer)
            await asyncio.sleep(0)

    with caplog.at_level(logging.DEBUG, logger="asyncio"):
        exc = asyncio.run(main())
    t.join(10)
    assert exc.errno == errno.ENOSPC
    assert xfer.moved == len(f.getvalue()) <= 3 * MiB
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR], caplog.text


class _Closable(io.BytesIO):
    """Counts the writes tried after close(), which get() does on a stop."""

    late_writes = 0

    def write(self, b):
        if self.closed:
            self.late_writes += 1
        return super().write(b)


def test_a_cancelled_receive_stops_writing_before_its_file_closes():
    sender, receiver = tcp_pair("receiver")
    f, xfer = _Closable(), _xfer()
    t = _send(sender, 256 * MiB)  # bounded: the sender stops at a reset or at 256 MiB

    async def main():
        task = asyncio.ensure_future(receive_file(receiver, f, xfer))
        while xfer.moved < 2 * MiB:
            await asyncio.sleep(0.001)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        at_cancel = xfer.moved
        f.close()  # as get() does when the transfer is stopped
        await asyncio.sleep(0.2)  # data keeps arriving: nothing may be written now
        assert f.late_writes == 0 and xfer.moved == at_cancel
        close_data(receiver, xfer)
        await asyncio.sleep(0)

    asyncio.run(main())
    t.join(10)
    assert not t.is_alive()
