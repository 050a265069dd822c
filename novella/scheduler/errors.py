"""Errors the scheduler raises; they cross RPC by class name."""


class NoValidHost(Exception):
    """No host can take the request (the reference's message and code)."""

    code = 500
    prefix = "No valid host was found."

    def __init__(self, reason="", message=None):
        self.reason = reason
        self.message = message or f"{self.prefix} {reason}".strip()
        super().__init__(self.message)
