"""``[vnc]``, ``[serial_console]``, ``[consoleauth]`` and ``[DEFAULT] web``: the
remote consoles and their proxies (novella/console/), with the reference's
option names and defaults (docs/consoles.md)."""
from oslo_config import cfg

default_opts = [
    cfg.StrOpt("web", default="/usr/share/novnc",
               help="Directory of the web pages the console proxies serve (noVNC's "
                    "vnc_lite.html and vnc.html, from Debian's novnc package)."),
]
vnc_opts = [
    cfg.BoolOpt("enabled", default=True, deprecated_group="DEFAULT",
                deprecated_name="vnc_enabled",
                help="Offer VNC consoles of this host's guests (os-getVNCConsole, "
                     "remote-consoles with protocol vnc)."),
    cfg.URIOpt("novncproxy_base_url", default="http://127.0.0.1:6080/vnc_auto.html",
               help="The noVNC page a VNC console's URL opens, as a browser reaches the "
                    "novncproxy service; the token is added to it."),
    cfg.StrOpt("novncproxy_host", default="0.0.0.0",
               help="Address the novncproxy service listens on."),
    cfg.PortOpt("novncproxy_port", default=6080, help="Port the novncproxy service listens on."),
]
serial_opts = [
    cfg.BoolOpt("enabled", default=False,
                help="Offer serial consoles of this host's guests (os-getSerialConsole, "
                     "remote-consoles with protocol serial)."),
    cfg.URIOpt("base_url", default="ws://127.0.0.1:6083/",
               help="The serialproxy service's websocket address as clients reach it; the "
                    "token is added to it."),
    cfg.StrOpt("proxyclient_address", default="127.0.0.1",
               help="Address of this host the serial proxy connects to (where the guests' "
                    "serial ports listen)."),
    cfg.StrOpt("serialproxy_host", default="0.0.0.0",
               help="Address the serialproxy service listens on."),
    cfg.PortOpt("serialproxy_port", default=6083,
                help="Port the serialproxy service listens on."),
]
consoleauth_opts = [
    cfg.IntOpt("token_ttl", default=600,
               help="Seconds a console's token may be used (once) before it expires."),
]


def register_opts(conf):
    conf.register_opts(default_opts)
    conf.register_opts(vnc_opts, group="vnc")
    conf.register_opts(serial_opts, group="serial_console")
    conf.register_opts(consoleauth_opts, group="consoleauth")
