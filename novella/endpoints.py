"""Every HTTP API Novella serves: its name, its port and its catalog entry.

Read by the all-in-one, `novella serve` and `novella up --separate` alike, so
the three agree on ports and on what the catalog lists.
"""

# name, offset from --port-base, usual port
PORTS = [("identity", 0, 5000), ("compute", 1, 8774), ("placement", 2, 8778),
         ("image", 3, 9292), ("network", 4, 9696), ("volume", 5, 8776), ("optimize", 6, 9322)]
# The catalog's service type and name for each HTTP API, and the path after its port.
SERVICES = {"identity": ("identity", "keystone", "/v3"), "compute": ("compute", "nova", "/v2.1"),
            "placement": ("placement", "placement", ""), "image": ("image", "glance", ""),
            "network": ("network", "neutron", ""), "volume": ("volumev3", "cinderv3", "/v3"),
            "optimize": ("infra-optim", "watcher", "")}
# The console proxies (websockets, not in the catalog): name, offset from --port-base,
# usual port ([vnc] novncproxy_port, [serial_console] serialproxy_port).
CONSOLE_PROXIES = [("novncproxy", 7, 6080), ("serialproxy", 8, 6083)]
# The `novella serve` service that runs each of them but identity (Keystone's own).
SERVE = {"api": "compute", "placement": "placement", "image": "image", "network": "network",
         "volume": "volume", "optimize": "optimize"}
