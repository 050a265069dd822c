"""`novella up --separate`: every service in a process of its own, on the machine's
database server and RabbitMQ, optionally behind the real Keystone; for rehearsals
and tests of a deployment laid out as operators lay theirs (docs/deploy.md does
the same by hand).

In order, each step idempotent so that a second run over the same data
directory starts the same deployment again:

1. the configuration files, in ``DATA_DIR/etc``: ``nova.conf`` (API, conductor,
   scheduler, image, network, volume, optimize; its ``[neutron]``, ``[cinder]``,
   ``[glance]`` and, with ``--keystone``, ``[service_user]`` have the Compute API,
   conductor and compute hosts call those services' HTTP APIs), ``cellN.conf``
   (what a cell's compute hosts read after nova.conf), ``placement.conf``,
   ``policy.yaml`` and, with ``--keystone``, ``keystone.conf`` and Keystone's
   ``gunicorn.conf.py``;
2. the databases (``NAME_api``, ``NAME_cell0``, ``NAME_cellN``,
   ``NAME_placement``, ``NAME_keystone``) on the ``--database`` server, and the
   RabbitMQ virtual hosts (``NAME``, ``NAME_cellN``) of the ``--transport``
   broker, with ``rabbitmqctl`` or else the management API;
3. with ``--keystone``: ``keystone-manage db_sync``, ``fernet_setup``,
   ``credential_setup`` and ``bootstrap``, Keystone under gunicorn, then the
   users ``demo`` (member of project demo), ``nova`` and ``placement``
   (service users) and the catalog;
4. the schemas and cells (``api_db sync``, ``map_cell0``, ``create_cell``);
5. the services, each a ``novella serve`` process logging to
   ``DATA_DIR/logs/NAME.log``; the compute hosts are mapped
   (``discover_hosts``) once they have registered; ``novella manage
   bootstrap`` makes the flavors, image and network;
6. ``DATA_DIR/clouds.yaml`` (clouds ``novella-admin`` and ``novella-demo``).

Then it watches the processes until SIGINT or SIGTERM: one that exits is
started again (after 1 s, doubling up to 30 s while it keeps dying) and the
line saying so names its log.
"""
import concurrent.futures
import json
import os
import shutil
import signal
import subprocess
import sys
import time
import urllib.parse
import uuid

import requests
import sqlalchemy as sa

from novella.endpoints import PORTS, SERVICES

REGION = "RegionOne"
HTTP_APIS = ("placement", "compute", "image", "network", "volume", "optimize")


class SetupError(Exception):
    """A step cannot be done (the message says what to do)."""


# -- databases and vhosts --------------------------------------------------------------------

def database_urls(server_url, prefix, names):
    """{name: URL of database PREFIX_name on the server ``server_url`` names}."""
    url = sa.engine.make_url(server_url)
    query = {"charset": "utf8mb4"} if url.get_backend_name() == "mysql" else {}
    return {name: url.set(database=f"{prefix}_{name}", query=query).render_as_string(
        hide_password=False) for name in names}


def create_databases(server_url, urls):
    """Create each database of ``urls`` that does not exist yet; -> names created."""
    url = sa.engine.make_url(server_url)
    backend = url.get_backend_name()
    if backend == "postgresql":
        admin_url = url.set(database=url.database or "postgres")
        exists_sql = "SELECT 1 FROM pg_database WHERE datname = :name"
        create = 'CREATE DATABASE "{}"'
    elif backend == "mysql":
        admin_url = url.set(database=None)
        exists_sql = "SELECT 1 FROM information_schema.schemata WHERE schema_name = :name"
        create = "CREATE DATABASE `{}` CHARACTER SET utf8mb4"
    else:
        raise SetupError(f"--database must name a PostgreSQL or MySQL/MariaDB server, "
                         f"not {backend}")
    engine = sa.create_engine(admin_url, isolation_level="AUTOCOMMIT")
    created = []
    try:
        with engine.connect() as conn:
            for db_url in urls.values():
                name = sa.engine.make_url(db_url).database
                if conn.execute(sa.text(exists_sql), {"name": name}).first() is None:
                    conn.exec_driver_sql(create.format(name))
                    created.append(name)
    except sa.exc.OperationalError as exc:
        raise SetupError(f"cannot create the databases on {url.render_as_string()}: "
                         f"{exc.orig}") from None
    finally:
        engine.dispose()
    return created


