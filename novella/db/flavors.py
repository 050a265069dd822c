"""Flavors (API database): their extra specs and the projects a private one is shared with.

The Compute API's flavor handlers and every create or resize read them here.
"""
import contextlib

import sqlalchemy as sa

from novella.db import api_models as am


class Duplicate(Exception):
    """A flavor has the name (``what``: 'name') or the flavor id ('ID') already."""

    def __init__(self, what, detail=""):
        super().__init__(detail or what)
        self.what = what


def as_dict(fl, extra_specs=None):
    """A flavor as it travels with requests and is stored with instances."""
    return {"id": fl.id, "flavorid": fl.flavorid, "name": fl.name, "memory_mb": fl.memory_mb,
            "vcpus": fl.vcpus, "root_gb": fl.root_gb, "ephemeral_gb": fl.ephemeral_gb,
            "swap": fl.swap, "rxtx_factor": fl.rxtx_factor, "vcpu_weight": fl.vcpu_weight,
            "is_public": fl.is_public, "disabled": fl.disabled, "description": fl.description,
            "extra_specs": (dict(extra_specs) if extra_specs is not None
                            else {e.key: e.value for e in fl.extra_specs})}


_FLAVORS, _SPECS, _ACCESS = (am.Flavor.__table__, am.FlavorExtraSpec.__table__,
                             am.FlavorProject.__table__)


def for_request(api_db, flavorid, project_id, admin):
    """(flavor row, {extra spec: value}) for a create or resize, or None when there
    is no such flavor or the project may not use it (a private one not shared)."""
    with api_db.reader() as conn:  # Core, no transaction: this runs for every server created
        # The flavor and its extra specs in one query: a row per spec (or one, with none).
        rows = conn.execute(
            sa.select(_FLAVORS, _SPECS.c.key.label("spec_key"), _SPECS.c.value.label("spec_value"))
            .outerjoin(_SPECS, _SPECS.c.flavor_id == _FLAVORS.c.id)
            .where(_FLAVORS.c.flavorid == flavorid)).all()
        fl = rows[0] if rows else None
        allowed = fl is not None and (fl.is_public or admin or conn.execute(
            sa.select(_ACCESS.c.id).where(_ACCESS.c.flavor_id == fl.id,
                                          _ACCESS.c.project_id == project_id)).first())
        if not allowed:
            return None
        return fl, {r.spec_key: r.spec_value for r in rows if r.spec_key is not None}


def _get(s, flavorid):
    return s.scalars(sa.select(am.Flavor).where(am.Flavor.flavorid == flavorid)).first()


def get(api_db, flavorid):
    """The Flavor of that flavor id (its specs and projects loaded), or None."""
    with api_db.session() as s:
        return _get(s, flavorid)


def by_name_or_id(api_db, name_or_id):
    """The Flavor named ``name_or_id`` or of that flavor id, or None."""
    with api_db.session() as s:
        return s.scalars(sa.select(am.Flavor).where(sa.or_(
            am.Flavor.name == name_or_id, am.Flavor.flavorid == name_or_id))).first()


def page(api_db, limit, marker=None, **query):
    """One page of Flavors (``_page``), after the one of flavor id ``marker`` when
    given; None when there is no such one."""
    with api_db.session() as s:
        after = None
        if marker:
            after = _get(s, marker)
            if after is None:
                return None
        return _page(s, limit, marker=after, **query)


