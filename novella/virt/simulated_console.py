"""A simulated guest's serial port, reachable over TCP as a real guest's is.

Whoever connects reads the guest's console log from its beginning, then what
the guest writes to it while connected; what they send is echoed back, as a
guest's terminal echoes what is typed. The console proxy relays a websocket
to it exactly as it relays one to a QEMU guest's serial socket.
"""
import os
import select
import socket
import threading

POLL_SECONDS = 0.2  # how soon a connected client sees a line the guest wrote


class SerialPort:
    """A listening socket on ``address`` (an ephemeral port) serving ``log_path``."""

    def __init__(self, log_path, address="127.0.0.1"):
        self.log_path = log_path
        self._sock = socket.create_server((address, 0))
        self.address, self.port = self._sock.getsockname()[:2]
        self._closed = threading.Event()
        threading.Thread(target=self._accept, daemon=True,
                         name=f"serial-port-{self.port}").start()

    def close(self):
        self._closed.set()
        try:
            self._sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self._sock.close()

    @property
    def closed(self):
        return self._closed.is_set()

    def _accept(self):
        while not self._closed.is_set():
            try:
                conn, _addr = self._sock.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn):
        sent = 0
        poller = select.poll()
        poller.register(conn, select.POLLIN)
        with conn:
            try:
                while not self._closed.is_set():
                    sent = self._send_log(conn, sent)
                    # poll(), not select(): a busy process's descriptors pass 1023.
                    if poller.poll(POLL_SECONDS * 1000):
                        data = conn.recv(4096)
                        if not data:
                            return
                        conn.sendall(data)
            except OSError:
                return

    def _send_log(self, conn, offset):
        """Send what the log holds past ``offset``; the new offset."""
        try:
            if os.path.getsize(self.log_path) <= offset:
                return offset
            with open(self.log_path, "rb") as f:
                f.seek(offset)
                data = f.read()
        except FileNotFoundError:
            return offset
        # The log's lines end in \n; a terminal wants \r\n.
        conn.sendall(data.replace(b"\n", b"\r\n"))
        return offset + len(data)