def ensure_vhost(transport_url):
    """The URL's RabbitMQ virtual host, with full rights for its user: with
    ``rabbitmqctl`` when it is here, else through the management API (port 15672)."""
    from novella.rpc import rabbit
    if shutil.which("rabbitmqctl"):
        try:
            return rabbit.ensure_vhost(transport_url), "rabbitmqctl"
        except subprocess.CalledProcessError as exc:
            why = (exc.stderr or b"").decode(errors="replace").strip().splitlines()[-1:]
            why = f"rabbitmqctl failed ({' '.join(why)})"
    else:
        why = "rabbitmqctl is not on PATH"
    parts = urllib.parse.urlsplit(transport_url)
    vhost = rabbit.vhost_of(transport_url)
    user = urllib.parse.unquote(parts.username or "guest")
    auth = (user, urllib.parse.unquote(parts.password or "guest"))
    api = f"http://{parts.hostname}:15672/api"
    quoted = urllib.parse.quote(vhost, safe="")
    try:
        r = requests.put(f"{api}/vhosts/{quoted}", auth=auth, timeout=10)
        r.raise_for_status()
        requests.put(f"{api}/permissions/{quoted}/{urllib.parse.quote(user, safe='')}",
                     auth=auth, timeout=10,
                     json={"configure": ".*", "write": ".*", "read": ".*"}).raise_for_status()
    except requests.RequestException as exc:
        raise SetupError(
            f"cannot create the RabbitMQ virtual host {vhost!r}: {why}, and the management "
            f"API at {api} did not take it ({exc}). Create it on the broker's machine, then "
            f"run this again: rabbitmqctl add_vhost {vhost} && rabbitmqctl set_permissions "
            f"-p {vhost} {user} '.*' '.*' '.*'") from None
    return vhost, "the management API"


def with_vhost(transport_url, vhost):
    parts = urllib.parse.urlsplit(transport_url)
    return urllib.parse.urlunsplit((parts.scheme, parts.netloc, "/" + vhost, "", ""))


# -- Keystone ----------------------------------------------------------------------------------

def keystone_manage():
    exe = os.path.join(os.path.dirname(sys.executable), "keystone-manage")
    exe = exe if os.path.exists(exe) else shutil.which("keystone-manage")
    if not exe:
        raise SetupError("--keystone needs the keystone package: pip install keystone")
    return exe


