"""`novella manage bootstrap`: what an empty deployment needs before its first server.

Flavors ``m1.tiny`` to ``m1.xlarge`` (the reference's classic five), a public
``cirros`` image (a few bytes: the hosts are simulated) and the shared
network ``private`` (10.0.0.0/24) that a server asking for no network in
particular gets, and the external network ``public`` (172.24.4.0/24) that
floating IPs come from. Each is made only when missing, by name, so running
it again changes nothing and says so. `novella up` makes the same at start.
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


def ensure_flavors(api_db):
    """-> [(flavor name, created?)]: the flavors above that no flavor has the id or name of."""
    out = []
    with api_db.session(write=True) as s:
        existing = {row for pair in s.execute(sa.select(am.Flavor.flavorid, am.Flavor.name))
                    for row in pair}
        for flavorid, name, vcpus, ram, disk in FLAVORS:
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


def bootstrap(conf, api_url, say=print):
    """Make what is missing; say what was made and what was there."""
    from novella.db import cells as cells_mod
    from novella.db.migrate import SchemaNotSynced
    from novella.embedded import services_from_conf
    from novella.cmd.manage import CommandError, require_api
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
    network, created = ensure_network(network_api)
    say(f"network {NETWORK_NAME:<10} {'created' if created else 'exists'} ({network['id']}, "
        f"shared, {NETWORK_CIDR})")
    public, created = ensure_public_network(network_api)
    say(f"network {PUBLIC_NAME:<10} {'created' if created else 'exists'} ({public['id']}, "
        f"external, {PUBLIC_CIDR})")
    return {"image": image, "network": network, "public_network": public}


def add_command(groups):
    from novella.cmd.manage import command

    def run(args, api_url):
        from novella.conf import CONF
        bootstrap(CONF, api_url)
    command(groups, "bootstrap", run,
            "flavors, an image and a network for an empty deployment (idempotent)")
