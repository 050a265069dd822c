"""Every HTTP API as a WSGI application, for any WSGI server (uwsgi, mod_wsgi,
gunicorn)::

    novella.wsgi.compute:application     the Compute API (nova.conf)
    novella.wsgi.placement:application   Placement (placement.conf)
    novella.wsgi.image:application       the embedded image service (nova.conf)
    novella.wsgi.network:application     the embedded network service (nova.conf)
    novella.wsgi.volume:application      the embedded volume service (nova.conf)
    novella.wsgi.optimize:application    the Infrastructure Optimization API (nova.conf)

Importing a module reads its configuration and builds its application, so a
server that imports it in each worker gives each worker its own database
connections and transport; a missing option fails the import with a
``novella.cmd.serve.ConfigError`` that names it. The configuration files are
found as the reference's WSGI scripts find theirs:

- compute, image, network, volume, optimize: the files named in ``OS_NOVA_CONFIG_FILES``
  (separated by ``;``, default ``nova.conf``) in the directory
  ``OS_NOVA_CONFIG_DIR`` (default ``/etc/nova``);
- placement: ``placement.conf`` in ``OS_PLACEMENT_CONFIG_DIR`` (default
  ``/etc/placement``), or the file ``NOVELLA_PLACEMENT_CONFIG`` names.

A file that does not exist is skipped (the options' defaults apply).
"""
import os


def nova_config_files(environ=None):
    """The compute side's configuration files, from the environment."""
    env = os.environ if environ is None else environ
    directory = env.get("OS_NOVA_CONFIG_DIR", "/etc/nova")
    names = [n.strip() for n in env.get("OS_NOVA_CONFIG_FILES", "nova.conf").split(";")]
    paths = [os.path.join(directory, name) for name in names if name]
    return [path for path in paths if os.path.exists(path)]


def compute_side_application(build_name, *args):
    """Parse nova.conf as the environment says, check it, and build the application
    of ``novella.cmd.serve.<build_name>(*args)``."""
    from novella.cmd import serve
    from novella.conf import parse_args
    parse_args([], default_config_files=nova_config_files())
    return getattr(serve, build_name)(*args)()
