"""`novella manage bootstrap` makes the flavors, the image and the network an empty
deployment needs, once: a second run makes nothing more."""
import subprocess
import sys

import sqlalchemy as sa

from novella.db import api_models as am
from novella.db import cells as cells_mod
from novella.image.api import ImageAPI
from novella.network.api import NetworkAPI


def _manage(conf, *args):
    return subprocess.run([sys.executable, "-m", "novella.cmd.main", "manage", "--config-file",
                           str(conf), *args], capture_output=True, text=True, timeout=120)


def _state(url, data_dir):
    with cells_mod.database(url).session() as s:
        flavors = sorted(s.execute(sa.select(am.Flavor.flavorid, am.Flavor.name,
                                             am.Flavor.memory_mb)).all())
    images = [(i["name"], i["status"], i["visibility"], i["size"])
              for i in ImageAPI(url, data_dir).list(None)]
    network = NetworkAPI(url)
    nets = [(n["name"], n["shared"], [network.get_subnet(None, sid)["cidr"] for sid in n["subnets"]])
            for n in network.list_networks(None)]
    return flavors, images, nets


def test_bootstrap_makes_what_is_missing_once(tmp_path):
    url = f"sqlite:///{tmp_path}/api.db"
    conf = tmp_path / "nova.conf"
    conf.write_text(f"[DEFAULT]\nstate_path = {tmp_path}\n[api_database]\nconnection = {url}\n")
    before = _manage(conf, "bootstrap")
    assert before.returncode == 1
    assert "run `novella manage api_db sync` first" in before.stdout
    assert _manage(conf, "api_db", "sync").returncode == 0

    first = _manage(conf, "bootstrap")
    assert first.returncode == 0, first.stderr
    assert first.stdout.count(" created") == 8
    state = _state(url, str(tmp_path / "images"))
    assert state == (
        [("1", "m1.tiny", 512), ("2", "m1.small", 2048), ("3", "m1.medium", 4096),
         ("4", "m1.large", 8192), ("5", "m1.xlarge", 16384)],
        [("cirros", "active", "public", 23 * 64)],
        [("private", True, ["10.0.0.0/24"]), ("public", False, ["172.24.4.0/24"])])

    second = _manage(conf, "bootstrap")
    assert second.returncode == 0, second.stderr
    assert " created" not in second.stdout and second.stdout.count(" exists") == 8
    assert _state(url, str(tmp_path / "images")) == state