class Keystone:
    """The real Keystone: its configuration, database, keys, and gunicorn."""

    def __init__(self, etc, db_url, url, admin_password, log):
        self.dir = os.path.join(etc, "keystone")
        self.conf = os.path.join(self.dir, "keystone.conf")
        self.db_url, self.url, self.admin_password, self.log = db_url, url, admin_password, log

    def write_config(self, bind):
        os.makedirs(self.dir, exist_ok=True)
        with open(self.conf, "w") as f:
            f.write(f"[database]\nconnection = {self.db_url}\n"
                    "[token]\nprovider = fernet\n"
                    f"[fernet_tokens]\nkey_repository = {self.dir}/fernet-keys\n"
                    f"[fernet_receipts]\nkey_repository = {self.dir}/fernet-keys\n"
                    f"[credential]\nkey_repository = {self.dir}/credential-keys\n")
        # gunicorn reads ./gunicorn.conf.py by itself: Keystone parses the process's
        # command line as its own options, so the command line must stay bare.
        with open(os.path.join(self.dir, "gunicorn.conf.py"), "w") as f:
            f.write('wsgi_app = "keystone.wsgi.api:application"\n'
                    f'bind = "{bind}"\nworkers = 1\nthreads = 4\n'
                    f'raw_env = ["OS_KEYSTONE_CONFIG_FILES={self.conf}"]\n')
        return [self.conf, os.path.join(self.dir, "gunicorn.conf.py")]

    def setup(self):
        """db_sync, the keys (once) and bootstrap (idempotent)."""
        me = os.getuid(), os.getgid()
        import grp
        import pwd
        user, group = pwd.getpwuid(me[0]).pw_name, grp.getgrgid(me[1]).gr_name
        steps = [["db_sync"]]
        for repo, step in (("fernet-keys", "fernet_setup"), ("credential-keys", "credential_setup")):
            path = os.path.join(self.dir, repo)
            if not (os.path.isdir(path) and os.listdir(path)):
                os.makedirs(path, mode=0o700, exist_ok=True)
                steps.append([step, "--keystone-user", user, "--keystone-group", group])
        steps.append(["bootstrap", "--bootstrap-password", self.admin_password,
                      "--bootstrap-admin-url", f"{self.url}/v3",
                      "--bootstrap-internal-url", f"{self.url}/v3",
                      "--bootstrap-public-url", f"{self.url}/v3",
                      "--bootstrap-region-id", REGION])
        for step in steps:
            self.log(f"keystone-manage {step[0]}")
            ran = subprocess.run([keystone_manage(), "--config-file", self.conf, *step],
                                 capture_output=True, text=True, timeout=300)
            if ran.returncode:
                raise SetupError(f"keystone-manage {step[0]} failed:\n{ran.stderr[-2000:]}")

    def command(self):
        return [sys.executable, "-m", "gunicorn"], self.dir


class Catalog:
    """Users, projects, roles and endpoints, set through Keystone's API as its admin."""

    def __init__(self, url, admin_password):
        from keystoneauth1 import session
        from keystoneauth1.identity import v3
        auth = v3.Password(auth_url=f"{url}/v3", username="admin", password=admin_password,
                           project_name="admin", user_domain_id="default",
                           project_domain_id="default")
        self.http = session.Session(auth=auth)
        self.url = f"{url}/v3"

    def _find_or_create(self, kind, name, body, **query):
        plural = f"{kind}s" if kind != "policy" else "policies"
        found = self.http.get(f"{self.url}/{plural}", params=dict(name=name, **query)).json()[plural]
        if found:
            return found[0]
        return self.http.post(f"{self.url}/{plural}", json={kind: dict(body, name=name)}).json()[kind]

    def project(self, name):
        return self._find_or_create("project", name, {"domain_id": "default"})

    def role(self, name):
        return self._find_or_create("role", name, {})

    def user(self, name, password, project, roles):
        """The user, with ``password`` (set again each time) and ``roles`` on ``project``."""
        project_id = self.project(project)["id"]
        user = self._find_or_create("user", name, {"domain_id": "default", "password": password,
                                                   "default_project_id": project_id},
                                    domain_id="default")
        self.http.patch(f"{self.url}/users/{user['id']}", json={"user": {"password": password}})
        for role in roles:
            self.http.put(f"{self.url}/projects/{project_id}/users/{user['id']}/roles/"
                          f"{self.role(role)['id']}")
        return user

    def service(self, service_type, name, url):
        """The service and its public and internal endpoints at ``url``."""
        services = self.http.get(f"{self.url}/services", params={"type": service_type}).json()
        service = next(iter(services["services"]), None) or self.http.post(
            f"{self.url}/services", json={"service": {"type": service_type, "name": name}}
        ).json()["service"]
        endpoints = self.http.get(f"{self.url}/endpoints",
                                  params={"service_id": service["id"]}).json()["endpoints"]
        for interface in ("public", "internal"):
            mine = [e for e in endpoints if e["interface"] == interface]
            if mine and mine[0]["url"] != url:
                self.http.patch(f"{self.url}/endpoints/{mine[0]['id']}",
                                json={"endpoint": {"url": url}})
            elif not mine:
                self.http.post(f"{self.url}/endpoints", json={"endpoint": {
                    "service_id": service["id"], "interface": interface, "url": url,
                    "region_id": REGION}})


