"""Flavors (API database): their extra specs and the projects a private one is shared with.

The Compute API's flavor handlers and every create or resize read them here.
"""
import sqlalchemy as sa

from novella.db import api_models as am


class Duplicate(Exception):
    """Another flavor took the name or flavor id meanwhile."""


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


def get(s, flavorid):
    """The Flavor of that flavor id (with its specs and projects loaded on use), or None."""
    return s.scalars(sa.select(am.Flavor).where(am.Flavor.flavorid == flavorid)).first()


def by_name_or_id(s, name_or_id):
    """The Flavor named ``name_or_id`` or of that flavor id, or None."""
    return s.scalars(sa.select(am.Flavor).where(sa.or_(
        am.Flavor.name == name_or_id, am.Flavor.flavorid == name_or_id))).first()


def page(s, limit, sort_key="flavorid", sort_dir="asc", public=None, project_id=None,
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


def taken(s, name, flavorid):
    """'name' or 'ID' when a flavor already has that name or flavor id, else None."""
    for col, value, what in ((am.Flavor.name, name, "name"), (am.Flavor.flavorid, flavorid, "ID")):
        if s.scalar(sa.select(sa.func.count()).select_from(am.Flavor).where(col == value)):
            return what
    return None


def add(s, **values):
    """A new Flavor, written and read back (its defaults and timestamps filled)."""
    fl = am.Flavor(**values)
    s.add(fl)
    try:
        s.flush()
    except sa.exc.IntegrityError as exc:
        raise Duplicate(str(exc)) from exc
    s.refresh(fl)
    return fl


def delete(s, fl):
    s.delete(fl)


def set_specs(fl, specs):
    """Add or change extra specs ({key: text}) of a Flavor read in the session."""
    existing = {e.key: e for e in fl.extra_specs}
    for key, value in specs.items():
        if key in existing:
            existing[key].value = value
        else:
            fl.extra_specs.append(am.FlavorExtraSpec(key=key, value=value))


def share(fl, project_id):
    fl.projects.append(am.FlavorProject(project_id=project_id))
