"""The one place where a service builds its clients of other services' HTTP APIs.

The Placement client is built from ``[placement]`` (novella/conf/clients.py):

- with ``auth_type`` set, keystoneauth's session, auth plugin and adapter are
  loaded from the group (``keystoneauth1.loading``), so the service user's
  token is fetched and renewed by keystoneauth and the endpoint is found in
  the catalog (``service_type``, ``valid_interfaces``, ``region_name``), or
  is ``endpoint_override`` when that is set;
- without it, requests go to ``endpoint_override`` with the static
  ``[placement] token`` (the all-in-one and ``noauth2`` deployments).

The network, volume and image clients (``service_clients``) speak the
Neutron v2.0, Cinder v3 and Glance v2 APIs when ``[neutron]``, ``[cinder]``,
``[glance]`` say where the service is (an ``auth_type``, or an endpoint:
``endpoint_override``, ``[cinder] endpoint_template``); otherwise the service is
reached through its client class over its database, as in the all-in-one.
A request made for a user (a context with a token that is not an
administrator's) carries the user's token; any other carries the group's
service user's token (``[glance]``, which has no auth options, that of
``[service_user]``), or without Keystone the ``noauth2`` administrator's.
With ``[service_user] send_service_user_token`` every request also carries
the service user's token as ``X-Service-Token``.
"""
from keystoneauth1 import adapter as ks_adapter
from keystoneauth1 import exceptions as ks_exc
from keystoneauth1 import loading as ks_loading
import requests

from keystoneauth1 import service_token as ks_service_token
from keystoneauth1 import token_endpoint

from novella.conf.clients import CINDER, GLANCE, GROUP as PLACEMENT, NEUTRON, SERVICE_USER

# What a client may raise when the service, or Keystone in front of it, cannot be
# reached or refuses the service's credentials.
UNREACHABLE = (requests.ConnectionError, requests.Timeout, ks_exc.ConnectFailure,
               ks_exc.DiscoveryFailure, ks_exc.EndpointNotFound, ks_exc.ConnectionError)
REFUSED = (ks_exc.Unauthorized, ks_exc.MissingRequiredOptions, ks_exc.AuthorizationFailure)


class MissingOption(Exception):
    """A client cannot be built from the configuration (the message says why)."""


def keystone_adapter(conf, group):
    """A keystoneauth Adapter from ``[group]``'s session, auth and adapter options."""
    session = ks_loading.load_session_from_conf_options(conf, group)
    try:
        auth = ks_loading.load_auth_from_conf_options(conf, group)
    except ks_exc.MissingRequiredOptions as exc:
        names = ", ".join(opt.dest for opt in exc.options)
        raise MissingOption(f"[{group}] {names} not set (needed by auth_type = "
                            f"{getattr(conf, group).auth_type})") from None
    # Not load_adapter_from_conf_options: it reads the version options, which the
    # group does not have (novella/conf/clients.py).
    opts = getattr(conf, group)
    return ks_adapter.Adapter(
        session, auth=auth, service_type=opts.service_type, service_name=opts.service_name,
        interface=opts.valid_interfaces, region_name=opts.region_name,
        endpoint_override=opts.endpoint_override, connect_retries=opts.connect_retries,
        connect_retry_delay=opts.connect_retry_delay,
        status_code_retries=opts.status_code_retries,
        status_code_retry_delay=opts.status_code_retry_delay,
        retriable_status_codes=opts.retriable_status_codes)


def placement_client(conf, **kwargs):
    """A PlacementClient as ``[placement]`` says; ``kwargs`` go to the client."""
    from novella.placement.client import PlacementClient
    opts = getattr(conf, PLACEMENT)
    if opts.auth_type:
        return PlacementClient(session=keystone_adapter(conf, PLACEMENT), **kwargs)
    if not opts.endpoint_override:
        raise MissingOption("[placement] auth_type (with Keystone) or endpoint_override "
                            "(without) is not set")
    return PlacementClient(endpoint=opts.endpoint_override, token=opts.token, **kwargs)


def describe_failure(conf, exc):
    """One line saying why Placement could not be used, naming the options to look at."""
    opts = getattr(conf, PLACEMENT)
    if isinstance(exc, REFUSED):
        return (f"Keystone refused the [placement] credentials ({type(exc).__name__}: {exc}): "
                "check [placement] auth_url, username, password, project_name")
    if opts.auth_type and not opts.endpoint_override:
        return (f"Keystone at {getattr(opts, 'auth_url', None)}, or the Placement its catalog "
                "names, does not answer ([placement] auth_url, region_name, valid_interfaces): "
                "start them first")
    return (f"Placement does not answer at {opts.endpoint_override} ([placement] "
            "endpoint_override): start it first")


# -- the network, volume and image services over HTTP ------------------------------------------

NOAUTH_ADMIN_TOKEN = "admin"  # the noauth2 administrator (novella/api/auth.py)


