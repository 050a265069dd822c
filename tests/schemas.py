"""Databases for tests that build the embedded image, network or volume service
directly: the services need their tables made first, as `novella manage
api_db sync` makes them in a deployment."""
from novella.db import migrate


def synced(url, *names):
    """Sync the named embedded services' schemas (default: all three) into ``url``; -> url."""
    for name in names or migrate.EMBEDDED:
        migrate.sync(name, url)
    return url
