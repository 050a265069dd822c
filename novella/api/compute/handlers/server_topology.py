"""GET /servers/{id}/topology (2.78): the server's NUMA cells as its host claimed them.

Each cell's guest vCPUs are numbered in cell order (cell 0 has the first ones), as
the claim splits them; ``siblings`` is empty (no guest CPU threads are modelled) and
``pagesize_kb`` null (no huge pages). Who may see hosts (``host:index``) also gets
the host cell and, for pinned vCPUs, the host CPU of each.
"""
from novella.api.compute import errors, instances
from novella.db import cells as cells_mod, servers as servers_db

P = "compute:server:topology:"


def index(req, server_id):
    if not req.at_least("2.78"):
        raise errors.NotFound("The resource could not be found.")
    rec = instances.get(req, server_id, view=False)
    target = {"project_id": rec["project_id"]}
    req.authorize(P + "index", target)
    show_host = req.can(P + "host:index", target)
    topology = None
    if rec["cell"] is not None:
        topology = servers_db.numa_topology(cells_mod.cell_database(rec["cell"]), server_id)
    if not topology:
        return 200, {"nodes": [], "pagesize_kb": None}
    nodes, first = [], 0
    for cell in topology["cells"]:
        vcpus = list(range(first, first + cell["vcpus"]))
        first += cell["vcpus"]
        node = {"vcpu_set": vcpus, "siblings": [], "memory_mb": cell["memory_mb"]}
        if show_host:
            node["host_node"] = cell["host_cell"]
            node["cpu_pinning"] = dict(zip(vcpus, cell["cpu_pinning"] or []))
        nodes.append(node)
    return 200, {"nodes": nodes, "pagesize_kb": None}


ROUTES = [("GET", "/servers/{server_id}/topology", index)]
