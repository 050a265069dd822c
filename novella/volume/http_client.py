"""The volume service client over its HTTP API (Cinder's v3 wire format).

``VolumeHTTPClient`` has the interface of ``novella.volume.api.VolumeAPI``:
volumes (``/volumes``), their ``os-set_bootable``, ``os-begin_detaching``,
``os-roll_detaching``, ``os-reimage`` actions and the administrator's
``os-reset_status`` and ``os-migrate_volume_completion`` (sent with the
service's own credentials), snapshots (``/snapshots``) and the
attachments API of microversion 3.44 (create, update with a connector,
``os-complete``, delete), which a compute host drives to attach a volume or
to move it between hosts. Built by ``novella.clients.service_clients`` from
``[cinder]``. Answers are turned back into the database client's dicts.
"""
from novella.volume import api as vol_api

MICROVERSION = "3.44"


def _error(resp, not_found=vol_api.VolumeNotFound):
    try:
        body = resp.json()
        message = next(iter(body.values())).get("message") if isinstance(body, dict) else None
    except (ValueError, AttributeError, StopIteration):
        message = None
    message = message or resp.text or f"HTTP {resp.status_code}"
    if resp.status_code == 404:
        return not_found(message)
    if resp.status_code == 409:
        return vol_api.VolumeConflict(message)
    if resp.status_code == 400:
        return vol_api.InvalidVolume(message)
    exc = vol_api.VolumeError(message)
    exc.code = resp.status_code
    return exc


def _volume(v):
    """A volume of the API as the database client gives it."""
    status, attachments = v["status"], v.get("attachments") or []
    if status in ("reserved", "attaching"):
        attach_status = status
    else:
        attach_status = "attached" if attachments else "detached"
    return {"id": v["id"], "name": v["name"], "description": v["description"],
            "size": v["size"], "status": status, "attach_status": attach_status,
            "availability_zone": v["availability_zone"], "volume_type": v["volume_type"],
            "project_id": v.get("os-vol-tenant-attr:tenant_id"), "user_id": v["user_id"],
            "bootable": str(v["bootable"]).lower() == "true",
            "multiattach": v["multiattach"], "migration_status": v.get("migration_status"),
            "volume_image_metadata": dict(v.get("volume_image_metadata") or {}),
            "metadata": dict(v.get("metadata") or {}),
            "created_at": v["created_at"], "updated_at": v["updated_at"],
            "attachments": attachments}


def _attachment(a, connector=None):
    connector = connector or {}
    return {"id": a["id"], "volume_id": a["volume_id"], "instance": a["instance"],
            "status": a["status"], "attached_host": connector.get("host"),
            "mountpoint": connector.get("mountpoint"), "attach_mode": a.get("attach_mode"),
            "connector": connector or None, "connection_info": a.get("connection_info") or None,
            "attached_at": a.get("attached_at"), "detached_at": a.get("detached_at")}


