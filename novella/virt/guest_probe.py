"""Run a command inside a guest built by ``novella.virt.guest_image``.

The guest serves commands on its second serial port; the hypervisor exposes
that port as a UNIX socket (``novella.virt.qemu`` puts it at ``probe.sock`` in
the guest's directory). One request is a line ``ID BASE64(COMMAND)``; the
answer a line ``ID EXIT_STATUS BASE64(OUTPUT)``. Lines with another id (an
earlier command's answer that nobody read, the server's ``ready`` banner) are
skipped.
"""
import base64
import socket
import time
import uuid


class ProbeError(Exception):
    pass


class GuestProbe:
    def __init__(self, socket_path):
        self.socket_path = socket_path

    def run(self, command, timeout=30):
        """-> (exit status, output) of ``sh -c command`` in the guest (stderr merged)."""
        deadline = time.monotonic() + timeout
        request_id = uuid.uuid4().hex[:12]
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
            sock.settimeout(timeout)
            sock.connect(self.socket_path)
            sock.sendall(b"%s %s\n" % (request_id.encode(),
                                       base64.b64encode(command.encode())))
            buf = b""
            while True:
                for line in buf.split(b"\n")[:-1]:
                    parts = line.strip(b"\r").split(b" ", 2)
                    # (A request echoed by the port before the guest's server set it
                    # raw has the command where the status goes: not an answer.)
                    if parts[0] == request_id.encode() and len(parts) >= 2 \
                            and parts[1].lstrip(b"-").isdigit():
                        out = base64.b64decode(parts[2]) if len(parts) == 3 else b""
                        return int(parts[1]), out.decode(errors="replace")
                buf = buf[buf.rfind(b"\n") + 1:]
                left = deadline - time.monotonic()
                if left <= 0:
                    raise ProbeError(f"no answer to {command!r} within {timeout}s")
                sock.settimeout(left)
                try:
                    chunk = sock.recv(65536)
                except socket.timeout:
                    raise ProbeError(f"no answer to {command!r} within {timeout}s") from None
                if not chunk:
                    raise ProbeError("the guest's probe socket closed")
                buf += chunk

    def check(self, command, timeout=30):
        """The output of ``command``; ProbeError when it exits non-zero."""
        status, out = self.run(command, timeout)
        if status:
            raise ProbeError(f"{command!r} exited {status}: {out}")
        return out

    def wait_ready(self, timeout=120):
        """Wait until the guest answers (it has booted); -> seconds waited."""
        start = time.monotonic()
        while True:
            try:
                self.run("true", timeout=min(5, max(1, timeout)))
                return time.monotonic() - start
            except (OSError, ProbeError):
                if time.monotonic() - start > timeout:
                    raise
                time.sleep(0.5)
