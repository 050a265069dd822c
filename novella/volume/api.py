"""The volume service client: volumes and their attachments to servers on hosts.

Attachments follow Cinder's attachments API (3.44 style), the flow a compute
host uses to attach a volume or to move it between hosts:

    a = volume_api.attachment_create(ctxt, vol_id, instance_uuid)     # reserved
    a = volume_api.attachment_update(ctxt, a["id"], connector)        # attaching, connection_info
    volume_api.attachment_complete(ctxt, a["id"])                     # attached; volume in-use
    volume_api.attachment_delete(ctxt, a["id"])                       # volume available again

A volume attached to a server may get a second attachment for the same
server (the destination of a move) even when it is not multiattach; the old
one is deleted when the move is confirmed, the new one when it is reverted.
The volume's ``status`` and ``attach_status`` always follow from its live
attachments.

With ``volumes_dir``, each volume is a raw file there (``VOLUMES_DIR/ID``, sparse,
made when the volume is first connected to a host and removed with the volume):
its connection_info names the ``path`` and ``format``, which the QEMU driver of a
host on this machine opens. A volume made from an image (or reimaged) gets the
image's bytes, converted to raw, when it is made, so a server boots from it.
"""
import hashlib
import logging
import os
import secrets
import shutil
import tempfile
import uuid

import sqlalchemy as sa

from novella.db import migrate
from novella.db.engine import Database
from novella.db.timestamps import isotime, utcnow
from novella.virt.qemu.process import to_raw
from novella.volume import models

LOG = logging.getLogger(__name__)
ATTACHABLE = ("available", "reserved", "attaching", "in-use")
DEFAULT_TYPE = "__DEFAULT__"  # the one volume type, given to a volume that names none


class VolumeError(Exception):
    code = 400


class VolumeNotFound(VolumeError):
    code = 404


class SnapshotNotFound(VolumeError):
    code = 404


class AttachmentNotFound(VolumeError):
    code = 404


class BackupNotFound(VolumeError):
    code = 404


class TransferNotFound(VolumeError):
    code = 404


class InvalidVolume(VolumeError):
    """Refused for the volume's state where Cinder answers 400 (a delete)."""


class VolumeConflict(VolumeError):
    """The volume or attachment is not in a state that allows the operation."""
    code = 409


def _key_hash(salt, auth_key):
    return hashlib.sha256((salt + auth_key).encode()).hexdigest()


def _attachment_dict(a):
    return {"id": a.id, "volume_id": a.volume_id, "instance": a.instance_uuid,
            "status": a.attach_status, "attached_host": a.attached_host,
            "mountpoint": a.mountpoint, "attach_mode": a.attach_mode,
            "connector": a.connector, "connection_info": a.connection_info,
            "attached_at": isotime(a.attach_time), "detached_at": isotime(a.detach_time)}


