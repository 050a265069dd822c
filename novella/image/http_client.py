"""The image service client over its HTTP API (Glance's v2 wire format).

``ImageHTTPClient`` has the interface of ``novella.image.api.ImageAPI``:
image records (``POST``, ``GET``, ``PATCH`` with a JSON patch, ``DELETE``
``/v2/images``), their data (``PUT`` and ``GET .../file``) and snapshots of
servers (an image record with ``image_type: snapshot``). Built by
``novella.clients.service_clients`` from ``[glance]``. Glance's flat
documents are turned back into the database client's dicts (the properties
under ``properties``).
"""
import os

from novella.image import api as img_api

# Keys of Glance's document that are not properties of the image.
_NOT_PROPERTIES = set(img_api.CORE_FIELDS) | {
    "id", "status", "size", "virtual_size", "checksum", "os_hash_algo", "os_hash_value",
    "created_at", "updated_at", "self", "file", "schema", "tags", "os_hidden",
    "direct_url", "locations"}
PATCH = "application/openstack-images-v2.1-json-patch"


def _error(resp):
    # The image API answers errors in plain text: "404 Not Found\n\n<explanation>".
    parts = resp.text.split("\n\n")
    message = (parts[1] if len(parts) > 1 else resp.text).strip() or f"HTTP {resp.status_code}"
    cls = {404: img_api.ImageNotFound, 409: img_api.ImageConflict}.get(resp.status_code,
                                                                     img_api.ImageError)
    exc = cls(message)
    exc.code = resp.status_code
    return exc


def _image(doc):
    out = {k: doc.get(k) for k in img_api.CORE_FIELDS}
    out.update({k: doc.get(k) for k in ("id", "status", "size", "checksum", "os_hash_algo",
                                        "os_hash_value", "created_at", "updated_at")})
    out.update(deleted=False, deleted_at=None,
               properties={k: v for k, v in doc.items() if k not in _NOT_PROPERTIES})
    return out


class ImageHTTPClient:
    def __init__(self, session):
        self.http = session

    def _call(self, ctxt, method, path, **kwargs):
        resp = self.http.request(ctxt, method, "/v2/images" + path, **kwargs)
        if resp.status_code >= 400:
            raise _error(resp)
        return resp

    # --- records ---------------------------------------------------------------
    def create(self, ctxt, name=None, id=None, visibility="shared", properties=None,  # noqa: A002
               **fields):
        body = dict(properties or {}, **fields)
        body.update(name=name, visibility=visibility)
        if id is not None:
            body["id"] = id
        return _image(self._call(ctxt, "POST", "", json=body).json())

    def create_snapshot(self, ctxt, instance_uuid, name, base_image_ref=None, properties=None,
                        **fields):
        props = dict(properties or {}, image_type="snapshot", instance_uuid=instance_uuid)
        if base_image_ref:
            props["base_image_ref"] = base_image_ref
        fields.setdefault("visibility", "private")
        return self.create(ctxt, name=name, properties=props, **fields)

    def get(self, ctxt, image_id, include_deleted=False):
        """An image the context may see; a deleted one is not found (as with Glance)."""
        return _image(self._call(ctxt, "GET", f"/{image_id}").json())

    def list(self, ctxt, filters=None):
        params, images, marker = dict(filters or {}), [], None
        while True:
            page = self._call(ctxt, "GET", "", params=dict(
                params, **({"marker": marker} if marker else {}))).json()
            images += page["images"]
            if "next" not in page or not page["images"]:
                return [_image(i) for i in images]
            marker = page["images"][-1]["id"]

    def update(self, ctxt, image_id, properties=None, remove_properties=(), **fields):
        ops = [{"op": "replace" if k in img_api.CORE_FIELDS else "add", "path": f"/{k}",
                "value": v} for k, v in dict(properties or {}, **fields).items()]
        ops += [{"op": "remove", "path": f"/{k}"} for k in remove_properties]
        return _image(self._call(ctxt, "PATCH", f"/{image_id}", data=_json(ops),
                                 headers={"Content-Type": PATCH}).json())

    # --- data --------------------------------------------------------------------
    def upload(self, ctxt, image_id, data):
        if isinstance(data, (str, os.PathLike)):
            with open(data, "rb") as f:
                self._put(ctxt, image_id, f)
        else:
            self._put(ctxt, image_id, bytes(data) if isinstance(data, (bytearray, memoryview))
                      else data)
        return self.get(ctxt, image_id)

    def _put(self, ctxt, image_id, data):
        self._call(ctxt, "PUT", f"/{image_id}/file", data=data,
                   headers={"Content-Type": "application/octet-stream"})

    def download(self, ctxt, image_id, dest_path=None):
        resp = self._call(ctxt, "GET", f"/{image_id}/file", stream=dest_path is not None)
        if resp.status_code == 204:
            raise img_api.ImageConflict(f"image {image_id} has no data")
        if dest_path is None:
            return resp.content
        with open(dest_path, "wb") as out:
            for chunk in resp.iter_content(1 << 20):
                out.write(chunk)
        return dest_path

    def delete(self, ctxt, image_id):
        self._call(ctxt, "DELETE", f"/{image_id}")


def _json(value):
    import json
    return json.dumps(value)
