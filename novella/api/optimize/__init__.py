"""The Infrastructure Optimization API (Watcher's v1 wire format): drains."""