# -- configuration files ----------------------------------------------------------------------

def ini(sections):
    """[(section, {option: value})] as an ini file's text (None values left out)."""
    out = []
    for section, options in sections:
        out.append(f"[{section}]")
        out += [f"{k} = {v}" for k, v in options.items() if v is not None]
        out.append("")
    return "\n".join(out)


def keystone_section(identity_url, user, password):
    """The options of a service user authenticating to Keystone (keystoneauth's password plugin)."""
    return {"auth_url": f"{identity_url}/v3", "auth_type": "password", "username": user,
            "password": password, "project_name": "service", "user_domain_name": "Default",
            "project_domain_name": "Default"}


# -- processes ------------------------------------------------------------------------------

class Supervisor:
    """Processes started by name, started again when they exit."""

    FORGIVEN_AFTER = 60  # seconds up after which a process's back-off starts over

    def __init__(self, log_dir, say):
        self.log_dir, self.say = log_dir, say
        self.procs, self.specs = {}, {}
        self.started, self.backoff, self.restart_at = {}, {}, {}
        os.makedirs(log_dir, exist_ok=True)

    def log_path(self, name):
        return os.path.join(self.log_dir, f"{name}.log")

    def start(self, name, cmd, cwd=None):
        self.specs[name] = (cmd, cwd)
        self._spawn(name)

    def _spawn(self, name):
        cmd, cwd = self.specs[name]
        with open(self.log_path(name), "a") as log:
            self.procs[name] = subprocess.Popen(cmd, cwd=cwd, stdout=log, stderr=subprocess.STDOUT,
                                                stdin=subprocess.DEVNULL,
                                                env=dict(os.environ, PYTHONUNBUFFERED="1"))
        self.started[name] = time.monotonic()

    def check(self):
        """Note each process that exited; start it again once its back-off has passed."""
        now = time.monotonic()
        for name, proc in self.procs.items():
            if proc.poll() is None:
                continue
            if name not in self.restart_at:
                if now - self.started[name] > self.FORGIVEN_AFTER:
                    self.backoff.pop(name, None)
                delay = self.backoff[name] = min(self.backoff.get(name, 0.5) * 2, 30)
                self.restart_at[name] = now + delay
                self.say(f"{name} exited with status {proc.returncode}; starting it again in "
                         f"{delay:.0f} s (log: {self.log_path(name)})")
            elif now >= self.restart_at[name]:
                del self.restart_at[name]
                self._spawn(name)

    def stop(self):
        for proc in self.procs.values():
            if proc.poll() is None:
                proc.terminate()
        for proc in self.procs.values():
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def _wait(what, ready, timeout, supervisor=None):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if ready():
            return
        if supervisor is not None:
            supervisor.check()
        time.sleep(0.5)
    raise SetupError(f"timed out waiting for {what}")


def _answers(url):
    try:
        return requests.get(url, timeout=3).status_code < 500
    except requests.RequestException:
        return False


# -- the deployment ----------------------------------------------------------------------------

