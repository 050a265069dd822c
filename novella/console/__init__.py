"""The console proxies (``novella serve novncproxy`` / ``serialproxy``, and in the
all-in-one): a browser's or client's websocket relayed to a guest's console
once its single-use token checks out (novella/console/proxy.py)."""
