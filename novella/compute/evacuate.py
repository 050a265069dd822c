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
        # The server is this host's from here.
        if compute.network_api is not None:
            guest.save_network_info(compute, instance_uuid, compute.network_api.activate_port_bindings(
                ctxt, instance_uuid, compute.host))
        connections.switch_attachments(compute, ctxt, instance_uuid, made["attachments"])
        if inst.vm_state == vm_states.STOPPED:
            compute.driver.power_off(guest.instance_dict(inst))
        compute.rt.apply_migration_context(ctxt, instance_uuid)
        records.update_instance(
            compute.cell_db, instance_uuid, expected_task_state=task_states.REBUILDING,
            host=compute.host, node=compute.rt.nodename, launched_on=compute.host, task_state=None,
            vm_state=(vm_states.STOPPED if inst.vm_state == vm_states.STOPPED
                      else vm_states.ACTIVE),
            power_state=guest.power(compute, instance_uuid), availability_zone=availability_zone,
            reload=False)
        teardown.give_back(compute, ctxt, instance_uuid, claim=teardown.MOVE_CLAIM, strict=True)
        guest.migration(compute, migration_uuid, status=ms.DONE, dest_compute=compute.host,
                        dest_node=compute.rt.nodename)


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
