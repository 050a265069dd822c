"""The image service client: images and snapshots, their data as files.

Images are returned as dicts in the form a compute service uses::

    {"id", "name", "status", "visibility", "owner", "disk_format", "container_format",
     "size", "checksum", "os_hash_algo", "os_hash_value", "min_disk", "min_ram",
     "protected", "created_at", "updated_at", "deleted", "deleted_at",
     "properties": {...}}

Statuses follow Glance: ``queued`` (record only), ``saving`` (data being
written), ``active``, ``deleted``. A snapshot is an image whose properties
carry ``image_type: snapshot`` and the ``instance_uuid`` it was taken from.
"""
import datetime
import hashlib
import os
import shutil
import tempfile
import uuid

import sqlalchemy as sa

from novella.db import migrate
from novella.db.engine import Database
from novella.db.timestamps import isotime
from novella.image import models

CORE_FIELDS = ("name", "visibility", "disk_format", "container_format", "min_disk",
               "min_ram", "protected", "owner")
VISIBILITIES = ("public", "private", "shared", "community")


class ImageError(Exception):
    code = 400


class ImageNotFound(ImageError):
    code = 404


class ImageConflict(ImageError):
    """The image is not in a state that allows the operation."""
    code = 409


class ImageProtected(ImageConflict):
    pass


def _visible(ctxt, row):
    return (ctxt is None or ctxt.is_admin or row.owner == ctxt.project_id
            or row.visibility in ("public", "community"))


def _as_dict(row):
    d = {"id": row.id, "status": row.status, "size": row.size, "checksum": row.checksum,
         "os_hash_algo": row.os_hash_algo, "os_hash_value": row.os_hash_value,
         "created_at": isotime(row.created_at), "updated_at": isotime(row.updated_at),
         "deleted": row.deleted, "deleted_at": isotime(row.deleted_at),
         "properties": dict(row.properties or {})}
    d.update({f: getattr(row, f) for f in CORE_FIELDS})
    return d