class Deployment:
    def __init__(self, args, say=print):
        self.say = say
        self.data_dir = os.path.abspath(args.data_dir)
        self.etc = os.path.join(self.data_dir, "etc")
        self.cells = [f"cell{i}" for i in range(1, args.cells + 1)]
        self.hosts = {cell: [f"{cell}-host{j}" for j in range(1, args.hosts_per_cell + 1)]
                      for cell in self.cells}
        self.keystone_on = args.keystone
        self.extra_configs = [os.path.abspath(p) for p in args.config_file or ()]
        bind = args.host
        self.urls = {name: f"http://{bind}:{(args.port_base + offset) if args.port_base else port}"
                     for name, offset, port in PORTS}
        self.binds = {name: url.split("//", 1)[1] for name, url in self.urls.items()}
        names = ["api", "cell0", *self.cells, "placement"] + (["keystone"] if args.keystone else [])
        self.database = args.database
        self.db = database_urls(args.database, args.name, names)
        self.transports = {"super": with_vhost(args.transport, args.name),
                           **{c: with_vhost(args.transport, f"{args.name}_{c}") for c in self.cells}}
        self.passwords = self._passwords()
        self.supervisor = Supervisor(os.path.join(self.data_dir, "logs"), say)

    def _passwords(self):
        os.makedirs(self.etc, exist_ok=True)
        path = os.path.join(self.data_dir, "passwords.json")
        if os.path.exists(path):
            with open(path) as f:
                return json.load(f)
        passwords = {u: uuid.uuid4().hex[:16] for u in ("admin", "demo", "nova", "placement")}
        with open(os.open(path, os.O_WRONLY | os.O_CREAT, 0o600), "w") as f:
            json.dump(passwords, f)
        return passwords

    def endpoint(self, name):
        return self.urls[name] + SERVICES[name][2]

    # 1. configuration files
    def write_configs(self):
        common = [("DEFAULT", {"transport_url": self.transports["super"],
                               "state_path": self.data_dir}),
                  ("api_database", {"connection": self.db["api"]}),
                  ("oslo_policy", {"policy_file": "policy.yaml"}),
                  ("filter_scheduler", {"cross_cell_move_weight_multiplier": -1000000})]
        if self.keystone_on:
            auth = [("api", {"auth_strategy": "keystone"}),
                    ("keystone_authtoken", {
                        "www_authenticate_uri": f"{self.urls['identity']}/v3",
                        **keystone_section(self.urls["identity"], "nova", self.passwords["nova"]),
                        "service_token_roles_required": "true"}),
                    ("placement", {**keystone_section(self.urls["identity"], "nova",
                                                      self.passwords["nova"]),
                                   "region_name": REGION, "valid_interfaces": "internal"}),
                    *self.service_sections()]
            placement_auth = [("api", {"auth_strategy": "keystone"}),
                              ("keystone_authtoken", {
                                  "www_authenticate_uri": f"{self.urls['identity']}/v3",
                                  **keystone_section(self.urls["identity"], "placement",
                                                     self.passwords["placement"]),
                                  "service_token_roles_required": "true"})]
        else:
            auth = [("api", {"auth_strategy": "noauth2"}),
                    ("placement", {"endpoint_override": self.urls["placement"]}),
                    *self.service_sections()]
            placement_auth = [("api", {"auth_strategy": "noauth2"})]
        files = {"nova.conf": ini(common + auth),
                 "placement.conf": ini([("placement_database", {"connection": self.db["placement"]}),
                                        ("oslo_policy", {"policy_file": "placement-policy.yaml"})]
                                       + placement_auth),
                 # Moves across cells are for administrators (the reference's default
                 # forbids them to everyone).
                 "policy.yaml": '"compute:servers:resize:cross_cell": "rule:admin_api"\n',
                 "placement-policy.yaml": "{}\n"}
        for cell in self.cells:
            files[f"{cell}.conf"] = ini([("DEFAULT", {"transport_url": self.transports[cell]}),
                                         ("database", {"connection": self.db[cell]})])
        written = []
        for name, text in files.items():
            path = os.path.join(self.etc, name)
            with open(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), "w") as f:
                f.write(text)
            written.append(path)
        if self.keystone_on:
            self.keystone = Keystone(self.etc, self.db["keystone"], self.urls["identity"],
                                     self.passwords["admin"], lambda m: self.say("  " + m))
            written += self.keystone.write_config(self.binds["identity"])
        self.say("Configuration files:")
        for path in written:
            self.say(f"  {path}")

    def service_sections(self):
        """How the Compute API, conductor and compute hosts call the network, volume and
        image services' HTTP APIs: with Keystone, as the ``nova`` service user finding
        them in the catalog, sending its token beside the user's (``[service_user]``);
        without, at their endpoints with noauth2 tokens."""
        if not self.keystone_on:
            return [("neutron", {"endpoint_override": self.urls["network"]}),
                    ("cinder", {"endpoint_template": self.endpoint("volume")}),
                    ("glance", {"endpoint_override": self.urls["image"]})]
        nova = keystone_section(self.urls["identity"], "nova", self.passwords["nova"])
        return [("neutron", {**nova, "region_name": REGION, "valid_interfaces": "internal"}),
                ("cinder", {**nova, "os_region_name": REGION,
                            "catalog_info": "volumev3::internalURL"}),
                ("glance", {"region_name": REGION, "valid_interfaces": "internal"}),
                ("service_user", {**nova, "send_service_user_token": "true"})]

    def conf_args(self, *names):
        args = []
        for name in names:
            args += ["--config-file", os.path.join(self.etc, name)]
        for path in self.extra_configs:
            args += ["--config-file", path]
        return args

    # 2. databases and vhosts
    def create_backends(self):
        created = create_databases(self.database, self.db)
        self.say(f"Databases on {sa.engine.make_url(self.database).render_as_string()}: "
                 + ", ".join(sa.engine.make_url(u).database + (" (created)" if
                             sa.engine.make_url(u).database in created else " (exists)")
                             for u in self.db.values()))
        for url in self.transports.values():
            vhost, how = ensure_vhost(url)
            self.say(f"RabbitMQ virtual host {vhost} (with {how})")

    # 3. Keystone
    def start_keystone(self):
        self.say("Keystone:")
        self.keystone.setup()
        cmd, cwd = self.keystone.command()
        self.supervisor.start("keystone", cmd, cwd=cwd)
        _wait("Keystone", lambda: _answers(f"{self.urls['identity']}/v3"), 120, self.supervisor)
        catalog = Catalog(self.urls["identity"], self.passwords["admin"])
        catalog.user("demo", self.passwords["demo"], "demo", ["member", "reader"])
        for user in ("nova", "placement"):
            catalog.user(user, self.passwords[user], "service", ["admin", "service"])
        for name in HTTP_APIS:
            service_type, service_name, _path = SERVICES[name]
            catalog.service(service_type, service_name, self.endpoint(name))
        self.say("  users admin, demo (member of demo), nova and placement (service); "
                 "catalog: " + ", ".join(SERVICES[n][0] for n in HTTP_APIS))

    # 4. schemas and cells
    def setup_cells(self):
        from novella.cmd import manage
        manage.api_db_sync(self.db["api"])  # with the image, network and volume services' tables
        manage.map_cell0(self.db["api"], self.db["cell0"])
        mapped = {c.name for c in manage.list_cells(self.db["api"])}
        for cell in self.cells:
            if cell not in mapped:
                manage.create_cell(self.db["api"], cell, self.transports[cell], self.db[cell])
        manage.cell_db_sync(self.db["api"])
        self.say("Cells: cell0, " + ", ".join(self.cells))

    def bootstrap(self):
        """`novella manage bootstrap`, over the configuration the services read."""
        from oslo_config import cfg

        from novella import conf as conf_mod
        from novella.cmd import manage_bootstrap
        conf = cfg.ConfigOpts()
        for module in conf_mod.MODULES:
            module.register_opts(conf)
        conf([], project="nova", default_config_files=self.conf_args("nova.conf")[1::2])
        manage_bootstrap.bootstrap(conf, self.db["api"], say=self.say)

    # 5. services
    def start_services(self):
        serve = [sys.executable, "-m", "novella.cmd.main", "serve"]
        one = ["--workers", "1"]
        self.supervisor.start("placement", serve + ["placement", *self.conf_args("placement.conf"),
                                                    "--bind", self.binds["placement"], *one])
        _wait("Placement", lambda: _answers(self.urls["placement"]), 120, self.supervisor)
        self.supervisor.start("api", serve + ["api", *self.conf_args("nova.conf"),
                                              "--bind", self.binds["compute"], *one])
        for name in ("image", "network", "volume", "optimize"):
            self.supervisor.start(name, serve + [name, *self.conf_args("nova.conf"),
                                                 "--bind", self.binds[name], *one])
        self.supervisor.start("conductor", serve + ["conductor", *self.conf_args("nova.conf")])
        self.supervisor.start("scheduler", serve + ["scheduler", *self.conf_args("nova.conf")])
        for cell, hosts in self.hosts.items():
            for host in hosts:
                self.supervisor.start(host, serve + [
                    "compute", *self.conf_args("nova.conf", f"{cell}.conf"), "--host", host])
        for name in ("compute", "image", "network", "volume", "optimize"):
            _wait(f"the {name} API", lambda name=name: _answers(self.urls[name]), 120,
                  self.supervisor)
        self._map_hosts()
        self.bootstrap()

    def _map_hosts(self):
        from novella.cmd import manage
        from novella.db import cell_models as cm
        from novella.db import cells as cells_mod

        def registered():
            for cell, hosts in self.hosts.items():
                with cells_mod.database(self.db[cell]).session() as s:
                    if s.scalar(sa.select(sa.func.count()).select_from(cm.ComputeNode)) < len(hosts):
                        return False
            return True
        _wait("the compute hosts to register", registered, 180, self.supervisor)
        manage.discover_hosts(self.db["api"])

    # 6. clouds.yaml
    def write_clouds_yaml(self):
        path = os.path.join(self.data_dir, "clouds.yaml")
        if not self.keystone_on:
            return None
        with open(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), "w") as f:
            f.write("clouds:\n")
            for user in ("admin", "demo"):
                f.write(f"  novella-{user}:\n    auth:\n"
                        f"      auth_url: {self.urls['identity']}/v3\n"
                        f"      username: {user}\n      password: {self.passwords[user]}\n"
                        f"      project_name: {user}\n      user_domain_name: Default\n"
                        "      project_domain_name: Default\n"
                        f"    region_name: {REGION}\n    identity_api_version: 3\n")
        return path

    def up(self):
        self.write_configs()
        self.create_backends()
        # Keystone's setup and the schemas are independent: one waits on the other's I/O.
        with concurrent.futures.ThreadPoolExecutor(1) as pool:
            keystone = pool.submit(self.start_keystone) if self.keystone_on else None
            self.setup_cells()
            if keystone:
                keystone.result()
        self.start_services()
        clouds = self.write_clouds_yaml()
        self.say("Novella is up, every service in a process of its own. Endpoints:")
        for name, _offset, _port in PORTS:
            if name in HTTP_APIS or (name == "identity" and self.keystone_on):
                self.say(f"  {name:<10} {self.endpoint(name)}")
        self.say(f"Logs: {self.supervisor.log_dir}/<service>.log")
        if clouds:
            self.say(f"For the openstack command (clouds novella-admin and novella-demo, a "
                     f"member):\n  export OS_CLIENT_CONFIG_FILE={clouds} OS_CLOUD=novella-admin")
        else:
            self.say("No identity service (add --keystone for the openstack command): the "
                     "APIs trust the X-Auth-Token header as user:project (noauth2), e.g.\n"
                     f"  curl -H 'X-Auth-Token: admin:admin' {self.endpoint('compute')}/servers")
        self.say("Stop with Ctrl-C.")


def main(args):
    if not args.database or not args.transport:
        sys.exit("error: --separate needs --database (a PostgreSQL or MySQL server URL, e.g. "
                 "postgresql://postgres@127.0.0.1:5432) and --transport (e.g. "
                 "rabbit://guest:guest@127.0.0.1:5672/)")
    say = (lambda msg: print(msg, flush=True))
    deployment = Deployment(args, say)

    def stop(*_):
        raise KeyboardInterrupt
    signal.signal(signal.SIGTERM, stop)
    try:
        deployment.up()
        while True:
            deployment.supervisor.check()
            time.sleep(1)
    except SetupError as exc:
        deployment.supervisor.stop()
        sys.exit(f"error: {exc}")
    except KeyboardInterrupt:
        say("Stopping ...")
        deployment.supervisor.stop()
