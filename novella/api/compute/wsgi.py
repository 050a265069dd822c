"""The Compute API's WSGI application: routing, negotiation, errors.

    app = make_app(conf, api_db, transport, network_api=None, image_api=None,
                   volume_api=None)

Each handler module under ``handlers/`` lists its ``ROUTES`` as
``(method, path template, function)``; a function receives the request and
the path's variables and returns ``(status, body[, headers])``.
"""
import json
import logging
import uuid as uuid_mod

import webob

from novella.api import auth, router as router_mod
from novella.api.compute import common, errors, microversion
from novella.api.compute.handlers import (
    images, server_actions_guest, server_actions_image, server_actions_rebuild,
    aggregates, availability_zones, flavors, hypervisors, instance_actions, keypairs, limits,
    migrate, migrations, server_actions, server_groups, server_tags, servers, services, shelve,
    versions, volume_attachments, admin_actions, quota_sets, removed, server_ips,
    server_metadata, security_groups, volumes, extensions, os_hosts, simple_tenant_usage,
    usage_audit_log, server_extras, floating_ips, networks, assisted_volume_snapshots,
    attach_interfaces, remote_consoles, server_topology)
from novella.policies import compute as compute_policies, make_enforcer

LOG = logging.getLogger(__name__)

HANDLER_MODULES = [versions, servers, server_actions, server_actions_guest,
                   server_actions_image, server_actions_rebuild, images, server_tags,
                   instance_actions,
                   migrations, flavors, keypairs, services, hypervisors,
                   availability_zones, aggregates, server_groups, limits, migrate,
                   shelve, volume_attachments, admin_actions, quota_sets, removed, server_ips,
                   server_metadata, security_groups, volumes, extensions, os_hosts,
                   simple_tenant_usage, usage_audit_log, server_extras, floating_ips,
                   networks, assisted_volume_snapshots, attach_interfaces, remote_consoles,
                   server_topology]


# The reads that take no query parameters: from 2.102 any is refused (400), as the
# reference's query schemas then allow no additional properties.
QUERY_CLOSED_AT_2_102 = frozenset((
    aggregates.index, aggregates.show, availability_zones.index, availability_zones.detail,
    extensions.index, extensions.show, flavors.show, flavors.access_index,
    flavors.specs_index, flavors.specs_show, instance_actions.show, usage_audit_log.index,
    usage_audit_log.show, server_ips.index, server_ips.show, quota_sets.defaults,
    quota_sets.class_show, security_groups.server_index, server_extras.diagnostics,
    server_extras.show_password, server_groups.show, server_metadata.index,
    server_metadata.show, migrations.server_index, migrations.server_show, server_tags.index,
    server_tags.show, servers.show, volume_attachments.show, attach_interfaces.index,
    attach_interfaces.show, server_topology.index))


class Request(webob.Request):
    """A request with its context, microversion and the API's state."""

    api = None            # the API object (databases, transports, clients)
    version = microversion.MIN_VERSION
    project_in_url = None
    negotiated = False

    @property
    def context(self):
        return self.environ.get(auth.ENV_CONTEXT)

    def at_least(self, text):
        return self.version >= microversion.parse(text)

    def is_admin(self):
        return self.can("context_is_admin")

    def authorize(self, rule, target=None):
        if not self.can(rule, target):
            raise errors.Forbidden(f"Policy doesn't allow {rule} to be performed.")

    def can(self, rule, target=None):
        """A policy decision, remembered for the request (lists ask per server)."""
        ctxt = self.context
        if target is None:
            target = {"project_id": ctxt.project_id, "user_id": ctxt.user_id}
        cache = self.environ.setdefault("novella.policy_cache", {})
        key = (rule, tuple(sorted(target.items())))
        if key not in cache:
            cache[key] = self.api.check(ctxt, rule, target)
        return cache[key]

    def body_json(self, schema=None):
        """The JSON body, validated against ``schema`` for this microversion."""
        if not self.body:
            data = None
        else:
            try:
                data = router_mod.loads(self.body)
            except router_mod.InputError:
                raise errors.BadRequest("Malformed request body")
        if schema is not None:
            from novella.api.compute import validation
            if data is None and validation.pick(schema, self.version) is not None:
                raise errors.BadRequest("The request body is missing or invalid.")
            validation.validate(schema, data, self.version)
        return data

    def link_prefix(self):
        prefix = self.api.conf.api.compute_link_prefix
        return (prefix or self.host_url + self.script_name).rstrip("/")

    def self_link(self, *parts):
        root = self.link_prefix() + "/v2.1"
        if self.project_in_url:
            root += "/" + self.project_in_url
        return "/".join([root] + [str(p) for p in parts])

    def links(self, *parts):
        bookmark = self.link_prefix()
        if self.project_in_url:
            bookmark += "/" + self.project_in_url
        return [{"rel": "self", "href": self.self_link(*parts)},
                {"rel": "bookmark", "href": "/".join([bookmark] + [str(p) for p in parts])}]


