"""`novella up --separate`'s pieces that need no servers: database names, the
virtual host fallback's error, and the supervisor's restarts."""
import sys
import time

import pytest

from novella.cmd import separate


def test_database_urls_name_each_database_on_the_server():
    assert separate.database_urls("postgresql://postgres@127.0.0.1:5432", "novella",
                                  ["api", "cell1"]) == {
        "api": "postgresql://postgres@127.0.0.1:5432/novella_api",
        "cell1": "postgresql://postgres@127.0.0.1:5432/novella_cell1"}
    assert separate.database_urls("mysql+pymysql://root:pw@127.0.0.1:3306/", "n", ["api"]) == {
        "api": "mysql+pymysql://root:pw@127.0.0.1:3306/n_api?charset=utf8mb4"}


def test_a_vhost_neither_rabbitmqctl_nor_the_management_api_can_make_says_what_to_run(
        monkeypatch):
    monkeypatch.setattr(separate.shutil, "which", lambda name: None)
    # Nothing listens on the management port of 127.0.0.2.
    with pytest.raises(separate.SetupError) as err:
        separate.ensure_vhost("rabbit://guest:guest@127.0.0.2:5672/cell7")
    message = str(err.value)
    assert "rabbitmqctl is not on PATH" in message
    assert message.endswith("rabbitmqctl add_vhost cell7 && rabbitmqctl set_permissions "
                            "-p cell7 guest '.*' '.*' '.*'")


def test_the_supervisor_starts_a_process_that_exits_again_and_says_where_its_log_is(tmp_path):
    said = []
    sup = separate.Supervisor(str(tmp_path / "logs"), said.append)
    sup.start("brief", [sys.executable, "-c", "print('ran')"])
    first = sup.procs["brief"]
    first.wait(30)
    sup.check()  # noticed: restart due in 1 s
    assert said == [f"brief exited with status 0; starting it again in 1 s "
                    f"(log: {tmp_path / 'logs' / 'brief.log'})"]
    assert sup.procs["brief"] is first
    end = time.monotonic() + 30
    while sup.procs["brief"] is first and time.monotonic() < end:
        time.sleep(0.2)
        sup.check()
    second = sup.procs["brief"]
    assert second is not first
    second.wait(30)
    sup.check()  # it keeps exiting: the delay doubles
    assert said[-1].startswith("brief exited with status 0; starting it again in 2 s")
    sup.stop()
    assert (tmp_path / "logs" / "brief.log").read_text() == "ran\nran\n"


def _args(tmp_path, keystone):
    import argparse
    return argparse.Namespace(data_dir=str(tmp_path), cells=1, hosts_per_cell=1,
                              keystone=keystone, config_file=None, host="127.0.0.1",
                              port_base=20000, database="postgresql://postgres@127.0.0.1:5432",
                              transport="rabbit://guest:guest@127.0.0.1:5672/", name="n")


def _nova_conf(tmp_path):
    from oslo_config import cfg

    from novella import conf as conf_mod
    conf = cfg.ConfigOpts()
    for module in conf_mod.MODULES:
        module.register_opts(conf)
    conf([], default_config_files=[str(tmp_path / "etc" / "nova.conf")])
    return conf


@pytest.mark.parametrize("keystone", [False, True])
def test_nova_conf_has_the_compute_side_call_the_services_over_http(tmp_path, keystone):
    """The Compute API, conductor and compute hosts read nova.conf: it makes them
    build the network, volume and image clients over HTTP, not over the databases."""
    from novella import clients
    from novella.image.http_client import ImageHTTPClient
    from novella.network.http_client import NetworkHTTPClient
    from novella.volume.http_client import VolumeHTTPClient
    separate.Deployment(_args(tmp_path, keystone), say=lambda *_: None).write_configs()
    conf = _nova_conf(tmp_path)
    made = clients.service_clients(conf, lambda: pytest.fail("no database client"))
    assert [type(c) for c in made] == [ImageHTTPClient, NetworkHTTPClient, VolumeHTTPClient]
    image, network, volume = made
    if not keystone:
        assert (network.http.endpoint(), volume.http.endpoint(), image.http.endpoint()) == (
            "http://127.0.0.1:20004", "http://127.0.0.1:20005/v3", "http://127.0.0.1:20003")
        assert network.http.service_auth is None and network.http.service_user_auth is None
        return
    for group in ("neutron", "cinder", "service_user"):
        opts = getattr(conf, group)
        assert (opts.auth_type, opts.username, opts.auth_url) == (
            "password", "nova", "http://127.0.0.1:20000/v3")
    assert conf.service_user.send_service_user_token
    assert (conf.neutron.region_name, conf.cinder.os_region_name) == ("RegionOne",) * 2
    # Every request also carries the nova user's token (X-Service-Token).
    assert all(c.http.service_user_auth is not None for c in made)
    assert network.http.service_auth is not None and image.http.service_auth is not None
