"""`novella manage bootstrap`: what an empty deployment needs before its first server.

Flavors ``m1.tiny`` to ``m1.xlarge`` (the reference's classic five), a public
``cirros`` image (a few bytes: the hosts are simulated) and the shared
network ``private`` (10.0.0.0/24) that a server asking for no network in
particular gets, and the external network ``public`` (172.24.4.0/24) that
floating IPs come from. Each is made only when missing, by name, so running
it again changes nothing and says so. `novella up` makes the same at start.
``[network_service] shared_network = False`` leaves the shared network out;
``default_subnet_pool`` adds a default subnet pool and makes ``public`` the
default external network (auto-allocated topologies, docs/network.md).
"""
import sqlalchemy as sa

from novella.context import get_admin_context
from novella.db import api_models as am

FLAVORS = [
    # flavorid, name, vcpus, memory_mb, root_gb
    ("1", "m1.tiny", 1, 512, 1),
    ("2", "m1.small", 1, 2048, 20),
    ("3", "m1.medium", 2, 4096, 40),
    ("4", "m1.large", 4, 8192, 80),
    ("5", "m1.xlarge", 8, 16384, 160),
]
IMAGE_NAME = "cirros"
IMAGE_DATA = b"simulated cirros image\n" * 64
NETWORK_NAME, NETWORK_CIDR = "private", "10.0.0.0/24"
PUBLIC_NAME, PUBLIC_CIDR = "public", "172.24.4.0/24"


def ensure_flavors(api_db, flavors=FLAVORS):
    """-> [(flavor name, created?)]: the ``flavors`` (those above by default) that no
    flavor has the id or name of."""
    out = []
    with api_db.session(write=True) as s:
        existing = {row for pair in s.execute(sa.select(am.Flavor.flavorid, am.Flavor.name))
                    for row in pair}
        for flavorid, name, vcpus, ram, disk in flavors:
            created = flavorid not in existing and name not in existing
            if created:
                s.add(am.Flavor(flavorid=flavorid, name=name, vcpus=vcpus, memory_mb=ram,
                                root_gb=disk))
            out.append((name, created))
    return out


def ensure_image(image_api):
    """-> (image, created?): the public image named ``cirros``, uploaded."""
    ctxt = get_admin_context()
    for image in image_api.list(ctxt, filters={"name": IMAGE_NAME}):
        if image["status"] == "active":
            return image, False
    image = image_api.create(ctxt, name=IMAGE_NAME, disk_format="qcow2",
                             container_format="bare", visibility="public")
    image_api.upload(ctxt, image["id"], IMAGE_DATA)
    return image_api.get(ctxt, image["id"]), True


def ensure_network(network_api):
    """-> (network, created?): the shared network ``private`` with its subnet."""
    existed = bool(network_api.list_networks(None, name=NETWORK_NAME))
    network = network_api.ensure_default_network(get_admin_context(), NETWORK_NAME, NETWORK_CIDR)
    return network, not existed


def ensure_public_network(network_api):
    """-> (network, created?): the external network ``public`` with its subnet."""
    for network in network_api.list_networks(None, name=PUBLIC_NAME):
        return network, False
    return network_api.create_network(get_admin_context(), PUBLIC_NAME, cidr=PUBLIC_CIDR,
                                      external=True, project_id="admin"), True


DEFAULT_POOL_NAME = "default-subnetpool-v4"


def ensure_auto_allocation(network_api, public, prefix, prefixlen=26):
    """-> (subnet pool, created?): the default IPv4 subnet pool (made of ``prefix`` if
    there is none), and ``public`` made the default external network if none is:
    what auto-allocated topologies need."""
    ctxt = get_admin_context()
    if not any(n.get("is_default") for n in network_api.list_networks(
            None, **{"router:external": True})):
        network_api.update_network(ctxt, public["id"], {"is_default": True})
    for pool in network_api.list_subnetpools(None):
        if pool["is_default"] and pool["ip_version"] == 4:
            return pool, False
    return network_api.create_subnetpool(ctxt, DEFAULT_POOL_NAME, [prefix],
                                         default_prefixlen=prefixlen, is_default=True,
                                         shared=False, project_id="admin"), True


def seed_networks(conf, network_api, say=None):
    """The shared network (unless ``[network_service] shared_network`` is False), the
    external network, and with ``default_subnet_pool`` the default pool: -> (shared
    network or None, external network)."""
    opts = conf.network_service
    network = None
    if opts.shared_network:
        network, created = ensure_network(network_api)
        if say:
            say(f"network {NETWORK_NAME:<10} {'created' if created else 'exists'} "
                f"({network['id']}, shared, {NETWORK_CIDR})")
    public, created = ensure_public_network(network_api)
    if say:
        say(f"network {PUBLIC_NAME:<10} {'created' if created else 'exists'} ({public['id']}, "
            f"external, {PUBLIC_CIDR})")
    if opts.default_subnet_pool:
        pool, created = ensure_auto_allocation(network_api, public, opts.default_subnet_pool,
                                               opts.default_subnet_pool_prefixlen)
        if say:
            say(f"pool    {pool['name']:<10} {'created' if created else 'exists'} "
                f"({pool['id']}, default, {', '.join(pool['prefixes'])})")
    return network, public


def bootstrap(conf, api_url, say=print):
    """Make what is missing; say what was made and what was there."""
    from novella.db import cells as cells_mod
    from novella.db.migrate import SchemaNotSynced
    from novella.embedded import services_from_conf
    from novella.cmd.manage_cli import CommandError, require_api
    api_db = cells_mod.database(require_api(api_url))
    try:
        image_api, network_api, _volume_api = services_from_conf(conf)
        flavors = ensure_flavors(api_db)
    except (SchemaNotSynced, sa.exc.ProgrammingError, sa.exc.OperationalError) as exc:
        raise CommandError(f"error: the API database is not ready ({type(exc).__name__}); "
                           "run `novella manage api_db sync` first") from None
    for name, created in flavors:
        say(f"flavor  {name:<10} {'created' if created else 'exists'}")
    image, created = ensure_image(image_api)
    say(f"image   {IMAGE_NAME:<10} {'created' if created else 'exists'} ({image['id']}, public)")
    network, public = seed_networks(conf, network_api, say)
    return {"image": image, "network": network, "public_network": public}


def add_command(groups):
    from novella.cmd.manage_cli import command

    def run(args, api_url):
        from novella.conf import CONF
        bootstrap(CONF, api_url)
    command(groups, "bootstrap", run,
            "Make the flavors m1.tiny to m1.xlarge, the public image cirros, the shared "
            "network private and the external network public that an empty deployment "
            "lacks; what exists already (by name) is left as it is.")