# First path segments that are collections, not a project id in the URL.
_COLLECTIONS = {"servers", "flavors", "os-keypairs", "os-services", "os-hypervisors",
                "os-availability-zone", "os-aggregates", "os-server-groups",
                "os-migrations", "limits", "extensions", "images", "os-quota-sets",
                "os-quota-class-sets", "os-security-groups",
                "os-security-group-rules", "os-volumes", "os-hosts", "os-simple-tenant-usage",
                "os-instance_usage_audit_log", "os-server-external-events", "os-floating-ips",
                "os-floating-ip-pools", "os-tenant-networks",
                "os-snapshots", "os-assisted-volume-snapshots",
                "os-console-auth-tokens", "os-volumes_boot", "versions"} | removed.COLLECTIONS


class API:
    """The state every handler reaches through ``req.api``."""

    def __init__(self, conf, api_db, transport, network_api=None, image_api=None,
                 volume_api=None, aggregate_hook=None, placement=None):
        self.conf = conf
        self.api_db = api_db
        self.transport = transport
        self.network_api = network_api
        self.image_api = image_api
        self.volume_api = volume_api
        # aggregate_hook(event, aggregate_uuid, host): mirrors host membership
        # into placement aggregates when given ("add_host" / "remove_host").
        # placement: a placement client; host aggregates are mirrored into
        # it and a deleted compute service's providers removed from it; a server
        # deleted while its host is down has its allocation deleted here.
        self.placement = placement
        self.placement_sync = None
        if placement is not None:
            from novella.api.compute.placement_sync import PlacementSync
            self.placement_sync = PlacementSync(self, placement)
        self.aggregate_hook = aggregate_hook or self.placement_sync
        self.enforcer = make_enforcer(conf, compute_policies.list_rules())
        self.max_body = router_mod.max_body_size(conf)
        self.router = router_mod.Router(trailing_slash=False)  # "/servers/" names nothing
        for module in HANDLER_MODULES:
            for method, template, fn in module.ROUTES:
                self.router.add(method, template, fn)

    def check(self, ctxt, rule, target=None):
        from oslo_policy import policy
        if target is None:
            target = {"project_id": ctxt.project_id, "user_id": ctxt.user_id}
        try:
            return self.enforcer.authorize(rule, target, ctxt, do_raise=False)
        except policy.InvalidScope:
            return False


