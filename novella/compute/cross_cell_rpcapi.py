"""The compute RPC client for cross-cell moves: every method a call with
``long_rpc_timeout``, made by the super-conductor on the host's cell transport."""
from novella.compute.rpcapi import ComputeAPI


class CrossCellComputeAPI(ComputeAPI):
    def _long(self, ctxt, host, method, **kwargs):
        return self._call(ctxt, host, method, timeout=self.long_timeout, **kwargs)

    def prep_snapshot_based_resize_at_dest(self, ctxt, host, instance_uuid, migration_uuid,
                                           new_flavor, port_profiles=None):
        return self._long(ctxt, host, "prep_snapshot_based_resize_at_dest",
                          instance_uuid=instance_uuid, migration_uuid=migration_uuid,
                          new_flavor=new_flavor, port_profiles=port_profiles)

    def prep_snapshot_based_resize_at_source(self, ctxt, host, instance_uuid, migration_uuid,
                                             snapshot_id=None, clean_shutdown=True):
        return self._long(ctxt, host, "prep_snapshot_based_resize_at_source",
                          instance_uuid=instance_uuid, migration_uuid=migration_uuid,
                          snapshot_id=snapshot_id, clean_shutdown=clean_shutdown)

    def finish_snapshot_based_resize_at_dest(self, ctxt, host, instance_uuid, migration_uuid,
                                             snapshot_id=None, power_on=True):
        return self._long(ctxt, host, "finish_snapshot_based_resize_at_dest",
                          instance_uuid=instance_uuid, migration_uuid=migration_uuid,
                          snapshot_id=snapshot_id, power_on=power_on)

    def confirm_snapshot_based_resize_at_source(self, ctxt, host, instance_uuid,
                                                migration_uuid):
        return self._long(ctxt, host, "confirm_snapshot_based_resize_at_source",
                          instance_uuid=instance_uuid, migration_uuid=migration_uuid)

    def revert_snapshot_based_resize_at_dest(self, ctxt, host, instance_uuid, migration_uuid,
                                             rollback=False):
        return self._long(ctxt, host, "revert_snapshot_based_resize_at_dest",
                          instance_uuid=instance_uuid, migration_uuid=migration_uuid,
                          rollback=rollback)

    def finish_revert_snapshot_based_resize_at_source(self, ctxt, host, instance_uuid,
                                                      migration_uuid, power_on=True,
                                                      rollback=False):
        return self._long(ctxt, host, "finish_revert_snapshot_based_resize_at_source",
                          instance_uuid=instance_uuid, migration_uuid=migration_uuid,
                          power_on=power_on, rollback=rollback)
