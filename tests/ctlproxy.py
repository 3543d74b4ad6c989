"""A control-connection relay for tests: sits in front of an FTP server on
127.0.0.1, passes every line both ways, and

- holds each transfer's 226 (``hold`` s at most) until the client has sent
  the next transfer command (RETR/STOR) on that connection: a client that
  sends the next file's command before the current file's 226 loses
  nothing, one that waits for the 226 first waits ``hold`` s, counted in
  ``timeouts`` (pipelining shown by command order, not by a clock);
- runs ``on_command(line)`` before it passes a client's line on (a test
  changes the server's files at that moment).

Data connections do not pass through it (PASV/PORT name the servers'
own addresses)."""

from __future__ import annotations

import socket
import threading

TRANSFERS = ("RETR", "STOR")


class HoldingProxy:
    def __init__(self, server_port: int, hold: float = 3.0, on_command=None) -> None:
        self.server_port, self.hold, self.on_command = server_port, hold, on_command
        self.lst = socket.create_server(("127.0.0.1", 0))
        self.port = self.lst.getsockname()[1]
        self.lock = threading.Lock()
        self.timeouts = 0  # 226s held until ``hold`` ran out
        self.released = 0  # 226s the next transfer command released
        self.commands: list[str] = []
        self._socks: list[socket.socket] = []
        self._closed = False
        threading.Thread(target=self._accept, daemon=True).start()

    def close(self) -> None:
        self._closed = True
        self.lst.close()
        for s in list(self._socks):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            s.close()

    def _accept(self) -> None:
        for _ in range(1000):  # bounded
            try:
                c, _ = self.lst.accept()
            except OSError:
                return
            try:
                s = socket.create_connection(("127.0.0.1", self.server_port), timeout=10)
            except OSError:
                c.close()
                continue
            s.settimeout(None)
            self._socks += [c, s]
            state = {"sent": 0, "finals": 0, "closing": False, "cond": threading.Condition()}
            threading.Thread(target=self._up, args=(c, s, state), daemon=True).start()
            threading.Thread(target=self._down, args=(s, c, state), daemon=True).start()

    def _up(self, c: socket.socket, s: socket.socket, state: dict) -> None:
        f = c.makefile("rb")
        try:
            for line in f:
                text = line.decode(errors="replace").strip()
                verb = text.split(" ", 1)[0].upper()
                with self.lock:
                    self.commands.append(text)
                if self.on_command is not None:
                    self.on_command(text)
                s.sendall(line)
                with state["cond"]:
                    if verb in TRANSFERS:
                        state["sent"] += 1
                    elif verb in ("QUIT", "ABOR"):
                        state["closing"] = True
                    state["cond"].notify_all()
        except OSError:
            pass
        finally:
            with state["cond"]:
                state["closing"] = True
                state["cond"].notify_all()
            try:
                s.shutdown(socket.SHUT_WR)
            except OSError:
                pass

    def _down(self, s: socket.socket, c: socket.socket, state: dict) -> None:
        f = s.makefile("rb")
        cond = state["cond"]
        try:
            for line in f:
                if line.startswith(b"226 ") and state["sent"]:
                    with cond:
                        state["finals"] += 1
                        j = state["finals"]
                        ok = cond.wait_for(lambda j=j: state["sent"] > j or state["closing"], self.hold)
                    with self.lock:
                        if ok:
                            self.released += 1
                        else:
                            self.timeouts += 1
                c.sendall(line)
        except OSError:
            pass
        finally:
            try:
                c.shutdown(socket.SHUT_WR)
            except OSError:
                pass
