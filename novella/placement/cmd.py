"""``serve placement`` and ``db sync`` for the placement service."""
import argparse
import socketserver
import sys
from wsgiref import simple_server

from novella.db import migrate
from novella.placement import conf as conf_mod, wsgi


class _Handler(simple_server.WSGIRequestHandler):
    def log_message(self, *args):  # quiet access log
        pass


class _Server(socketserver.ThreadingMixIn, simple_server.WSGIServer):
    daemon_threads = True
    allow_reuse_address = True


def serve(conf, host="127.0.0.1", port=8778):
    """Serve the placement API on host:port until interrupted (threaded)."""
    app = wsgi.make_app(conf)
    server = simple_server.make_server(host, int(port), app, server_class=_Server,
                                       handler_class=_Handler)
    try:
        server.serve_forever()
    finally:
        server.server_close()


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
