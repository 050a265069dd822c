"""Every HTTP API of Novella in one process, over SQLite files, for tests
that send the same kind of request to all of them.

Compute runs over the embedded image, network and volume services (its
conductor is the recording endpoint of tests.functional.api.conftest);
placement over its own database; identity over its store. ``call`` sends
one request and returns ``(status, headers, parsed body or raw bytes)``.
"""
import json
import uuid

import sqlalchemy as sa
import webob
from oslo_config import cfg

from novella.api.identity.app import IdentityApp
from novella.api.identity.store import IdentityStore
from novella.api.image.app import make_app as image_app
from novella.api.network.app import make_app as network_app
from novella.api.volume.app import make_app as volume_app
from novella.context import RequestContext
from novella.db import migrate
from novella.db.engine import Database
from novella.image.api import ImageAPI
from novella.network.api import NetworkAPI
from novella.placement import conf as placement_conf, wsgi as placement_wsgi
from novella.volume.api import VolumeAPI
from tests.functional.api.conftest import Cloud
from tests.schemas import synced

PLACEMENT_LATEST = "placement 1.39"


class AllAPIs:
    def __init__(self, tmp_path, max_request_body_size=None):
        """``max_request_body_size``: ``[oslo_middleware]`` of every API's configuration."""
        self.cloud = Cloud(tmp_path)
        cloud = self.cloud
        limit = {}
        if max_request_body_size is not None:
            from novella.conf import middleware
            middleware.register_opts(cloud.conf)
            cloud.conf.set_override("max_request_body_size", max_request_body_size,
                                    group="oslo_middleware")
            limit = {"oslo_middleware": {"max_request_body_size": max_request_body_size}}
        self.services_url = synced(f"sqlite:///{tmp_path}/services.db")
        cloud.image_api = ImageAPI(self.services_url, str(tmp_path / "images"))
        cloud.network_api = NetworkAPI(self.services_url)
        cloud.volume_api = VolumeAPI(self.services_url, image_api=cloud.image_api)
        cloud.build_app()
        cloud.flavor()
        ctxt = RequestContext(user_id="alice", project_id="project-a")
        self.image = cloud.image_api.create(ctxt, name="cirros", disk_format="raw",
                                            container_format="bare", visibility="public")
        cloud.image_api.upload(ctxt, self.image["id"], b"\0" * 1024)
        self.server = cloud.instance("cell1", host=None, name="fuzz-target")
        self.apps = {
            "compute": cloud.app,
            "image": image_app(cloud.conf, cloud.image_api),
            "network": network_app(cloud.conf, cloud.network_api),
            "volume": volume_app(cloud.conf, cloud.volume_api),
        }
        pconf = placement_conf.make_conf(overrides={
            "placement_database": {"connection": f"sqlite:///{tmp_path}/placement.db"},
            "api": {"auth_strategy": "noauth2"}, **limit})
        self.apps["placement"] = placement_wsgi.make_app(pconf)
        store = IdentityStore(f"sqlite:///{tmp_path}/identity.db")
        store.ensure([{"name": "admin", "password": "secret", "project": "admin",
                      "roles": ["admin"]}])
        self.identity_db = f"sqlite:///{tmp_path}/identity.db"
        self.apps["identity"] = IdentityApp(store, {"compute": ("nova", "http://compute")},
                                            conf=cloud.conf)
        self.placement_db = f"sqlite:///{tmp_path}/placement.db"
        self.provider = str(uuid.uuid4())
        self.consumer = str(uuid.uuid4())
        self.call("placement", "POST", "/resource_providers",
                  {"name": "rp", "uuid": self.provider})
        self.call("placement", "PUT", f"/resource_providers/{self.provider}/inventories",
                  {"resource_provider_generation": 0,
                   "inventories": {"VCPU": {"total": 8}, "MEMORY_MB": {"total": 4096}}})
        status, _, _ = self.call("placement", "PUT", f"/allocations/{self.consumer}", {
            "allocations": {self.provider: {"resources": {"VCPU": 2}}},
            "project_id": "p", "user_id": "u", "consumer_generation": None,
            "consumer_type": "INSTANCE"})
        assert status == 204

    def call(self, api, method, path, body=None, headers=None, query=""):
        """One request; ``body`` is raw bytes or JSON-able (None: no body)."""
        if api == "compute" and not path.startswith("/v2.1") and path != "/":
            path = "/v2.1" + path
        req = webob.Request.blank("/", method=method)
        req.environ["PATH_INFO"] = path
        req.environ["QUERY_STRING"] = query
        req.headers["X-Auth-Token"] = {"identity": "", "placement": "admin"}.get(
            api, "admin:admin-project")
        if api == "placement":
            req.headers["OpenStack-API-Version"] = PLACEMENT_LATEST
            req.headers["Accept"] = "application/json"
        for k, v in (headers or {}).items():
            req.headers[k] = v
        if body is not None:
            req.body = body if isinstance(body, bytes) else json.dumps(body).encode()
            if "Content-Type" not in (headers or {}):
                req.content_type = "application/json"
        resp = req.get_response(self.apps[api])
        try:
            data = json.loads(resp.body) if resp.body else None
        except ValueError:
            data = resp.text if resp.content_type == "text/plain" else resp.body
        return resp.status_int, resp.headers, data

    # --- state: what a rejected request must leave as it was ---------------------
    def state(self):
        """Row counts of every database of every API, and placement's usages."""
        out = {("compute",) + k: v for k, v in self.cloud.counts().items()}
        for label, url in (("services", self.services_url), ("placement", self.placement_db),
                           ("identity", self.identity_db)):
            db = Database(url)
            meta = sa.MetaData()
            with db.connection() as conn:
                meta.reflect(bind=conn)
                for table in meta.sorted_tables:
                    if table.name == "alembic_version":
                        continue
                    out[(label, table.name)] = conn.execute(
                        sa.select(sa.func.count()).select_from(table)).scalar()
        _, _, usages = self.call("placement", "GET", f"/resource_providers/{self.provider}/usages")
        out["usages"] = usages["usages"]
        return out


