"""Attaching a volume to, and detaching it from, a running server.

A mixin of ``ComputeManager``: the API has reserved the volume (an
attachment in ``reserved``) and recorded the instance action; the host
connects the attachment, plugs the volume into the guest, completes the
attachment and writes the block device mapping. Detach undoes the same in
reverse. Each is one action event (``compute_attach_volume`` /
``compute_detach_volume``) with ``instance.volume_attach``/``_detach``
notifications.
"""
import json
import logging
import uuid as uuid_mod

from novella.compute import steps
from novella.rpc import notifications
from novella.db import cell_models as m
from novella.db import records

LOG = logging.getLogger(__name__)


def next_device_name(used, prefix="/dev/vd"):
    """The first free ``/dev/vdX`` after the root disk (``vda``)."""
    taken = {(d or "").rsplit("/", 1)[-1] for d in used}
    for letter in "bcdefghijklmnopqrstuvwxyz":
        if f"vd{letter}" not in taken:
            return prefix + letter
    raise ValueError("no free device name")


class ComputeVolumes:
    def attach_volume(self, ctxt, instance_uuid, volume_id, attachment_id, device=None,
                      tag=None, delete_on_termination=False):
        """Connect and plug ``volume_id``; returns the block device mapping as a dict."""
        with steps.step(self, ctxt, instance_uuid, "compute_attach_volume",
                             notifications.VOLUME_ATTACH, standalone=True,
                             volume_id=volume_id) as st:
            inst = st.instance
            bdms = self._bdms(instance_uuid)
            device = device or next_device_name([b.device_name for b in bdms] + ["/dev/vda"])
            try:
                connector = self.driver.get_volume_connector(self.instance_dict(inst))
                info = {}
                if self.volume_api is not None:
                    att = self.volume_api.attachment_update(ctxt, attachment_id, connector,
                                                            mountpoint=device)
                    info = att.get("connection_info") or {}
                info = dict(info, volume_id=volume_id)
                info.setdefault("driver_volume_type", "simulated")
                self.driver.attach_volume(ctxt, info, self.instance_dict(inst), device)
                if self.volume_api is not None:
                    self.volume_api.attachment_complete(ctxt, attachment_id)
            except Exception:
                if self.volume_api is not None:
                    try:
                        self.volume_api.attachment_delete(ctxt, attachment_id)
                    except Exception:  # noqa: BLE001 - keep the original error
                        LOG.exception("could not delete attachment %s", attachment_id)
                raise
            row = m.BlockDeviceMapping(
                uuid=str(uuid_mod.uuid4()), instance_uuid=instance_uuid, source_type="volume",
                destination_type="volume", device_name=device, volume_id=volume_id,
                attachment_id=attachment_id, connection_info=json.dumps(info), tag=tag,
                delete_on_termination=bool(delete_on_termination), boot_index=None)
            with self.cell_db.session(write=True) as s:
                s.add(row)
                s.flush()
                result = {"uuid": row.uuid, "volume_id": volume_id, "device_name": device,
                          "attachment_id": attachment_id, "tag": tag,
                          "delete_on_termination": bool(delete_on_termination)}
        return result

    def detach_volume(self, ctxt, instance_uuid, volume_id, attachment_id=None):
        """Unplug ``volume_id``, delete its attachment and block device mapping."""
        with steps.step(self, ctxt, instance_uuid, "compute_detach_volume",
                             notifications.VOLUME_DETACH, standalone=True,
                             volume_id=volume_id) as st:
            inst = st.instance
            bdm = next((b for b in self._bdms(instance_uuid) if b.volume_id == volume_id), None)
            if bdm is None:
                return
            info = json.loads(bdm.connection_info) if bdm.connection_info else {}
            try:
                self.driver.detach_volume(ctxt, info, self.instance_dict(inst), bdm.device_name)
            except Exception:
                if self.volume_api is not None:
                    self.volume_api.roll_detaching(ctxt, volume_id)
                raise
            if self.volume_api is not None and (bdm.attachment_id or attachment_id):
                self.volume_api.attachment_delete(ctxt, bdm.attachment_id or attachment_id)
            with self.cell_db.session(write=True) as s:
                row = s.get(m.BlockDeviceMapping, bdm.id)
                row.deleted, row.deleted_at = row.id, records.utcnow()
                row.attachment_id = None
