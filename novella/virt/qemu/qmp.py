"""One QMP command at a time over a guest's monitor socket (QEMU's qemu.qmp client)."""
import logging
import threading

from qemu.qmp import legacy

# A monitor that does not answer yet (QEMU starting) or any more (QEMU gone) is an
# answer here (QMPError), not an error for the log: qemu.qmp logs each as one.
logging.getLogger("qemu.qmp.protocol").setLevel(logging.CRITICAL)


class QMPError(Exception):
    pass


class Monitor:
    """Connects for each command: QEMU serves one monitor client at a time, and a
    short-lived connection leaves the socket free for an operator's own ``socat``."""

    def __init__(self, path, timeout=30):
        self.path = path
        self.timeout = timeout
        self._lock = threading.Lock()

    def command(self, name, **arguments):
        with self._lock:
            qmp = legacy.QEMUMonitorProtocol(self.path)
            try:
                qmp.connect(negotiate=True)
                reply = qmp.cmd_raw(name, arguments or None)
            except (OSError, legacy.QMPError) as exc:
                raise QMPError(f"{name}: {exc}") from exc
            finally:
                try:
                    qmp.close()
                except Exception:  # noqa: BLE001 - the peer quit (after "quit" it does)
                    pass
        if "error" in reply:
            raise QMPError(f"{name}: {reply['error'].get('desc', reply['error'])}")
        return reply.get("return")
