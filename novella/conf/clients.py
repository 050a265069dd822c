"""``[placement]``, ``[neutron]``, ``[cinder]``, ``[glance]`` and ``[service_user]``:
how the conductor, scheduler, compute hosts and Compute API reach the other
services over HTTP, and as whom.

The options are keystoneauth's own, registered with ``keystoneauth1.loading``
as the reference registers them: the session's (``cafile``, ``timeout``, ...),
the auth plugin's (``auth_type``, then ``auth_url``, ``username``,
``password``, ... of the ``password`` plugin) and the adapter's
(``service_type``, ``valid_interfaces``, ``region_name``,
``endpoint_override``, ...). With ``auth_type`` set, the endpoint is found in
Keystone's catalog and every request carries a token of the service user
(``novella.clients``). Without it, requests go to ``endpoint_override`` with
the static ``token``: the all-in-one and ``noauth2`` deployments only.

The network, volume and image services are reached over their HTTP APIs
when their group says where (novella.clients): ``[neutron]`` has the same
keystoneauth options as ``[placement]`` (service type ``network``);
``[cinder]`` the session and auth options, its endpoint being
``endpoint_template`` or found in the catalog as ``catalog_info`` says;
``[glance]`` the session and adapter options (service type ``image``), no
auth of its own (requests carry the user's token). A group that says nothing
leaves that service reached through its client class over its database (the
all-in-one). ``[service_user]``: with ``send_service_user_token``, every
request also carries a token of this service user (``X-Service-Token``).
"""
from keystoneauth1 import loading as ks_loading
from oslo_config import cfg

GROUP = "placement"
SERVICE_TYPE = "placement"
# The auth plugin whose options the sample configuration lists. A plugin's
# options are registered when it is loaded (``auth_type`` names it), as
# keystoneauth does: registered up front, its required ``auth_url`` would be
# required of the deployments without Keystone too.
SAMPLE_PLUGIN = "password"

token_opt = cfg.StrOpt(
    "token", default="admin", secret=True,
    help="Token sent to Placement when [placement] auth_type is not set, with "
         "endpoint_override naming Placement: for the all-in-one and for deployments "
         "whose APIs use [api] auth_strategy = noauth2 only. With Keystone, set "
         "auth_type (e.g. password) and its options instead.")


NEUTRON, CINDER, GLANCE, SERVICE_USER = "neutron", "cinder", "glance", "service_user"
# The groups with an auth plugin of their own (the sample lists its options).
AUTH_GROUPS = (GROUP, NEUTRON, CINDER, SERVICE_USER)

cinder_opts = [
    cfg.StrOpt(
        "catalog_info", default="volumev3::publicURL",
        help="Where the volume service is in Keystone's catalog, as "
             "<service_type>:<service_name>:<interface> (the name may be empty); read "
             "when endpoint_template is not set."),
    cfg.StrOpt(
        "endpoint_template",
        help="The volume service's endpoint, instead of the catalog's; may contain "
             "%(project_id)s, e.g. http://127.0.0.1:8776/v3. Set, without auth_type, it "
             "makes the compute hosts, conductor and Compute API call the volume "
             "service's API without Keystone (noauth2 deployments)."),
    cfg.StrOpt(
        "os_region_name",
        help="The region whose volume service endpoint the catalog gives."),
]

service_user_opts = [
    cfg.BoolOpt(
        "send_service_user_token", default=False,
        help="Send, with every request to the network, volume and image services, a "
             "token of the service user this group's auth options name (header "
             "X-Service-Token), beside the token of the user the request is made for: "
             "the receiving service then accepts the request even when the user's "
             "token expires during a long operation, and knows it comes from Nova."),
]


def _adapter_opts(service_type):
    # Not the version options: which microversions a client speaks is the
    # client's business, not the operator's (nor are they in the reference's groups).
    opts = [opt for opt in ks_loading.get_adapter_conf_options(include_deprecated=False)
            if opt.dest not in ("version", "min_version", "max_version")]
    for opt in opts:
        if opt.dest == "service_type":
            opt.default = service_type
        elif opt.dest == "valid_interfaces":
            opt.default = ["internal", "public"]
    return opts


def _keystoneauth_opts(service_type):
    return (ks_loading.get_session_conf_options()
            + ks_loading.get_auth_common_conf_options()
            + _adapter_opts(service_type))


def register_opts(conf):
    conf.register_opts([token_opt] + _keystoneauth_opts(SERVICE_TYPE), group=GROUP)
    conf.register_opts(_keystoneauth_opts("network"), group=NEUTRON)
    conf.register_opts(cinder_opts + ks_loading.get_session_conf_options()
                       + ks_loading.get_auth_common_conf_options(), group=CINDER)
    conf.register_opts(ks_loading.get_session_conf_options() + _adapter_opts("image"),
                       group=GLANCE)
    conf.register_opts(service_user_opts + ks_loading.get_session_conf_options()
                       + ks_loading.get_auth_common_conf_options(), group=SERVICE_USER)


def sample_opts():
    """The options the sample configuration lists beyond the registered ones."""
    return [(group, ks_loading.get_auth_plugin_conf_options(SAMPLE_PLUGIN))
            for group in AUTH_GROUPS]