def _placement_wants_code(headers):
    """Placement error bodies carry ``code`` from 1.23 (and when the version
    asked for cannot be served); ``call`` asks for the latest by default."""
    text = (headers or {}).get("OpenStack-API-Version", "placement latest").split(" ", 1)[-1]
    try:
        major, minor = (int(x) for x in text.strip().split("."))
    except ValueError:
        return True
    return (major, minor) >= (1, 23) or not (1, 0) <= (major, minor) <= (1, 39)


def error_shape_ok(api, status, data, headers=None):
    """Whether a 4xx body has the shape the reference's API answers with."""
    if api == "image":   # webob's plain text: "404 Not Found\n\n<explanation>"
        return isinstance(data, str) and data.startswith(f"{status} ") and "\n\n" in data
    if not isinstance(data, dict):
        return False
    if api == "compute":
        if len(data) != 1:
            return False
        (fault,) = data.values()
        return isinstance(fault, dict) and fault.get("code") == status \
            and isinstance(fault.get("message"), str)
    if api == "placement":
        errors = data.get("errors")
        if not isinstance(errors, list) or len(errors) != 1:
            return False
        error = errors[0]
        wanted = {"title", "detail", "request_id"}
        if _placement_wants_code(headers):
            wanted.add("code")
        return error.get("status") == status and wanted <= set(error)
    if api == "identity":
        error = data.get("error")
        return isinstance(error, dict) and error.get("code") == status \
            and isinstance(error.get("message"), str) and "title" in error
    if api == "network":
        error = data.get("NeutronError")
        return isinstance(error, dict) and {"type", "message", "detail"} <= set(error)
    if api == "image":
        return False   # plain text, checked below
    if api == "volume":
        if len(data) != 1:
            return False
        (fault,) = data.values()
        return isinstance(fault, dict) and fault.get("code") == status \
            and isinstance(fault.get("message"), str)
    return False


__all__ = ["AllAPIs", "error_shape_ok", "migrate"]