class ComputeApp:
    def __init__(self, api):
        self.api = api

    def __call__(self, environ, start_response):
        req = Request(environ)
        req.api = self.api
        ctxt = req.context
        request_id = ctxt.request_id if ctxt is not None else "req-" + str(uuid_mod.uuid4())
        headers = {"x-openstack-request-id": request_id, "x-compute-request-id": request_id}
        status, body = 500, b""
        try:
            status, body, extra = self._handle(req)
            headers.update(extra)
        except errors.APIError as exc:
            status, body = exc.code, exc.body()
            headers.update(exc.headers)
        except (router_mod.NoRoute, router_mod.BadMethod):
            # A method the path does not have is a path that does not exist (the
            # reference's router matches method and path together).
            status, body = 404, errors.NotFound("The resource could not be found.").body()
        except Exception as exc:  # noqa: BLE001 - every failure becomes a fault body
            bad = router_mod.input_error(exc)
            if bad is not None:
                status, body = bad.code, errors.APIError(bad.message, bad.code).body()
            else:
                status, body = self._fault(req)
        if req.negotiated:
            headers.update(microversion.response_headers(req.version))
        if body:
            headers.setdefault("Content-Type", "application/json")
        resp = webob.Response(status=status, body=body, headerlist=[])
        for k, v in headers.items():
            resp.headers[k] = v
        if not body:
            resp.headers.pop("Content-Type", None)
        return resp(environ, start_response)

    @staticmethod
    def _fault(req):
        LOG.exception("Unexpected error in %s %s", req.method, req.environ.get("PATH_INFO"))
        exc = errors.APIError("Unexpected API Error. Please report this at "
                              "the project's issue tracker and attach the API log if possible.")
        return 500, exc.body()

    def _handle(self, req):
        path = router_mod.request_path(req.environ)
        if path.rstrip("/") in ("", "/v2.1", "/v2"):
            path = path.rstrip("/")
        # Otherwise a trailing "/" names nothing (e.g. a show without an id): 404, as
        # the reference's router matches the path as it is given.
        router_mod.read_body(req, self.api.max_body)
        if path in ("", "/v2.1", "/v2"):
            result = {"": versions.root, "/v2.1": versions.show_v21,
                      "/v2": versions.show_v20}[path](req)
        elif not path.startswith("/v2.1/"):
            raise errors.NotFound("The resource could not be found.")
        else:
            req.version = microversion.negotiate(req.headers)
            req.negotiated = True
            rest = path[len("/v2.1"):]
            parts = rest.split("/")
            if len(parts) > 2 and parts[1] not in _COLLECTIONS:
                # A project id in the URL: checked once the rest names a resource, so
                # an unknown path is a 404 whoever asks, as in the reference.
                fn, kwargs = self.api.router.match(req.method, "/" + "/".join(parts[2:]))
                self._check_project(req, parts[1])
                req.project_in_url = parts[1]
            else:
                fn, kwargs = self.api.router.match(req.method, rest)
            if fn in QUERY_CLOSED_AT_2_102:
                common.check_query(req)
            result = fn(req, **kwargs)
        if len(result) == 2:
            status, body = result
            extra = {}
        else:
            status, body, extra = result
        if body is not None and not isinstance(body, bytes):
            body = json.dumps(body, default=_json_default).encode()
        return status, body or b"", extra

    @staticmethod
    def _check_project(req, project_id):
        ctxt = req.context
        if project_id != ctxt.project_id and not ctxt.is_admin:
            raise errors.BadRequest(
                f"Malformed request URL: URL's project_id '{project_id}' doesn't match "
                f"Context's project_id '{ctxt.project_id}'")


def _json_default(value):
    import datetime
    if isinstance(value, datetime.datetime):
        return value.strftime("%Y-%m-%dT%H:%M:%SZ")
    return str(value)


def make_app(conf, api_db, transport, network_api=None, image_api=None, volume_api=None,
             aggregate_hook=None, placement=None):
    """The Compute API v2.1 as a WSGI application, authentication included."""
    api = API(conf, api_db, transport, network_api, image_api, volume_api, aggregate_hook,
              placement)
    app = auth.AuthMiddleware(ComputeApp(api), conf,
                              public_paths=("/", "", "/v2.1", "/v2"))
    return router_mod.BodySizeLimit(
        app, api.max_body, lambda message: {"overLimit": {"code": 413, "message": message}})