class ImageAPI:
    def __init__(self, db, data_dir):
        self.db = db if isinstance(db, Database) else Database(db)
        self.data_dir = data_dir
        os.makedirs(data_dir, exist_ok=True)
        migrate.require("image", self.db.engine)  # made by `novella manage api_db sync`

    # --- records ---------------------------------------------------------------
    def create(self, ctxt, name=None, id=None, visibility="shared", properties=None,  # noqa: A002
               **fields):
        """A new image record in ``queued``; unknown keyword fields become properties."""
        if visibility not in VISIBILITIES:
            raise ImageError(f"invalid visibility {visibility!r}")
        props = dict(properties or {})
        core = {k: fields.pop(k) for k in list(fields) if k in CORE_FIELDS}
        props.update(fields)
        core.setdefault("owner", ctxt.project_id if ctxt is not None else None)
        row = models.Image(id=id or str(uuid.uuid4()), name=name, status="queued",
                           visibility=visibility, properties=props, **core)
        with self.db.session(write=True) as s:
            if s.get(models.Image, row.id) is not None:
                raise ImageConflict(f"image {row.id} already exists")
            s.add(row)
        return _as_dict(row)

    def create_snapshot(self, ctxt, instance_uuid, name, base_image_ref=None, properties=None,
                        **fields):
        """The record of a snapshot of a server; the compute host uploads its data."""
        props = dict(properties or {})
        props.update(image_type="snapshot", instance_uuid=instance_uuid)
        if base_image_ref:
            props["base_image_ref"] = base_image_ref
        fields.setdefault("visibility", "private")
        return self.create(ctxt, name=name, properties=props, **fields)

    def _row(self, s, image_id, include_deleted=False):
        row = s.get(models.Image, image_id)
        if row is None or (row.deleted and not include_deleted):
            raise ImageNotFound(f"image {image_id} could not be found")
        return row

    def get(self, ctxt, image_id, include_deleted=False):
        """An image the context may see (another project's private image is not found)."""
        with self.db.read_session() as s:
            row = self._row(s, image_id, include_deleted)
            if not _visible(ctxt, row):
                raise ImageNotFound(f"image {image_id} could not be found")
            return _as_dict(row)

    def list(self, ctxt, filters=None):
        """Images visible to the context; filters on core fields or properties. A core
        field's value ``in:a,b,...`` matches any of those (Glance's ``in`` operator)."""
        filters = dict(filters or {})
        with self.db.session() as s:
            q = sa.select(models.Image).where(models.Image.deleted.is_(False))
            if ctxt is not None and not ctxt.is_admin:
                q = q.where(sa.or_(models.Image.owner == ctxt.project_id,
                                   models.Image.visibility.in_(("public", "community"))))
            for key in [k for k in filters if k in CORE_FIELDS + ("status", "id")]:
                value, column = filters.pop(key), getattr(models.Image, key)
                if isinstance(value, str) and value.startswith("in:"):
                    q = q.where(column.in_([v.strip() for v in value[3:].split(",")]))
                else:
                    q = q.where(column == value)
            rows = s.scalars(q.order_by(models.Image.created_at, models.Image.id)).all()
        images = [_as_dict(r) for r in rows]
        return [i for i in images
                if all(i["properties"].get(k) == v for k, v in filters.items())]

    def update(self, ctxt, image_id, properties=None, remove_properties=(), **fields):
        """Change core fields and merge ``properties``; drop ``remove_properties``."""
        unknown = set(fields) - set(CORE_FIELDS)
        if unknown:
            raise ImageError(f"cannot update {sorted(unknown)}")
        with self.db.session(write=True) as s:
            row = self._row(s, image_id)
            for k, v in fields.items():
                setattr(row, k, v)
            props = dict(row.properties or {})
            props.update(properties or {})
            for k in remove_properties:
                props.pop(k, None)
            row.properties = props
            row.updated_at = datetime.datetime.utcnow()
            return _as_dict(row)

    # --- data --------------------------------------------------------------------
    def data_path(self, image_id):
        """Where an image's bytes live (read it, never write it)."""
        return os.path.join(self.data_dir, image_id)

    def _set_status(self, image_id, expected, status, **values):
        with self.db.session(write=True) as s:
            row = self._row(s, image_id)
            if row.status not in expected:
                raise ImageConflict(f"image {image_id} is {row.status}, not {'/'.join(expected)}")
            row.status = status
            for k, v in values.items():
                setattr(row, k, v)
            return _as_dict(row)

    def upload(self, ctxt, image_id, data):
        """Store the image's bytes (``bytes``, a file path or a readable file); -> active.
        An upload whose process died (left ``saving``) may start over."""
        self._set_status(image_id, ("queued", "saving"), "saving")
        md5, sha512, size = hashlib.md5(usedforsecurity=False), hashlib.sha512(), 0
        fd, tmp = tempfile.mkstemp(dir=self.data_dir, prefix=f".{image_id}.")
        try:
            with os.fdopen(fd, "wb") as out:
                for chunk in _chunks(data):
                    md5.update(chunk)
                    sha512.update(chunk)
                    size += len(chunk)
                    out.write(chunk)
            # Renamed into place only when complete: a reader never sees half an image.
            os.replace(tmp, self.data_path(image_id))
        except BaseException:
            if os.path.exists(tmp):
                os.unlink(tmp)
            self._set_status(image_id, ("saving",), "queued")
            raise
        try:
            return self._set_status(image_id, ("saving",), "active", size=size,
                                    checksum=md5.hexdigest(), os_hash_algo="sha512",
                                    os_hash_value=sha512.hexdigest())
        except ImageError:
            # Deleted while uploading: the data has no owner any more.
            _unlink(self.data_path(image_id))
            raise

    def download(self, ctxt, image_id, dest_path=None):
        """The image's bytes, or copy them to ``dest_path`` and return that path."""
        image = self.get(ctxt, image_id)
        if image["status"] != "active":
            raise ImageConflict(f"image {image_id} has no data (status {image['status']})")
        if dest_path is None:
            with open(self.data_path(image_id), "rb") as f:
                return f.read()
        shutil.copyfile(self.data_path(image_id), dest_path)
        return dest_path

    def delete(self, ctxt, image_id):
        with self.db.session(write=True) as s:
            row = self._row(s, image_id)
            if row.protected:
                raise ImageProtected(f"image {image_id} is protected")
            row.status = "deleted"
            row.deleted = True
            row.deleted_at = datetime.datetime.utcnow()
        _unlink(self.data_path(image_id))


def _chunks(data, size=1 << 20):
    if isinstance(data, (bytes, bytearray, memoryview)):
        yield bytes(data)
        return
    if isinstance(data, (str, os.PathLike)):
        with open(data, "rb") as f:
            yield from iter(lambda: f.read(size), b"")
        return
    yield from iter(lambda: data.read(size), b"")


def _unlink(path):
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass
