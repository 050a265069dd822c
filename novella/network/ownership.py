"""Which of a server's ports go with it, as the compute side decides it.

The network service is not asked whose a port is: a real Neutron has no
attribute saying that a port was made for a server. The compute side knows
it from the server's own records, the same whichever network client is used
(the database client or the HTTP one):

- a port whose ``device_id`` is the server goes with it (it is deleted at the
  server's delete, at its detach, when an attach or a build that made it is
  undone) unless the server's records say the user gave it;
- the user's ports are those the server's network info cache marks
  ``preserve_on_delete`` (the network client says so of the ports it was given
  when it allocates them), those noted in the server's system metadata
  (``USER_PORTS``) and those the operation in flight names (a build's
  requested ports).

A port the user gave is noted before it becomes the server's: a build notes
its requested ports (``USER_PORTS``) before it asks for them, an attach its
port (once it has recorded the attach, novella/compute/interface_ops.py,
and before it asks for the port). A port the compute
service makes cannot be noted before it exists, and need not be: it is made
with the server's ``device_id``, so a process that dies after making it and
before the info cache names it leaves a port that the server's delete, or the
attach run again, finds by ``device_id`` and recognises as not the user's.
So a death between any two statements leaves no port behind, and never
deletes the user's.
"""
import json

USER_PORTS = "user_ports"  # system metadata: the ports the user gave the server (JSON list)


def requested_port_ids(requested_networks):
    """The ids of the ports ``requested_networks`` (a build's or an attach's) names."""
    if not isinstance(requested_networks, (list, tuple)):
        return []
    out = []
    for r in requested_networks:
        if isinstance(r, dict) and (r.get("port_id") or r.get("port")):
            out.append(r.get("port_id") or r.get("port"))
    return out


def noted(system_metadata):
    """The ports ``USER_PORTS`` of a server's system metadata names."""
    try:
        return list(json.loads((system_metadata or {}).get(USER_PORTS) or "[]"))
    except ValueError:
        return []


def with_noted(system_metadata, port_ids):
    """The value of ``USER_PORTS`` naming ``port_ids`` too (None: nothing new to note)."""
    have = noted(system_metadata)
    new = [p for p in dict.fromkeys(port_ids) if p and p not in have]
    return json.dumps(have + new) if new else None


def user_ports(network_info, system_metadata=None, also=()):
    """The ports of a server that are the user's: kept (unbound and released) when the
    server lets them go; every other port whose device is the server is deleted."""
    out = {vif["id"] for vif in network_info or [] if vif.get("preserve_on_delete")}
    out.update(noted(system_metadata))
    out.update(p for p in also if p)
    return out