class VolumeAPI:
    chooses_ids = True  # ``create`` may be given the new volume's id
    # callable(events): sends external events to the Compute API (set by who wires the
    # services together; None: no compute service to tell).
    compute_events = None

    def __init__(self, db, image_api=None, volumes_dir=None):
        self.db = db if isinstance(db, Database) else Database(db)
        self.image_api = image_api
        self.volumes_dir = volumes_dir
        migrate.require("volume", self.db.engine)  # made by `novella manage api_db sync`

    # --- volumes -----------------------------------------------------------------
    def _volume_dict(self, s, v):
        live = self._live_attachments(s, v.id)
        return {"id": v.id, "name": v.name, "description": v.description, "size": v.size,
                "status": v.status, "attach_status": v.attach_status,
                "availability_zone": v.availability_zone, "volume_type": v.volume_type,
                "project_id": v.project_id, "user_id": v.user_id, "bootable": v.bootable,
                "multiattach": v.multiattach, "migration_status": v.migration_status,
                "volume_image_metadata": dict(v.volume_image_metadata or {}),
                "metadata": dict(v.volume_metadata or {}),
                "created_at": isotime(v.created_at), "updated_at": isotime(v.updated_at),
                "attachments": [{"id": a.id, "attachment_id": a.id, "volume_id": v.id,
                                 "server_id": a.instance_uuid, "host_name": a.attached_host,
                                 "device": a.mountpoint, "attached_at": isotime(a.attach_time)}
                                for a in live if a.attach_status == "attached"]}

    def create(self, ctxt, size, name=None, description=None, image_id=None,
               availability_zone=None, volume_type=None, multiattach=False, id=None,  # noqa: A002
               metadata=None, snapshot_id=None):
        """A new volume, ``available`` at once; from an image it is bootable. From a
        snapshot it is at least the snapshot's size and has its volume's image."""
        meta, bootable = None, bool(image_id)
        if snapshot_id:
            with self.db.session() as s:
                sn = self._snapshot(s, ctxt, snapshot_id)
                if sn.status != "available":
                    raise InvalidVolume(f"Invalid snapshot: Originating snapshot status must "
                                        f"be one of 'available' values (it is {sn.status}).")
                origin = s.get(models.Volume, sn.volume_id)
                size = size or sn.size
                if int(size) < sn.size:
                    raise VolumeError(f"Invalid input received: Volume size '{size}'GB cannot "
                                      f"be smaller than the snapshot size {sn.size}GB.")
                meta, bootable = dict(origin.volume_image_metadata or {}) or None, origin.bootable
        if int(size) <= 0:
            raise VolumeError("size must be a positive number of GiB")
        id = id or str(uuid.uuid4())  # noqa: A001
        if image_id:
            meta = self._image_meta(ctxt, image_id)
            # Before the record: a volume that exists has its bytes.
            self._write_image(ctxt, id, image_id, int(size))
        v = models.Volume(id=id, name=name, description=description,
                          size=int(size), status="available", attach_status="detached",
                          availability_zone=availability_zone or "nova",
                          volume_type=volume_type or DEFAULT_TYPE,
                          project_id=getattr(ctxt, "project_id", None),
                          user_id=getattr(ctxt, "user_id", None), bootable=bootable,
                          multiattach=multiattach, volume_image_metadata=meta,
                          volume_metadata=dict(metadata or {}))
        with self.db.session(write=True) as s:
            s.add(v)
            s.flush()
            return self._volume_dict(s, v)

    def _volume(self, s, volume_id, lock=False):
        # lock: writers of one volume's attachments queue on its row.
        v = s.get(models.Volume, volume_id, with_for_update=True if lock else None)
        if v is None or v.deleted:
            raise VolumeNotFound(f"volume {volume_id} could not be found")
        return v

    def get(self, ctxt, volume_id):
        with self.db.session() as s:
            v = self._volume(s, volume_id)
            if ctxt is not None and not ctxt.is_admin and v.project_id != ctxt.project_id:
                raise VolumeNotFound(f"volume {volume_id} could not be found")
            return self._volume_dict(s, v)

    def list(self, ctxt, filters=None):
        with self.db.session() as s:
            q = sa.select(models.Volume).where(models.Volume.deleted.is_(False))
            if ctxt is not None and not ctxt.is_admin:
                q = q.where(models.Volume.project_id == ctxt.project_id)
            for key, value in (filters or {}).items():
                q = q.where(getattr(models.Volume, key) == value)
            rows = s.scalars(q.order_by(models.Volume.created_at, models.Volume.id)).all()
            return [self._volume_dict(s, v) for v in rows]

    def delete(self, ctxt, volume_id, cascade=False):
        """Delete an unattached volume; ``cascade``: with its snapshots, else it must
        have none."""
        with self.db.session(write=True) as s:
            v = self._volume(s, volume_id, lock=True)
            if v.status not in ("available", "error") or self._live_attachments(s, v.id):
                raise InvalidVolume(f"Invalid volume: Volume status must be available or error "
                                    f"and must not be attached (it is {v.status}).")
            snapshots = self._snapshots_of(s, v.id)
            if snapshots and not cascade:
                raise InvalidVolume("Invalid volume: Volume must not have snapshots.")
            for sn in snapshots:
                sn.status, sn.deleted, sn.deleted_at = "deleted", True, utcnow()
            v.status, v.deleted, v.deleted_at = "deleted", True, utcnow()
        if self.volumes_dir:
            try:
                os.unlink(os.path.join(self.volumes_dir, volume_id))
            except FileNotFoundError:
                pass

    def _image_meta(self, ctxt, image_id):
        """What a volume made from the image keeps of it (``volume_image_metadata``)."""
        meta = {"image_id": image_id}
        if self.image_api is not None:
            image = self.image_api.get(ctxt, image_id)
            meta.update(image["properties"], image_name=image["name"],
                        min_disk=image["min_disk"], min_ram=image["min_ram"])
        return meta

    def _write_image(self, ctxt, volume_id, image_id, size_gb):
        """The volume's file made of the image's bytes, converted to raw and of the
        volume's size (with ``volumes_dir`` and an image with data). Written beside
        and renamed into place: the file is whole, or absent and made empty at the
        first connection."""
        if not self.volumes_dir or self.image_api is None:
            return
        if self.image_api.get(ctxt, image_id).get("status") != "active":
            return  # no bytes to give
        os.makedirs(self.volumes_dir, exist_ok=True)
        path = os.path.join(self.volumes_dir, volume_id)
        with tempfile.TemporaryDirectory(dir=self.volumes_dir, prefix=".image-") as tmp:
            data = self.image_api.download(ctxt, image_id, os.path.join(tmp, "image"))
            raw = os.path.join(tmp, "raw")
            to_raw(data, raw)
            if os.path.getsize(raw) > size_gb << 30:
                raise VolumeError(f"Image {image_id} is larger than the volume "
                                  f"({size_gb} GiB).")
            with open(raw, "ab") as f:
                f.truncate(size_gb << 30)
            os.replace(raw, path)

    def _volume_file(self, v):
        """The volume's file, made (sparse, of the volume's size) when it has none yet."""
        path = os.path.join(self.volumes_dir, v.id)
        if not os.path.exists(path):
            os.makedirs(self.volumes_dir, exist_ok=True)
            with open(path, "ab") as f:
                f.truncate(v.size << 30)
        return path

    # --- snapshots -----------------------------------------------------------------
    @staticmethod
    def _snapshots_of(s, volume_id):
        return s.scalars(sa.select(models.Snapshot).where(
            models.Snapshot.volume_id == volume_id, models.Snapshot.deleted.is_(False))).all()

    @staticmethod
    def _snapshot_dict(sn):
        return {"id": sn.id, "volume_id": sn.volume_id, "name": sn.name,
                "description": sn.description, "size": sn.size, "status": sn.status,
                "project_id": sn.project_id, "created_at": isotime(sn.created_at),
                "updated_at": isotime(sn.updated_at)}

    def create_snapshot(self, ctxt, volume_id, name=None, description=None, force=False):
        """A snapshot of the volume, ``available`` at once; an attached volume only
        with ``force``."""
        with self.db.session(write=True) as s:
            v = self._volume(s, volume_id, lock=True)
            if ctxt is not None and not ctxt.is_admin and v.project_id != ctxt.project_id:
                raise VolumeNotFound(f"volume {volume_id} could not be found")
            if v.status != "available" and not (force and v.status == "in-use"):
                raise InvalidVolume(f"Invalid volume: Volume {volume_id} status must be "
                                    f"available, but current status is: {v.status}.")
            sn = models.Snapshot(id=str(uuid.uuid4()), volume_id=v.id, name=name,
                                 description=description, size=v.size, status="available",
                                 project_id=getattr(ctxt, "project_id", None) or v.project_id)
            s.add(sn)
            s.flush()
            return self._snapshot_dict(sn)

    def _snapshot(self, s, ctxt, snapshot_id):
        sn = s.get(models.Snapshot, snapshot_id)
        if sn is None or sn.deleted or (ctxt is not None and not ctxt.is_admin
                                        and sn.project_id != ctxt.project_id):
            raise SnapshotNotFound(f"Snapshot {snapshot_id} could not be found.")
        return sn

    def get_snapshot(self, ctxt, snapshot_id):
        with self.db.session() as s:
            return self._snapshot_dict(self._snapshot(s, ctxt, snapshot_id))

    def list_snapshots(self, ctxt):
        with self.db.session() as s:
            q = sa.select(models.Snapshot).where(models.Snapshot.deleted.is_(False))
            if ctxt is not None and not ctxt.is_admin:
                q = q.where(models.Snapshot.project_id == ctxt.project_id)
            return [self._snapshot_dict(sn) for sn in
                    s.scalars(q.order_by(models.Snapshot.created_at, models.Snapshot.id))]

    def delete_snapshot(self, ctxt, snapshot_id):
        with self.db.session(write=True) as s:
            sn = self._snapshot(s, ctxt, snapshot_id)
            sn.status, sn.deleted, sn.deleted_at = "deleted", True, utcnow()

    # --- backups --------------------------------------------------------------------
    @staticmethod
    def _backup_dict(b):
        return {"id": b.id, "volume_id": b.volume_id, "name": b.name,
                "description": b.description, "size": b.size, "status": b.status,
                "container": b.container, "project_id": b.project_id,
                "created_at": isotime(b.created_at), "updated_at": isotime(b.updated_at)}

    def _backup_file(self, backup_id):
        return os.path.join(self.volumes_dir, "backups", backup_id) if self.volumes_dir else None

    def create_backup(self, ctxt, volume_id, name=None, description=None, force=False,
                      container=None):
        """A backup of the volume, ``available`` at once; an attached volume only with
        ``force``. The data is copied before the backup is recorded."""
        with self.db.session() as s:
            v = self._volume(s, volume_id)
            if ctxt is not None and not ctxt.is_admin and v.project_id != ctxt.project_id:
                raise VolumeNotFound(f"volume {volume_id} could not be found")
            if v.status != "available" and not (force and v.status == "in-use"):
                raise InvalidVolume(f"Invalid volume: Volume to be backed up must be available "
                                    f"or in-use with force, but the current status is "
                                    f"\"{v.status}\".")
        backup_id = str(uuid.uuid4())
        source = os.path.join(self.volumes_dir, volume_id) if self.volumes_dir else None
        if source and os.path.exists(source):
            os.makedirs(os.path.dirname(self._backup_file(backup_id)), exist_ok=True)
            shutil.copyfile(source, self._backup_file(backup_id))
        with self.db.session(write=True) as s:
            v = self._volume(s, volume_id, lock=True)
            b = models.Backup(id=backup_id, volume_id=v.id, name=name, description=description,
                              size=v.size, status="available", container=container,
                              project_id=getattr(ctxt, "project_id", None) or v.project_id)
            s.add(b)
            s.flush()
            return self._backup_dict(b)

    def _backup(self, s, ctxt, backup_id):
        b = s.get(models.Backup, backup_id)
        if b is None or b.deleted or (ctxt is not None and not ctxt.is_admin
                                      and b.project_id != ctxt.project_id):
            raise BackupNotFound(f"Backup {backup_id} could not be found.")
        return b

    def get_backup(self, ctxt, backup_id):
        with self.db.session() as s:
            return self._backup_dict(self._backup(s, ctxt, backup_id))

    def list_backups(self, ctxt):
        with self.db.session() as s:
            q = sa.select(models.Backup).where(models.Backup.deleted.is_(False))
            if ctxt is not None and not ctxt.is_admin:
                q = q.where(models.Backup.project_id == ctxt.project_id)
            return [self._backup_dict(b) for b in
                    s.scalars(q.order_by(models.Backup.created_at, models.Backup.id))]

    def delete_backup(self, ctxt, backup_id):
        with self.db.session(write=True) as s:
            b = self._backup(s, ctxt, backup_id)
            if b.status not in ("available", "error"):
                raise InvalidVolume(f"Invalid backup: Backup status must be available or "
                                    f"error (it is {b.status}).")
            b.status, b.deleted, b.deleted_at = "deleted", True, utcnow()
        path = self._backup_file(backup_id)
        if path and os.path.exists(path):
            os.remove(path)

    def restore_backup(self, ctxt, backup_id, volume_id=None, name=None):
        """The backup's data written to ``volume_id`` (available, at least the backup's
        size) or to a new volume of its size; -> the volume."""
        with self.db.session() as s:
            b = self._backup_dict(self._backup(s, ctxt, backup_id))
        if b["status"] != "available":
            raise InvalidVolume(f"Invalid backup: Backup status must be available (it is "
                                f"{b['status']}).")
        if volume_id is None:
            volume_id = self.create(ctxt, b["size"], name=name or f"restore_backup_{backup_id}",
                                    description="auto-created_from_restore_from_backup")["id"]
        with self.db.session(write=True) as s:
            v = self._volume(s, volume_id, lock=True)
            if ctxt is not None and not ctxt.is_admin and v.project_id != ctxt.project_id:
                raise VolumeNotFound(f"volume {volume_id} could not be found")
            if v.status != "available":
                raise InvalidVolume(f"Invalid volume: Volume to be restored to must be "
                                    f"available, but the current status is \"{v.status}\".")
            if v.size < b["size"]:
                raise InvalidVolume(f"Invalid volume: volume size {v.size} GB is smaller than "
                                    f"the backup's {b['size']} GB.")
            source = self._backup_file(backup_id)
            if source and os.path.exists(source):
                target = os.path.join(self.volumes_dir, v.id)
                shutil.copyfile(source, target + ".restoring")
                with open(target + ".restoring", "ab") as f:
                    f.truncate(v.size << 30)
                os.replace(target + ".restoring", target)
            return self._volume_dict(s, v)

    # --- transfers ------------------------------------------------------------------
    @staticmethod
    def _transfer_dict(t, auth_key=None):
        out = {"id": t.id, "volume_id": t.volume_id, "name": t.name,
               "created_at": isotime(t.created_at)}
        if auth_key is not None:
            out["auth_key"] = auth_key
        return out

    def create_transfer(self, ctxt, volume_id, name=None):
        """Offer an available volume to other projects: it is ``awaiting-transfer`` until
        the transfer is accepted or deleted; the auth key is shown only now."""
        auth_key = secrets.token_hex(8)
        salt = secrets.token_hex(8)
        with self.db.session(write=True) as s:
            v = self._volume(s, volume_id, lock=True)
            if ctxt is not None and not ctxt.is_admin and v.project_id != ctxt.project_id:
                raise VolumeNotFound(f"volume {volume_id} could not be found")
            if v.status != "available":
                raise InvalidVolume(f"Invalid volume: status must be available (volume "
                                    f"{volume_id} is {v.status}).")
            v.status = "awaiting-transfer"
            t = models.Transfer(id=str(uuid.uuid4()), volume_id=v.id, name=name, salt=salt,
                                crypt_hash=_key_hash(salt, auth_key), project_id=v.project_id)
            s.add(t)
            s.flush()
            return self._transfer_dict(t, auth_key)

    def _transfer(self, s, ctxt, transfer_id, any_project=False):
        t = s.get(models.Transfer, transfer_id)
        if t is None or t.deleted or not (any_project or ctxt is None or ctxt.is_admin
                                          or t.project_id == ctxt.project_id):
            raise TransferNotFound(f"Transfer {transfer_id} could not be found.")
        return t

    def get_transfer(self, ctxt, transfer_id):
        with self.db.session() as s:
            return self._transfer_dict(self._transfer(s, ctxt, transfer_id))

    def list_transfers(self, ctxt):
        with self.db.session() as s:
            q = sa.select(models.Transfer).where(models.Transfer.deleted.is_(False))
            if ctxt is not None and not ctxt.is_admin:
                q = q.where(models.Transfer.project_id == ctxt.project_id)
            return [self._transfer_dict(t) for t in
                    s.scalars(q.order_by(models.Transfer.created_at, models.Transfer.id))]

    def delete_transfer(self, ctxt, transfer_id):
        """Cancel a transfer: the volume is available to its project again."""
        with self.db.session(write=True) as s:
            t = self._transfer(s, ctxt, transfer_id)
            v = self._volume(s, t.volume_id, lock=True)
            if v.status == "awaiting-transfer":
                v.status = "available"
            t.deleted, t.deleted_at = True, utcnow()

    def accept_transfer(self, ctxt, transfer_id, auth_key):
        """The caller's project takes the volume and its snapshots, given the right key;
        one transaction, so a transfer is either done or still offered."""
        with self.db.session(write=True) as s:
            t = self._transfer(s, ctxt, transfer_id, any_project=True)
            if not isinstance(auth_key, str) or not secrets.compare_digest(
                    _key_hash(t.salt, auth_key), t.crypt_hash):
                raise VolumeError(f"Invalid auth key: Attempt to transfer {transfer_id} with "
                                  "invalid auth key.")
            v = self._volume(s, t.volume_id, lock=True)
            if v.status != "awaiting-transfer":
                raise InvalidVolume(f"Invalid volume: status must be awaiting-transfer "
                                    f"(volume {v.id} is {v.status}).")
            v.project_id, v.user_id = ctxt.project_id, ctxt.user_id
            v.status = "available"
            for sn in self._snapshots_of(s, v.id):
                sn.project_id = ctxt.project_id
            t.deleted, t.deleted_at = True, utcnow()
            return self._transfer_dict(t)

    def set_bootable(self, ctxt, volume_id, bootable):
        with self.db.session(write=True) as s:
            v = self._volume(s, volume_id, lock=True)
            v.bootable = bool(bootable)
            return self._volume_dict(s, v)

    def begin_detaching(self, ctxt, volume_id):
        self._transition(volume_id, ("in-use",), "detaching")

    def roll_detaching(self, ctxt, volume_id):
        self._transition(volume_id, ("detaching",), "in-use")

    def _transition(self, volume_id, expected, status):
        with self.db.session(write=True) as s:
            v = self._volume(s, volume_id, lock=True)
            if v.status not in expected:
                raise VolumeConflict(f"volume {volume_id} is {v.status}, not {'/'.join(expected)}")
            v.status = status

    def reset_status(self, ctxt, volume_id, status=None, attach_status=None,
                     migration_status=None):
        """Cinder's ``os-reset_status`` (an administrator's): the fields given are set
        as they are; ``migration_status`` "none" clears it."""
        with self.db.session(write=True) as s:
            v = self._volume(s, volume_id, lock=True)
            if status is not None:
                v.status = status
            if attach_status is not None:
                v.attach_status = attach_status
            if migration_status is not None:
                v.migration_status = None if migration_status == "none" else migration_status
            return self._volume_dict(s, v)

    def extend(self, ctxt, volume_id, new_size, in_use_ok=False):
        """Cinder's ``os-extend``: the volume grows to ``new_size`` GiB (its file, if it
        has one, too). An attached volume only when ``in_use_ok`` (3.42); then each
        server it is attached to is told through ``compute_events`` (the Compute
        API's ``volume-extended`` event) so its host can grow the disk."""
        allowed = ("available", "in-use") if in_use_ok else ("available",)
        with self.db.session(write=True) as s:
            v = self._volume(s, volume_id, lock=True)
            if ctxt is not None and not ctxt.is_admin and v.project_id != ctxt.project_id:
                raise VolumeNotFound(f"volume {volume_id} could not be found")
            if v.status not in allowed:
                raise InvalidVolume(f"Invalid volume: Volume {volume_id} status must be "
                                    f"{' or '.join(repr(a) for a in allowed)} to extend, "
                                    f"currently {v.status}.")
            if int(new_size) <= v.size:
                raise VolumeError(f"Invalid input received: New size for extend must be "
                                  f"greater than current size. (current: {v.size}, "
                                  f"extended: {new_size}).")
            path = os.path.join(self.volumes_dir, v.id) if self.volumes_dir else None
            if path and os.path.exists(path):
                # Before the new size is recorded: a file larger than its volume is harmless.
                os.truncate(path, int(new_size) << 30)
            v.size, v.updated_at = int(new_size), utcnow()
            volume = self._volume_dict(s, v)
        servers = sorted({a["server_id"] for a in volume["attachments"]})
        if servers and self.compute_events is not None:
            try:
                self.compute_events([{"name": "volume-extended", "server_uuid": server,
                                      "tag": volume_id} for server in servers])
            except Exception:  # noqa: BLE001 - as Cinder: the volume is extended regardless
                LOG.exception("The volume-extended event of volume %s was not sent", volume_id)
        return volume

    def reimage(self, ctxt, volume_id, image_id, reimage_reserved=False):
        """The volume's content made anew from ``image_id`` (Cinder's ``os-reimage``):
        it must be available or error, or reserved when ``reimage_reserved`` (a
        server's root volume being rebuilt)."""
        meta = self._image_meta(ctxt, image_id)
        with self.db.session() as s:
            v = self._volume(s, volume_id)
            allowed = ("available", "error") + (("reserved",) if reimage_reserved else ())
            if v.status not in allowed:
                raise InvalidVolume(f"Invalid volume: Volume {volume_id} status must be "
                                    f"{' or '.join(allowed)}, but current status is: "
                                    f"{v.status}.")
            size = v.size
        self._write_image(ctxt, volume_id, image_id, size)
        with self.db.session(write=True) as s:
            v = self._volume(s, volume_id, lock=True)
            v.volume_image_metadata, v.bootable = meta, True
            return self._volume_dict(s, v)

    def migrate_volume_completion(self, ctxt, volume_id, new_volume_id, error=False):
        """Cinder's ``os-migrate_volume_completion``: the host copied ``volume_id``'s
        data to ``new_volume_id``; returns the id the server's mapping keeps.

        Two volumes neither of which is migrating (a swap between them): the new
        one's. A migration (source ``migrating``, destination ``target:<source>``)
        ends with the source's id naming the copied data: the destination's
        attachments move to the source id and the destination goes; on ``error``
        the destination goes and the source stays as it was (``error``).
        Running it again once it ended answers the same."""
        with self.db.session(write=True) as s:
            v = self._volume(s, volume_id, lock=True)
            n = s.get(models.Volume, new_volume_id, with_for_update=True)
            if n is None:
                raise VolumeNotFound(f"volume {new_volume_id} could not be found")
            target = f"target:{v.id}"
            if n.deleted:
                if n.migration_status == target and v.migration_status in ("success", "error"):
                    return {"save_volume_id": v.id}  # it ended already
                raise VolumeNotFound(f"volume {new_volume_id} could not be found")
            if not v.migration_status and not n.migration_status:
                return {"save_volume_id": n.id}
            if not v.migration_status:
                raise InvalidVolume("Invalid volume: Source volume not mid-migration.")
            if n.migration_status != target:
                raise InvalidVolume(f"Invalid volume: Destination has migration_status "
                                    f"{n.migration_status}, expected {target}.")
            if not error:
                for a in self._live_attachments(s, v.id):
                    a.deleted, a.attach_status, a.detach_time = True, "detached", utcnow()
                for a in self._live_attachments(s, n.id):
                    a.volume_id = v.id
                v.size = n.size
            else:
                for a in self._live_attachments(s, n.id):
                    a.deleted, a.attach_status, a.detach_time = True, "detached", utcnow()
            v.migration_status = "error" if error else "success"
            n.status, n.deleted, n.deleted_at = "deleted", True, utcnow()
            s.flush()
            if v.status == "detaching":
                v.status = "in-use"  # let the attachments decide
            self._refresh(s, v)
            return {"save_volume_id": v.id}

    # --- attachments -------------------------------------------------------------
    @staticmethod
    def _live_attachments(s, volume_id):
        return s.scalars(sa.select(models.VolumeAttachment).where(
            models.VolumeAttachment.volume_id == volume_id,
            models.VolumeAttachment.deleted.is_(False)).order_by(
            models.VolumeAttachment.created_at, models.VolumeAttachment.id)).all()

    def _refresh(self, s, v):
        """Derive the volume's status from its live attachments."""
        states = {a.attach_status for a in self._live_attachments(s, v.id)}
        if "attached" in states:
            v.attach_status = "attached"
            if v.status != "detaching":
                v.status = "in-use"
        elif "attaching" in states:
            v.status = v.attach_status = "attaching"
        elif "reserved" in states:
            v.status = v.attach_status = "reserved"
        else:
            v.status, v.attach_status = "available", "detached"

    def _attachment(self, s, attachment_id):
        a = s.get(models.VolumeAttachment, attachment_id)
        if a is None or a.deleted:
            raise AttachmentNotFound(f"attachment {attachment_id} could not be found")
        return a

    def attachment_create(self, ctxt, volume_id, instance_uuid, connector=None, mountpoint=None):
        """Reserve the volume for a server; with a connector, also connect it."""
        with self.db.session(write=True) as s:
            v = self._volume(s, volume_id, lock=True)
            others = {a.instance_uuid for a in self._live_attachments(s, v.id)} - {instance_uuid}
            if v.status not in ATTACHABLE or (others and not v.multiattach):
                raise VolumeConflict(f"volume {volume_id} ({v.status}) is attached to another "
                                     "server or cannot be attached")
            a = models.VolumeAttachment(id=str(uuid.uuid4()), volume_id=v.id,
                                        instance_uuid=instance_uuid, attach_status="reserved",
                                        mountpoint=mountpoint)
            s.add(a)
            if connector is not None:
                self._connect(a, v, connector, mountpoint)
            s.flush()
            self._refresh(s, v)
            return _attachment_dict(a)

    def _connect(self, a, v, connector, mountpoint):
        a.connector = dict(connector)
        a.attached_host = connector.get("host")
        a.mountpoint = mountpoint or a.mountpoint or connector.get("mountpoint")
        a.attach_status = "attaching"
        # The simulated backend: the host reaches the volume by its id.
        a.connection_info = {"driver_volume_type": "simulated",
                             "data": {"volume_id": v.id, "attachment_id": a.id,
                                      "target_host": a.attached_host,
                                      "access_mode": a.attach_mode,
                                      "device_path": f"/dev/disk/by-id/novella-{v.id}"}}
        if self.volumes_dir:
            a.connection_info["data"].update(path=self._volume_file(v), format="raw")

    def attachment_update(self, ctxt, attachment_id, connector, mountpoint=None):
        """Connect a reserved attachment to the host named in ``connector``."""
        with self.db.session(write=True) as s:
            a = self._attachment(s, attachment_id)
            if a.attach_status not in ("reserved", "attaching", "attached"):
                raise VolumeConflict(f"attachment {attachment_id} is {a.attach_status}")
            v = self._volume(s, a.volume_id, lock=True)
            attached = a.attach_status == "attached"
            self._connect(a, v, connector, mountpoint)
            if attached:  # (re)connected to a host: it stays attached
                a.attach_status = "attached"
            s.flush()
            self._refresh(s, v)
            return _attachment_dict(a)

    def attachment_complete(self, ctxt, attachment_id):
        """The host has the volume: attachment attached, volume in-use. A reserved
        attachment (no connector) may be completed too, as for a server with no
        host: it is connected when the server next gets one."""
        with self.db.session(write=True) as s:
            a = self._attachment(s, attachment_id)
            if a.attach_status == "attached":
                return _attachment_dict(a)
            if a.attach_status not in ("attaching", "reserved"):
                raise VolumeConflict(f"attachment {attachment_id} is {a.attach_status}")
            a.attach_status, a.attach_time = "attached", utcnow()
            s.flush()
            self._refresh(s, self._volume(s, a.volume_id, lock=True))
            return _attachment_dict(a)

    def attachment_delete(self, ctxt, attachment_id):
        with self.db.session(write=True) as s:
            a = self._attachment(s, attachment_id)
            a.deleted, a.attach_status, a.detach_time = True, "detached", utcnow()
            s.flush()
            v = s.get(models.Volume, a.volume_id, with_for_update=True)
            if v.status == "detaching":
                v.status = "in-use"  # let the attachments decide
            self._refresh(s, v)

    def attachment_get(self, ctxt, attachment_id):
        with self.db.session() as s:
            return _attachment_dict(self._attachment(s, attachment_id))

    def attachment_list(self, ctxt, volume_id=None, instance_uuid=None):
        """Live attachments, by volume and/or server."""
        with self.db.session() as s:
            q = sa.select(models.VolumeAttachment).where(models.VolumeAttachment.deleted.is_(False))
            if volume_id:
                q = q.where(models.VolumeAttachment.volume_id == volume_id)
            if instance_uuid:
                q = q.where(models.VolumeAttachment.instance_uuid == instance_uuid)
            rows = s.scalars(q.order_by(models.VolumeAttachment.created_at,
                                        models.VolumeAttachment.id)).all()
            return [_attachment_dict(a) for a in rows]

    get_attachments = attachment_list
