"""Subnet pools of the embedded network service (Neutron's subnet_allocation and
default-subnetpools extensions).

A pool holds prefixes of one IP version; a subnet asked of it
(``subnetpool_id``, optionally ``prefixlen``; or ``use_default_subnetpool``)
gets the lowest free block of that length (``default_prefixlen`` unless
asked) in the pool's prefixes: free meaning overlapping no subnet already cut
from the pool. At most one pool per IP version is the default one
(``is_default``, set by an administrator): auto-allocated subnets come from it.
A pool with subnets cannot be deleted (409).
"""
import ipaddress
import uuid

import sqlalchemy as sa

from novella.db.timestamps import isotime
from novella.network import models

LIMITS = {4: 32, 6: 128}
DEFAULT_MIN = {4: 8, 6: 64}


class SubnetPoolError(Exception):
    code = 400


class SubnetPoolNotFound(SubnetPoolError):
    code = 404


class SubnetPoolInUse(SubnetPoolError):
    code = 409


class SubnetAllocationError(SubnetPoolError):
    code = 409


def _int(name, value):
    if isinstance(value, bool):
        raise SubnetPoolError(f"Invalid input for {name}: '{value}' is not an integer.")
    try:
        return int(value)
    except (TypeError, ValueError):
        raise SubnetPoolError(f"Invalid input for {name}: '{value}' is not an integer.") \
            from None


class SubnetPoolMixin:
    """Mixed into ``NetworkAPI`` (``self.db``)."""

    @staticmethod
    def _pool_dict(p):
        return {"id": p.id, "name": p.name, "description": p.description,
                "project_id": p.project_id, "tenant_id": p.project_id,
                "ip_version": p.ip_version, "prefixes": list(p.prefixes),
                "default_prefixlen": p.default_prefixlen, "min_prefixlen": p.min_prefixlen,
                "max_prefixlen": p.max_prefixlen, "shared": p.shared,
                "is_default": p.is_default, "address_scope_id": None, "default_quota": None,
                "tags": [], "revision_number": 1, "created_at": isotime(p.created_at),
                "updated_at": isotime(p.updated_at or p.created_at)}

    def _pool(self, s, ctxt, pool_id):
        p = s.get(models.SubnetPool, pool_id)
        if p is None or not (ctxt is None or ctxt.is_admin or p.shared or p.is_default
                             or p.project_id == ctxt.project_id):
            raise SubnetPoolNotFound(f"Subnet pool {pool_id} could not be found.")
        return p

    def create_subnetpool(self, ctxt, name, prefixes, default_prefixlen=None,
                          min_prefixlen=None, max_prefixlen=None, is_default=False,
                          shared=False, project_id=None, description=""):
        if not prefixes or not isinstance(prefixes, list):
            raise SubnetPoolError("Invalid input for prefixes: a subnet pool needs a list of "
                                  "prefixes.")
        try:
            nets = [ipaddress.ip_network(str(p), strict=False) for p in prefixes]
        except ValueError as exc:
            raise SubnetPoolError(f"Invalid input for prefixes: {exc}") from None
        versions = {n.version for n in nets}
        if len(versions) != 1:
            raise SubnetPoolError("Invalid input for prefixes: the prefixes of a subnet pool "
                                  "are of one IP version.")
        version = versions.pop()
        low = _int("min_prefixlen", min_prefixlen) if min_prefixlen is not None \
            else DEFAULT_MIN[version]
        high = _int("max_prefixlen", max_prefixlen) if max_prefixlen is not None \
            else LIMITS[version]
        default = _int("default_prefixlen", default_prefixlen) \
            if default_prefixlen is not None else low
        if not 0 <= low <= default <= high <= LIMITS[version]:
            raise SubnetPoolError(
                f"Invalid input for default_prefixlen: min_prefixlen ({low}) <= "
                f"default_prefixlen ({default}) <= max_prefixlen ({high}) <= "
                f"{LIMITS[version]} is required.")
        nets = list(ipaddress.collapse_addresses(nets))
        pool = models.SubnetPool(id=str(uuid.uuid4()), name=name or "",
                                 description=description or "",
                                 project_id=project_id or getattr(ctxt, "project_id", None),
                                 ip_version=version, prefixes=[str(n) for n in nets],
                                 default_prefixlen=default, min_prefixlen=low,
                                 max_prefixlen=high, shared=bool(shared),
                                 is_default=bool(is_default))
        with self.db.session(write=True) as s:
            if pool.is_default and s.scalars(sa.select(models.SubnetPool.id).where(
                    models.SubnetPool.is_default.is_(True),
                    models.SubnetPool.ip_version == version)).first():
                raise SubnetPoolError(f"Invalid input for is_default: a default subnet pool "
                                      f"of IPv{version} exists already.")
            s.add(pool)
            s.flush()
            return self._pool_dict(pool)

    def get_subnetpool(self, ctxt, pool_id):
        with self.db.session() as s:
            return self._pool_dict(self._pool(s, ctxt, pool_id))

    def list_subnetpools(self, ctxt):
        with self.db.session() as s:
            q = sa.select(models.SubnetPool).order_by(models.SubnetPool.created_at,
                                                      models.SubnetPool.id)
            if not (ctxt is None or ctxt.is_admin):
                q = q.where(sa.or_(models.SubnetPool.project_id == ctxt.project_id,
                                   models.SubnetPool.shared.is_(True),
                                   models.SubnetPool.is_default.is_(True)))
            return [self._pool_dict(p) for p in s.scalars(q)]

    def delete_subnetpool(self, ctxt, pool_id):
        with self.db.session(write=True) as s:
            p = self._pool(s, ctxt, pool_id)
            if not (ctxt is None or ctxt.is_admin or p.project_id == ctxt.project_id):
                raise SubnetPoolNotFound(f"Subnet pool {pool_id} could not be found.")
            if s.scalars(sa.select(models.Subnet.id).where(
                    models.Subnet.subnetpool_id == p.id)).first():
                raise SubnetPoolInUse(f"Unable to complete operation on subnet pool "
                                      f"{pool_id}: subnets are allocated from it.")
            s.delete(p)

    def _default_pool(self, s, ip_version=4):
        return s.scalars(sa.select(models.SubnetPool).where(
            models.SubnetPool.is_default.is_(True),
            models.SubnetPool.ip_version == ip_version)).first()

    def _cut_from_pool(self, s, pool, prefixlen=None):
        """The lowest free block of ``prefixlen`` bits in the pool (its CIDR text)."""
        length = pool.default_prefixlen if prefixlen is None else _int("prefixlen", prefixlen)
        if not pool.min_prefixlen <= length <= pool.max_prefixlen:
            raise SubnetPoolError(f"Invalid input for prefixlen: {length} is not between "
                                  f"{pool.min_prefixlen} and {pool.max_prefixlen}.")
        if s.bind.dialect.name != "sqlite":  # allocations from one pool queue up
            s.execute(sa.select(models.SubnetPool.id).where(models.SubnetPool.id == pool.id)
                      .with_for_update())
        used = [ipaddress.ip_network(c) for c in s.scalars(
            sa.select(models.Subnet.cidr).where(models.Subnet.subnetpool_id == pool.id))]
        for prefix in pool.prefixes:
            prefix = ipaddress.ip_network(prefix)
            if prefix.prefixlen > length:
                continue
            for block in prefix.subnets(new_prefix=length):
                clash = next((u for u in used if u.overlaps(block)), None)
                if clash is None:
                    return str(block)
        raise SubnetAllocationError(f"Failed to allocate subnet: no /{length} block is free "
                                    f"in subnet pool {pool.id}.")
