"""TUN devices with virtio-net headers (GSO super-packets) and a timerfd.

With IFF_VNET_HDR and TUNSETOFFLOAD(CSUM|TSO4|TSO6|TSO_ECN) the kernel hands
the emulator whole 64 KB TCP super-packets, each behind a 10-byte
virtio_net_hdr; written to the other TUN unchanged they are delivered as
such.  This is what lets a Python forwarder carry > 1 Gbit/s (docs/DESIGN.md#kf-tun).
"""

from __future__ import annotations

import ctypes
import fcntl
import os
import struct

TUNSETIFF = 0x400454CA
TUNSETOFFLOAD = 0x400454D0
IFF_TUN, IFF_NO_PI, IFF_VNET_HDR = 0x0001, 0x1000, 0x4000
TUN_F_CSUM, TUN_F_TSO4, TUN_F_TSO6, TUN_F_TSO_ECN = 0x01, 0x02, 0x04, 0x08
VNET_HDR_LEN = 10
GSO_NONE = 0
READ_SIZE = 65536 + VNET_HDR_LEN + 256


def open_tun(name: str) -> int:
    """Create TUN device ``name`` (removed when the fd closes); returns the fd."""
    fd = os.open("/dev/net/tun", os.O_RDWR | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        ifr = struct.pack("16sH", name.encode(), IFF_TUN | IFF_NO_PI | IFF_VNET_HDR)
        fcntl.ioctl(fd, TUNSETIFF, ifr)
        fcntl.ioctl(fd, TUNSETOFFLOAD, TUN_F_CSUM | TUN_F_TSO4 | TUN_F_TSO6 | TUN_F_TSO_ECN)
    except OSError:
        os.close(fd)
        raise
    return fd


def segments_and_wire_size(pkt: bytes | memoryview) -> tuple[int, int]:
    """(segments, bytes on the wire) for a packet read with its vnet header.

    A GSO packet of payload P with header length H and segment size S goes
    out as ceil(P / S) packets, each carrying its own H header bytes.
    """
    ip_len = len(pkt) - VNET_HDR_LEN
    gso_type = pkt[1]
    if gso_type == GSO_NONE or ip_len <= 40:
        return 1, ip_len
    # virtio_net_hdr: flags, gso_type, hdr_len(2), gso_size(2), csum_start(2), csum_offset(2)
    gso_size = pkt[4] | (pkt[5] << 8)  # little-endian (x86 legacy vnet header)
    ip = VNET_HDR_LEN
    version = pkt[ip] >> 4
    if version == 4:
        l3 = (pkt[ip] & 0x0F) * 4
    elif version == 6:
        l3 = 40
    else:
        return 1, ip_len
    if ip_len < l3 + 20:
        return 1, ip_len
    header = l3 + (pkt[ip + l3 + 12] >> 4) * 4  # + TCP data offset
    payload = ip_len - header
    if gso_size <= 0 or payload <= gso_size:
        return 1, ip_len
    n = -(-payload // gso_size)
    return n, ip_len + (n - 1) * header


# -- timerfd through libc (os.timerfd_* arrived only in Python 3.13) -------
CLOCK_MONOTONIC = 1
TFD_NONBLOCK, TFD_CLOEXEC = os.O_NONBLOCK, os.O_CLOEXEC
TFD_TIMER_ABSTIME = 1


class _Timespec(ctypes.Structure):
    _fields_ = [("tv_sec", ctypes.c_long), ("tv_nsec", ctypes.c_long)]


class _Itimerspec(ctypes.Structure):
    _fields_ = [("it_interval", _Timespec), ("it_value", _Timespec)]


class TimerFD:
    """An absolute CLOCK_MONOTONIC timer (time.monotonic's clock) for epoll:
    wake-ups in microseconds, where epoll's own timeout rounds to a ms."""

    def __init__(self) -> None:
        self._libc = ctypes.CDLL(None, use_errno=True)
        fd = self._libc.timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC)
        if fd < 0:
            raise OSError(ctypes.get_errno(), "timerfd_create failed")
        self.fd = fd
        self._spec = _Itimerspec()
        self.armed_at: float | None = None

    def arm(self, when: float) -> None:
        if self.armed_at == when:
            return
        sec = int(when)
        self._spec.it_value.tv_sec = sec
        self._spec.it_value.tv_nsec = max(1, int((when - sec) * 1e9))
        if self._libc.timerfd_settime(self.fd, TFD_TIMER_ABSTIME, ctypes.byref(self._spec), None) < 0:
            raise OSError(ctypes.get_errno(), "timerfd_settime failed")
        self.armed_at = when

    def clear(self) -> None:
        self.armed_at = None
        try:
            os.read(self.fd, 8)
        except BlockingIOError:
            pass

    def close(self) -> None:
        os.close(self.fd)