class ServiceSession:
    """Requests to one service's HTTP API, each with the token it should carry.

    ``endpoint`` is the service's URL, or a function of the service user's
    session that finds it (once); ``service_auth`` the auth plugin of the
    service's own user (None without Keystone); ``service_user_auth`` that of
    ``[service_user]``, sent as ``X-Service-Token`` when set.
    """

    def __init__(self, session, endpoint, service_auth=None, service_user_auth=None,
                 service_name="service"):
        self.session, self._endpoint = session, endpoint
        self.service_auth, self.service_user_auth = service_auth, service_user_auth
        self.service_name = service_name

    def endpoint(self, ctxt=None):
        if callable(self._endpoint):
            self._endpoint = self._endpoint(self.session, self.service_auth).rstrip("/")
        project = getattr(ctxt, "project_id", None) or ""
        return self._endpoint.replace("%(project_id)s", project).replace(
            "%(tenant_id)s", project)

    def auth(self, ctxt, admin=False):
        """The auth plugin for a request made for ``ctxt`` (``admin``: as the service)."""
        endpoint = self.endpoint(ctxt)
        token = getattr(ctxt, "auth_token", None)
        if token and not admin and not ctxt.is_admin:
            auth = token_endpoint.Token(endpoint, token)
        elif self.service_auth is not None:
            auth = self.service_auth
        else:
            auth = token_endpoint.Token(endpoint, NOAUTH_ADMIN_TOKEN)
        if self.service_user_auth is not None:
            auth = ks_service_token.ServiceTokenAuthWrapper(auth, self.service_user_auth)
        return auth

    def request(self, ctxt, method, path, admin=False, headers=None, **kwargs):
        """The response (any status); ``path`` is under the endpoint."""
        headers = dict(headers or {})
        request_id = getattr(ctxt, "global_request_id", None) or getattr(ctxt, "request_id", None)
        if request_id:
            headers["X-OpenStack-Request-ID"] = request_id
        return self.session.request(self.endpoint(ctxt) + path, method,
                                    auth=self.auth(ctxt, admin), headers=headers,
                                    raise_exc=False, **kwargs)


def _auth(conf, group):
    """``[group]``'s auth plugin, or None when it has no ``auth_type``."""
    if not getattr(conf, group).auth_type:
        return None
    try:
        return ks_loading.load_auth_from_conf_options(conf, group)
    except ks_exc.MissingRequiredOptions as exc:
        names = ", ".join(opt.dest for opt in exc.options)
        raise MissingOption(f"[{group}] {names} not set (needed by auth_type = "
                            f"{getattr(conf, group).auth_type})") from None


def _service_user_auth(conf):
    if not conf.service_user.send_service_user_token:
        return None
    auth = _auth(conf, SERVICE_USER)
    if auth is None:
        raise MissingOption("[service_user] send_service_user_token needs [service_user] "
                            "auth_type (e.g. password) and its options")
    return auth


def _catalog_endpoint(opts):
    """A function finding the endpoint with the service user's session and auth."""
    def find(session, auth):
        if auth is None:
            raise MissingOption(f"no endpoint for service type {opts['service_type']}: "
                                "set an auth_type to look it up in the catalog")
        return ks_adapter.Adapter(session, auth=auth, **opts).get_endpoint()
    return find


def network_session(conf):
    """A ServiceSession for the network service, or None when ``[neutron]`` is silent."""
    opts = conf.neutron
    if not (opts.auth_type or opts.endpoint_override):
        return None
    return ServiceSession(
        ks_loading.load_session_from_conf_options(conf, NEUTRON),
        opts.endpoint_override or _catalog_endpoint(dict(
            service_type=opts.service_type, service_name=opts.service_name,
            interface=opts.valid_interfaces, region_name=opts.region_name)),
        _auth(conf, NEUTRON), _service_user_auth(conf), "network")


def volume_session(conf):
    """A ServiceSession for the volume service, or None when ``[cinder]`` is silent."""
    opts = conf.cinder
    if not (opts.auth_type or opts.endpoint_template):
        return None
    service_type, service_name, interface = (opts.catalog_info.split(":") + ["", ""])[:3]
    return ServiceSession(
        ks_loading.load_session_from_conf_options(conf, CINDER),
        opts.endpoint_template or _catalog_endpoint(dict(
            service_type=service_type, service_name=service_name or None,
            interface=interface.replace("URL", "") or "public",
            region_name=opts.os_region_name)),
        _auth(conf, CINDER), _service_user_auth(conf), "volume")


def image_session(conf):
    """A ServiceSession for the image service, or None when ``[glance]`` is silent.

    ``[glance]`` has no auth options: with Keystone, what is not done with a
    user's token is done with ``[service_user]``'s, which also finds the endpoint."""
    opts = conf.glance
    service_auth = _auth(conf, SERVICE_USER)
    if not (opts.endpoint_override or service_auth is not None):
        return None
    return ServiceSession(
        ks_loading.load_session_from_conf_options(conf, GLANCE),
        opts.endpoint_override or _catalog_endpoint(dict(
            service_type=opts.service_type, service_name=opts.service_name,
            interface=opts.valid_interfaces, region_name=opts.region_name)),
        service_auth, _service_user_auth(conf), "image")


def service_clients(conf, local):
    """-> (image, network, volume) clients: over HTTP where the service's group says
    where it is, else from ``local()`` (the client classes over the databases, built
    only when one of them is needed)."""
    from novella.image.http_client import ImageHTTPClient
    from novella.network.http_client import NetworkHTTPClient
    from novella.volume.http_client import VolumeHTTPClient
    sessions = (image_session(conf), network_session(conf), volume_session(conf))
    kinds = (ImageHTTPClient, NetworkHTTPClient, VolumeHTTPClient)
    embedded = local() if None in sessions else (None, None, None)
    return tuple(kind(session) if session is not None else mine
                 for kind, session, mine in zip(kinds, sessions, embedded))
