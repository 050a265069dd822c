"""``serve placement`` and ``db sync`` for the placement service."""
import argparse
import signal
import sys
import threading

from novella.db import migrate
from novella.placement import conf as conf_mod, wsgi
from novella.service import HTTPServer


def serve(conf, host="127.0.0.1", port=8778):
    """Serve the placement API on host:port until SIGINT/SIGTERM (threaded)."""
    server = HTTPServer(wsgi.make_app(conf), host, int(port), "placement").start()
    print(f"Placement API listening on {server.url}", flush=True)
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    stop.wait()
    server.stop()


def main(argv=None):
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = argparse.ArgumentParser(prog="novella-placement")
    parser.add_argument("command", nargs="+", help="'serve placement' or 'db sync'")
    parser.add_argument("--config-file", action="append", default=[])
    parser.add_argument("--bind", default="127.0.0.1:8778")
    args = parser.parse_args(argv)
    conf = conf_mod.make_conf(default_config_files=args.config_file)
    command = " ".join(args.command)
    if command in ("serve placement", "serve"):
        host, _sep, port = args.bind.rpartition(":")
        serve(conf, host or "127.0.0.1", int(port))
    elif command == "db sync":
        migrate.sync("placement", conf.placement_database.connection)
    else:
        parser.error("unknown command: %s" % command)
    return 0


if __name__ == "__main__":
    sys.exit(main())
