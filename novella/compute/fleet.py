"""Many compute hosts of one cell, run together by one process.

The all-in-one runs thousands of simulated hosts. Started one by one, each
host's ``init_host`` costs a dozen statements and four placement requests;
here the hosts of a cell that have nothing to recover start together: their
services rows in a few statements, their node rows and providers by
``resource_tracker.update_available_resources`` (the providers in one
placement transaction when placement is embedded). A host that may have
something to recover (a migration names it, a server of its is in the middle
of a task or shelved, its disks are not exactly its live servers') goes
through its own ``init_host``, which finishes or undoes what it was doing
(novella/compute/recovery.py).
"""
import uuid

import sqlalchemy as sa

from novella.compute import SERVICE_VERSION
from novella.compute import states as vm_states
from novella.compute import resource_tracker
from novella.db import cell_models as m
from novella.db import records
from novella.db.engine import insert_rows

BINARY = resource_tracker.SERVICE_BINARY
TOPIC = "compute"


def init_hosts(managers):
    """``init_host`` of many compute managers of one cell; returns the hosts
    that went through their own (those with something to recover)."""
    if not managers:
        return []
    for mgr in managers:
        mgr.driver.init_host(mgr.host)
    known = _hosts_to_recover(managers)
    for mgr in managers:
        if mgr.host in known:
            mgr.init_host()
    fresh = [mgr for mgr in managers if mgr.host not in known]
    if fresh:
        _ensure_services(fresh)
        resource_tracker.update_available_resources([mgr.rt for mgr in fresh])
    return sorted(known)


def _hosts_to_recover(managers):
    """The hosts among ``managers`` whose records or disks may leave their
    recovery something to do: a migration names the host, one of its servers
    has a task in progress or is shelved, or its disks are not exactly its
    live servers' (a guest of a deleted server, another host's disk). What
    recovery acts on is a subset of these."""
    hosts = sorted(mgr.host for mgr in managers)
    i, mig = m.Instance, m.Migration
    live = {host: set() for host in hosts}
    known = set()
    with managers[0].cell_db.read_session() as s:
        for host, server, task_state, vm_state in s.execute(sa.select(
                i.host, i.uuid, i.task_state, i.vm_state).where(
                i.host.in_(hosts), i.deleted == 0)):
            live[host].add(server)
            if task_state is not None or vm_state == vm_states.SHELVED:
                known.add(host)
        for column in (mig.source_compute, mig.dest_compute):
            known.update(s.scalars(sa.select(column).distinct().where(
                column.in_(hosts), mig.deleted == 0)))
    known.update(mgr.host for mgr in managers
                 if set(mgr.driver.list_disks()) != live[mgr.host]
                 or set(mgr.driver.list_instances()) - live[mgr.host])
    return known


def _ensure_services(managers):
    """The services row of each host, made where missing, at this version."""
    hosts = sorted(mgr.host for mgr in managers)
    svc = m.Service
    where = (svc.host.in_(hosts), svc.binary == BINARY, svc.deleted == 0)
    now = records.utcnow()
    with managers[0].cell_db.connection(write=True) as conn:
        present = set(conn.execute(sa.select(svc.host).where(*where)).scalars())
        insert_rows(conn, svc, [
            {"uuid": str(uuid.uuid4()),
             "host": host, "binary": BINARY, "topic": TOPIC, "report_count": 0,
             "last_seen_up": now, "version": SERVICE_VERSION}
            for host in hosts if host not in present])
        if present:
            conn.execute(sa.update(svc).where(*where, svc.version != SERVICE_VERSION)
                         .values(version=SERVICE_VERSION))