class VolumeHTTPClient:
    chooses_ids = False  # the volume service gives a new volume its id
    def __init__(self, session):
        self.http = session

    def _call(self, ctxt, method, path, body=None, params=None,
              not_found=vol_api.VolumeNotFound, admin=False, version=MICROVERSION):
        resp = self.http.request(ctxt, method, path, json=body, params=params, admin=admin,
                                 headers={"OpenStack-API-Version": f"volume {version}"})
        if resp.status_code >= 400:
            raise _error(resp, not_found)
        return resp.json() if resp.content else None

    # --- volumes ----------------------------------------------------------------------
    def create(self, ctxt, size, name=None, description=None, image_id=None,
               availability_zone=None, volume_type=None, multiattach=False, id=None,  # noqa: A002
               metadata=None, snapshot_id=None):
        if id is not None:
            raise vol_api.VolumeError("a volume's id cannot be chosen over the HTTP API")
        body = {"size": size, "name": name, "description": description, "imageRef": image_id,
                "snapshot_id": snapshot_id,
                "availability_zone": availability_zone, "volume_type": volume_type,
                "multiattach": multiattach, "metadata": metadata}
        made = self._call(ctxt, "POST", "/volumes", {"volume": {
            k: v for k, v in body.items() if v is not None}})["volume"]
        return self.get(ctxt, made["id"])

    def get(self, ctxt, volume_id):
        return _volume(self._call(ctxt, "GET", f"/volumes/{volume_id}")["volume"])

    def list(self, ctxt, filters=None):
        return [_volume(v) for v in self._call(ctxt, "GET", "/volumes/detail",
                                               params=dict(filters or {}))["volumes"]]

    def delete(self, ctxt, volume_id, cascade=False):
        self._call(ctxt, "DELETE", f"/volumes/{volume_id}" + ("?cascade=true" if cascade else ""))

    def _action(self, ctxt, volume_id, action, body=None, **kwargs):
        return self._call(ctxt, "POST", f"/volumes/{volume_id}/action", {action: body},
                          **kwargs)

    def set_bootable(self, ctxt, volume_id, bootable):
        self._action(ctxt, volume_id, "os-set_bootable", {"bootable": bool(bootable)})
        return self.get(ctxt, volume_id)

    def begin_detaching(self, ctxt, volume_id):
        self._action(ctxt, volume_id, "os-begin_detaching")

    def roll_detaching(self, ctxt, volume_id):
        self._action(ctxt, volume_id, "os-roll_detaching")

    def reset_status(self, ctxt, volume_id, status=None, attach_status=None,
                     migration_status=None):
        body = {k: v for k, v in (("status", status), ("attach_status", attach_status),
                                  ("migration_status", migration_status)) if v is not None}
        self._action(ctxt, volume_id, "os-reset_status", body, admin=True)
        return self.get(None, volume_id)

    def extend(self, ctxt, volume_id, new_size, in_use_ok=False):
        self._action(ctxt, volume_id, "os-extend", {"new_size": int(new_size)},
                     version="3.42" if in_use_ok else "3.41")
        return self.get(ctxt, volume_id)

    def reimage(self, ctxt, volume_id, image_id, reimage_reserved=False):
        self._action(ctxt, volume_id, "os-reimage", {
            "image_id": image_id, "reimage_reserved": reimage_reserved}, version="3.68")
        return self.get(ctxt, volume_id)

    def migrate_volume_completion(self, ctxt, volume_id, new_volume_id, error=False):
        return self._action(ctxt, volume_id, "os-migrate_volume_completion", {
            "new_volume": new_volume_id, "error": error}, admin=True)

    # --- snapshots ----------------------------------------------------------------------
    def create_snapshot(self, ctxt, volume_id, name=None, description=None, force=False):
        body = {"volume_id": volume_id, "name": name, "description": description,
                "force": force}
        return self._call(ctxt, "POST", "/snapshots", {"snapshot": body})["snapshot"]

    def get_snapshot(self, ctxt, snapshot_id):
        return self._call(ctxt, "GET", f"/snapshots/{snapshot_id}",
                          not_found=vol_api.SnapshotNotFound)["snapshot"]

    def list_snapshots(self, ctxt):
        return self._call(ctxt, "GET", "/snapshots/detail")["snapshots"]

    def delete_snapshot(self, ctxt, snapshot_id):
        self._call(ctxt, "DELETE", f"/snapshots/{snapshot_id}",
                   not_found=vol_api.SnapshotNotFound)

    # --- backups ----------------------------------------------------------------------
    def create_backup(self, ctxt, volume_id, name=None, description=None, force=False,
                      container=None):
        made = self._call(ctxt, "POST", "/backups", {"backup": {
            "volume_id": volume_id, "name": name, "description": description, "force": force,
            "container": container}})["backup"]
        return self.get_backup(ctxt, made["id"])

    def get_backup(self, ctxt, backup_id):
        return self._call(ctxt, "GET", f"/backups/{backup_id}",
                          not_found=vol_api.BackupNotFound)["backup"]

    def list_backups(self, ctxt):
        return self._call(ctxt, "GET", "/backups/detail")["backups"]

    def delete_backup(self, ctxt, backup_id):
        self._call(ctxt, "DELETE", f"/backups/{backup_id}", not_found=vol_api.BackupNotFound)

    def restore_backup(self, ctxt, backup_id, volume_id=None, name=None):
        body = {k: v for k, v in (("volume_id", volume_id), ("name", name)) if v}
        restored = self._call(ctxt, "POST", f"/backups/{backup_id}/restore",
                              {"restore": body}, not_found=vol_api.BackupNotFound)["restore"]
        return self.get(ctxt, restored["volume_id"])

    # --- transfers --------------------------------------------------------------------
    def create_transfer(self, ctxt, volume_id, name=None):
        return self._call(ctxt, "POST", "/os-volume-transfer",
                          {"transfer": {"volume_id": volume_id, "name": name}})["transfer"]

    def get_transfer(self, ctxt, transfer_id):
        return self._call(ctxt, "GET", f"/os-volume-transfer/{transfer_id}",
                          not_found=vol_api.TransferNotFound)["transfer"]

    def list_transfers(self, ctxt):
        return self._call(ctxt, "GET", "/os-volume-transfer/detail")["transfers"]

    def delete_transfer(self, ctxt, transfer_id):
        self._call(ctxt, "DELETE", f"/os-volume-transfer/{transfer_id}",
                   not_found=vol_api.TransferNotFound)

    def accept_transfer(self, ctxt, transfer_id, auth_key):
        return self._call(ctxt, "POST", f"/os-volume-transfer/{transfer_id}/accept",
                          {"accept": {"auth_key": auth_key}},
                          not_found=vol_api.TransferNotFound)["transfer"]

    # --- attachments ------------------------------------------------------------------
    def attachment_create(self, ctxt, volume_id, instance_uuid, connector=None, mountpoint=None):
        body = {"volume_uuid": volume_id, "instance_uuid": instance_uuid}
        if connector is not None:
            connector = dict(connector)
            if mountpoint:
                connector["mountpoint"] = mountpoint
            body["connector"] = connector
        a = self._call(ctxt, "POST", "/attachments", {"attachment": body})["attachment"]
        return _attachment(a, connector)

    def attachment_update(self, ctxt, attachment_id, connector, mountpoint=None):
        connector = dict(connector)
        if mountpoint:
            connector["mountpoint"] = mountpoint
        a = self._call(ctxt, "PUT", f"/attachments/{attachment_id}",
                       {"attachment": {"connector": connector}},
                       not_found=vol_api.AttachmentNotFound)["attachment"]
        return _attachment(a, connector)

    def attachment_complete(self, ctxt, attachment_id):
        self._call(ctxt, "POST", f"/attachments/{attachment_id}/action", {"os-complete": None},
                   not_found=vol_api.AttachmentNotFound)
        return self.attachment_get(ctxt, attachment_id)

    def attachment_delete(self, ctxt, attachment_id):
        self._call(ctxt, "DELETE", f"/attachments/{attachment_id}",
                   not_found=vol_api.AttachmentNotFound)

    def attachment_get(self, ctxt, attachment_id):
        return _attachment(self._call(ctxt, "GET", f"/attachments/{attachment_id}",
                                      not_found=vol_api.AttachmentNotFound)["attachment"])

    def attachment_list(self, ctxt, volume_id=None, instance_uuid=None):
        params = {k: v for k, v in (("volume_id", volume_id), ("instance_id", instance_uuid))
                  if v}
        return [_attachment(a) for a in self._call(ctxt, "GET", "/attachments/detail",
                                                   params=params)["attachments"]]

    get_attachments = attachment_list