def _page(s, limit, sort_key="flavorid", sort_dir="asc", public=None, project_id=None,
          min_ram=None, min_disk=None, name=None, marker=None):
    """One page of Flavors in ``sort_key`` order (ties by id), after ``marker`` (a Flavor).

    ``public``: True or False for only public or only private ones, None for all;
    ``project_id``: the public ones and those shared with that project (a user's view);
    ``name``: a regular expression the name matches.
    """
    q = sa.select(am.Flavor)
    if project_id is not None:
        access = sa.select(am.FlavorProject.flavor_id).where(
            am.FlavorProject.project_id == project_id)
        q = q.where(sa.or_(am.Flavor.is_public.is_(True), am.Flavor.id.in_(access)))
    elif public is not None:
        q = q.where(am.Flavor.is_public == public)
    if min_ram is not None:
        q = q.where(am.Flavor.memory_mb >= min_ram)
    if min_disk is not None:
        q = q.where(am.Flavor.root_gb >= min_disk)
    if name is not None:
        q = q.where(am.Flavor.name.regexp_match(name))
    col = getattr(am.Flavor, sort_key)
    if marker is not None:
        mv = getattr(marker, sort_key)
        after = (col > mv) if sort_dir == "asc" else (col < mv)
        tie = (am.Flavor.id > marker.id) if sort_dir == "asc" else (am.Flavor.id < marker.id)
        q = q.where(sa.or_(after, sa.and_(col == mv, tie)))
    order = [col.asc(), am.Flavor.id.asc()] if sort_dir == "asc" else [col.desc(), am.Flavor.id.desc()]
    return list(s.scalars(q.order_by(*order).limit(limit)))


def _taken(s, name, flavorid):
    """'name' or 'ID' when a flavor already has that name or flavor id, else None."""
    for col, value, what in ((am.Flavor.name, name, "name"), (am.Flavor.flavorid, flavorid, "ID")):
        if s.scalar(sa.select(sa.func.count()).select_from(am.Flavor).where(col == value)):
            return what
    return None


def add(api_db, **values):
    """A new Flavor, written and read back (its defaults and timestamps filled);
    Duplicate when a flavor has its name or flavor id (or takes it meanwhile)."""
    with api_db.session(write=True) as s:
        what = _taken(s, values["name"], values["flavorid"])
        if what is not None:
            raise Duplicate(what)
        fl = am.Flavor(**values)
        s.add(fl)
        try:
            s.flush()
        except sa.exc.IntegrityError as exc:
            raise Duplicate("name", str(exc)) from exc
        s.refresh(fl)
        return fl


# Each change below reads the flavor of that flavor id and calls ``check(flavor or
# None)``, which raises to change nothing, in the transaction that changes it.
@contextlib.contextmanager
def _changing(api_db, flavorid, check):
    with api_db.session(write=True) as s:
        fl = _get(s, flavorid)
        check(fl)
        yield s, fl


def set_description(api_db, flavorid, description, check):
    """The flavor, its description changed."""
    with _changing(api_db, flavorid, check) as (s, fl):
        fl.description = description
        s.flush()
        return fl


def delete(api_db, flavorid, check):
    with _changing(api_db, flavorid, check) as (s, fl):
        s.delete(fl)


def set_specs(api_db, flavorid, specs, check):
    """Add or change extra specs ({key: text}) of the flavor."""
    with _changing(api_db, flavorid, check) as (_s, fl):
        existing = {e.key: e for e in fl.extra_specs}
        for key, value in specs.items():
            if key in existing:
                existing[key].value = value
            else:
                fl.extra_specs.append(am.FlavorExtraSpec(key=key, value=value))


def delete_spec(api_db, flavorid, key, check):
    """Remove the flavor's extra spec ``key``; False when it has none."""
    with _changing(api_db, flavorid, check) as (_s, fl):
        spec = next((e for e in fl.extra_specs if e.key == key), None)
        if spec is None:
            return False
        fl.extra_specs.remove(spec)
        return True


def share(api_db, flavorid, project_id, check):
    """The flavor, shared with the project too."""
    with _changing(api_db, flavorid, check) as (s, fl):
        fl.projects.append(am.FlavorProject(project_id=project_id))
        s.flush()
        return fl


def unshare(api_db, flavorid, project_id, check):
    """The flavor, no longer shared with the project; None when it was not."""
    with _changing(api_db, flavorid, check) as (s, fl):
        entry = next((p for p in fl.projects if p.project_id == project_id), None)
        if entry is None:
            return None
        fl.projects.remove(entry)
        s.flush()
        return fl
