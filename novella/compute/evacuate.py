"""Evacuation on compute hosts (bound into ComputeManager).

    rebuild_instance                 destination  claim, INACTIVE port bindings naming this
                                                  host's providers, a second attachment of
                                                  each volume, the guest spawned from its
                                                  image; then the server is this host's:
                                                  bindings active, attachments switched
                                                  (the down host's deleted), migration 'done'
    (init_host) clean_evacuated     source       when the host is back: the guest left here
                                                  destroyed, its bindings here deleted, the
                                                  migration's allocation (the source's)
                                                  deleted, migration 'completed'

A rebuild that stopped part-way (the process died in it) is undone by the
conductor that takes the evacuation over: it asks each destination the
rebuild may have begun on to give back what it made there
(``abandon_rebuild``); for a destination that does not answer it deletes
that host's bindings and attachments itself.

Until the source host is back, the migration holds the source's allocation:
the resources there stay counted, as the guest may still exist on its disk.
A destination that fails gives back all it made and raises, so the conductor
can try an alternate.
"""
import sqlalchemy as sa

from novella.compute import cleanup
from novella.compute import states as vm_states
from novella.compute.states import migration_status as ms, task_states
from novella.compute import steps
from novella.compute import teardown
from novella.compute import connections
from novella.compute import guest
from novella.rpc import notifications
from novella.db import cell_models as m
from novella.db import records


def rebuild_instance(compute, ctxt, instance_uuid, migration_uuid, port_profiles=None,
                     availability_zone=None):
    """Rebuild here a server whose host is down (evacuate)."""
    with steps.step(compute, ctxt, instance_uuid, "compute_rebuild_instance",
                    notifications.REBUILD) as st:
        inst = st.instance
        flavor = records.flavor_of(inst)
        made = {"claim": None, "bindings": False, "attachments": {}, "spawned": False}
        try:
            block_device_info = connections.take_in(compute, ctxt, inst, migration_uuid, port_profiles,
                                              made)
            made["spawned"] = True
            compute.driver.spawn(ctxt, guest.instance_dict(inst, flavor),
                              {"id": inst.image_ref, "properties": {}},
                              network_info=guest.network_info_of(inst),
                              block_device_info=block_device_info)
        except Exception:
            teardown.give_back(
                compute, ctxt, inst, guest=(teardown.GUEST,) if made["spawned"] else (),
                bindings=made["bindings"], attachments=made["attachments"].values(),
                claim=teardown.MOVE_CLAIM if made["claim"] is not None else None)
            raise
        if compute.network_api is not None:
            guest.save_network_info(compute, instance_uuid, compute.network_api.activate_port_bindings(
                ctxt, instance_uuid, compute.host))
        if inst.vm_state == vm_states.STOPPED:
            compute.driver.power_off(guest.instance_dict(inst))
        # The point of no return: the server is this host's from here.
        records.update_instance(
            compute.cell_db, instance_uuid, expected_task_state=task_states.REBUILDING,
            host=compute.host, node=compute.rt.nodename, launched_on=compute.host, task_state=None,
            vm_state=(vm_states.STOPPED if inst.vm_state == vm_states.STOPPED
                      else vm_states.ACTIVE),
            power_state=guest.power(compute, instance_uuid), availability_zone=availability_zone,
            reload=False)
        finish_rebuild(compute, ctxt, instance_uuid, migration_uuid)


def finish_rebuild(compute, ctxt, instance_uuid, migration_uuid):
    """The rest of a rebuild once the server is this host's, each part safe to run
    again (a restarted service finishes it, ``finish_taken_over``): the volumes
    switched to the attachments made here (the down host's deleted), the claim
    here current, the migration 'done' (it keeps the source's allocation)."""
    connections.switch_attachments(compute, ctxt, instance_uuid, connections.strays(
        compute.volume_api, compute.cell_db, ctxt, instance_uuid))
    compute.rt.apply_migration_context(ctxt, instance_uuid)
    teardown.give_back(compute, ctxt, instance_uuid, claim=teardown.MOVE_CLAIM, strict=True)
    guest.migration(compute, migration_uuid, status=ms.DONE, dest_compute=compute.host,
                    dest_node=compute.rt.nodename)


def finish_taken_over(compute, ctxt):
    """The evacuations to this host that stopped once the server was this host's
    (its service died in the rebuild's last part): finished."""
    with compute.cell_db.read_session() as s:
        stopped = s.execute(sa.select(m.Migration.uuid, m.Migration.instance_uuid).join(
            m.Instance, m.Instance.uuid == m.Migration.instance_uuid).where(
            m.Instance.host == compute.host, m.Instance.deleted == 0,
            m.Migration.source_compute != compute.host,
            m.Migration.deleted == 0, m.Migration.migration_type == "evacuation",
            m.Migration.status.in_(ms.IN_PROGRESS))).all()
    for migration_uuid, instance_uuid in stopped:
        with cleanup.step(f"finish the evacuation of {instance_uuid}"):
            finish_rebuild(compute, ctxt, instance_uuid, migration_uuid)


def abandon_rebuild(compute, ctxt, instance_uuid, migration_uuid):
    """The undo of a rebuild here that stopped part-way (its process died in it):
    what it made here goes, read from the services that hold it, as nothing of
    it is known in memory any more: the guest, this host's port bindings (the
    source's active again), the attachments the server's volumes do not
    point at (made here), the claim. A server this host took over is left."""
    with guest.locked(compute, instance_uuid):
        inst = guest.get(compute, instance_uuid)
        if inst.host == compute.host:
            return
        if compute.network_api is not None:
            compute.network_api.activate_port_bindings(ctxt, instance_uuid, inst.host)
        teardown.give_back(compute, ctxt, inst, guest=(teardown.GUEST,), bindings=True,
                           attachments=connections.strays(
                               compute.volume_api, compute.cell_db, ctxt, instance_uuid).values(),
                           claim=teardown.MOVE_CLAIM, migration_uuid=migration_uuid,
                           strict=True)


def _not_cleaned_up(compute, *where):
    """(migration uuid, instance uuid) of the evacuations whose source has not cleaned
    up yet (the migration still holds the source's allocation)."""
    with compute.cell_db.read_session() as s:
        return s.execute(sa.select(m.Migration.uuid, m.Migration.instance_uuid).where(
            m.Migration.deleted == 0, m.Migration.migration_type == "evacuation",
            m.Migration.status == ms.DONE, *where)).all()


def free_down_sources(compute, ctxt, instance_uuid):
    """A server deleted before the hosts it was evacuated from are back: their
    resources, which its migrations hold, go with it (nothing else would give them
    back: the host's clean-up finds the guest, destroys it and completes the migration,
    but the server's books are gone)."""
    for migration_uuid, _ in _not_cleaned_up(compute, m.Migration.instance_uuid == instance_uuid):
        teardown.give_back(compute, ctxt, instance_uuid, allocation=migration_uuid, strict=True)


def clean_evacuated(compute, ctxt):
    """Servers evacuated while this host was down: what is left of them here goes."""
    done = _not_cleaned_up(compute, m.Migration.source_compute == compute.host)
    for migration_uuid, instance_uuid in done:
        with cleanup.step(f"clean up evacuated server {instance_uuid}"):
            # The migration holds the source's allocation until then.
            teardown.give_back(compute, ctxt, instance_uuid, guest=(teardown.GUEST,),
                               bindings=True, allocation=migration_uuid, strict=True)
            guest.migration(compute, migration_uuid, status=ms.COMPLETED)
