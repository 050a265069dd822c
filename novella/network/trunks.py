"""Trunks of the embedded network service, as Neutron's trunk extension keeps them.

A trunk names a parent port and carries subports, each a port of its own with a
segmentation (``vlan`` and an id unique in the trunk). A port is the parent of at
most one trunk and a subport of at most one, never both. A subport's
``device_owner`` is ``trunk:subport`` and its ``device_id`` the trunk's id;
it is bound wherever its parent is, and ACTIVE when its parent is: every change
of the parent's active binding (a server's build, a move's activation, an
unbind) carries its subports along. A trunk whose parent a server uses cannot be
deleted (409).
"""
import uuid

import sqlalchemy as sa

from novella.db.timestamps import isotime
from novella.network import models

SUBPORT_OWNER = "trunk:subport"
SEGMENTATION_TYPES = ("vlan", "inherit")


class TrunkError(Exception):
    code = 400


class TrunkNotFound(TrunkError):
    code = 404


class TrunkConflict(TrunkError):
    code = 409


class TrunkMixin:
    """Mixed into ``NetworkAPI`` (``self.db``, ``_port``, ``_active``, ``_rebind_active``)."""

    def _trunk_dict(self, s, t):
        subs = s.scalars(sa.select(models.SubPort).where(models.SubPort.trunk_id == t.id)
                         .order_by(models.SubPort.segmentation_id)).all()
        parent = s.get(models.Port, t.port_id)
        return {"id": t.id, "name": t.name, "description": t.description,
                "project_id": t.project_id, "tenant_id": t.project_id, "port_id": t.port_id,
                "admin_state_up": t.admin_state_up, "revision_number": 0, "tags": [],
                "status": "ACTIVE" if parent is not None and parent.status == "ACTIVE"
                else "DOWN",
                "sub_ports": [self._subport_dict(sp) for sp in subs],
                "created_at": isotime(t.created_at), "updated_at": isotime(t.updated_at or t.created_at)}

    @staticmethod
    def _subport_dict(sp):
        return {"port_id": sp.port_id, "segmentation_type": sp.segmentation_type,
                "segmentation_id": sp.segmentation_id}

    def _trunk(self, s, ctxt, trunk_id):
        t = s.get(models.Trunk, trunk_id)
        if t is None or not (ctxt is None or ctxt.is_admin or t.project_id == ctxt.project_id):
            raise TrunkNotFound(f"Trunk {trunk_id} could not be found.")
        return t

    def _visible_port(self, s, ctxt, port_id):
        p = s.get(models.Port, port_id)
        if p is None or not (ctxt is None or ctxt.is_admin or p.project_id == ctxt.project_id):
            raise TrunkNotFound(f"Port {port_id} could not be found.")
        return p

    def _in_a_trunk(self, s, port_id):
        return (s.scalars(sa.select(models.Trunk.id).where(models.Trunk.port_id == port_id))
                .first() is not None or s.get(models.SubPort, port_id) is not None)

    def _add_subports(self, s, ctxt, t, sub_ports):
        for sub in sub_ports:
            if not isinstance(sub, dict) or not sub.get("port_id"):
                raise TrunkError("Invalid input for sub_ports: a port_id is required.")
            kind = sub.get("segmentation_type", "vlan")
            if kind not in SEGMENTATION_TYPES:
                raise TrunkError(f"Invalid segmentation type {kind}.")
            try:
                seg = int(sub.get("segmentation_id", 0))
            except (TypeError, ValueError):
                raise TrunkError(f"Invalid segmentation id {sub.get('segmentation_id')!r}.")
            if kind == "vlan" and not 1 <= seg <= 4094:
                raise TrunkError(f"Invalid segmentation id {seg}: a VLAN id is 1-4094.")
            p = self._visible_port(s, ctxt, sub["port_id"])
            if self._in_a_trunk(s, p.id):
                raise TrunkConflict(f"Port {p.id} is currently in use and is not eligible "
                                    "for use as a subport.")
            if p.device_id and p.device_owner != SUBPORT_OWNER:
                raise TrunkConflict(f"Port {p.id} is in use by {p.device_id}.")
            s.add(models.SubPort(port_id=p.id, trunk_id=t.id, segmentation_type=kind,
                                 segmentation_id=seg))
            p.device_owner, p.device_id = SUBPORT_OWNER, t.id
            s.flush()
        self._sync_subports(s, s.get(models.Port, t.port_id))

    def create_trunk(self, ctxt, port_id, sub_ports=(), name="", description="",
                     project_id=None):
        with self.db.session(write=True) as s:
            parent = self._visible_port(s, ctxt, port_id)
            if self._in_a_trunk(s, parent.id):
                raise TrunkConflict(f"Port {parent.id} is currently in use and is not "
                                    "eligible for use as a parent port.")
            t = models.Trunk(id=str(uuid.uuid4()), name=name or "",
                             description=description or "", port_id=parent.id,
                             project_id=project_id or getattr(ctxt, "project_id", None))
            s.add(t)
            s.flush()
            self._add_subports(s, ctxt, t, list(sub_ports or []))
            return self._trunk_dict(s, t)

    def get_trunk(self, ctxt, trunk_id):
        with self.db.session() as s:
            return self._trunk_dict(s, self._trunk(s, ctxt, trunk_id))

    def list_trunks(self, ctxt):
        with self.db.session() as s:
            q = sa.select(models.Trunk).order_by(models.Trunk.created_at, models.Trunk.id)
            if not (ctxt is None or ctxt.is_admin):
                q = q.where(models.Trunk.project_id == ctxt.project_id)
            return [self._trunk_dict(s, t) for t in s.scalars(q)]

    def update_trunk(self, ctxt, trunk_id, changes):
        with self.db.session(write=True) as s:
            t = self._trunk(s, ctxt, trunk_id)
            for key in ("name", "description", "admin_state_up"):
                if key in changes:
                    setattr(t, key, changes[key])
            s.flush()
            return self._trunk_dict(s, t)

    def add_subports(self, ctxt, trunk_id, sub_ports):
        with self.db.session(write=True) as s:
            t = self._trunk(s, ctxt, trunk_id)
            self._add_subports(s, ctxt, t, list(sub_ports or []))
            return self._trunk_dict(s, t)

    def remove_subports(self, ctxt, trunk_id, sub_ports):
        with self.db.session(write=True) as s:
            t = self._trunk(s, ctxt, trunk_id)
            for sub in sub_ports or []:
                sp = s.get(models.SubPort, (sub or {}).get("port_id"))
                if sp is None or sp.trunk_id != t.id:
                    raise TrunkNotFound(f"SubPort {(sub or {}).get('port_id')} could not be "
                                        f"found in trunk {t.id}.")
                self._release_subport(s, sp)
            return self._trunk_dict(s, t)

    def delete_trunk(self, ctxt, trunk_id):
        with self.db.session(write=True) as s:
            t = self._trunk(s, ctxt, trunk_id)
            parent = s.get(models.Port, t.port_id)
            if parent is not None and parent.device_id:
                raise TrunkConflict(f"Trunk {t.id} is currently in use.")
            for sp in s.scalars(sa.select(models.SubPort).where(models.SubPort.trunk_id == t.id)):
                self._release_subport(s, sp)
            s.delete(t)

    def _release_subport(self, s, sp):
        p = s.get(models.Port, sp.port_id)
        s.delete(sp)
        s.flush()
        if p is not None:
            p.device_owner, p.device_id = "", ""
            self._rebind_active(s, p, "", {})

    def _sync_subports(self, s, parent):
        """The parent's subports bound to its host, ACTIVE when it is."""
        if parent is None:
            return
        trunk = s.scalars(sa.select(models.Trunk).where(models.Trunk.port_id == parent.id)).first()
        if trunk is None:
            return
        host = self._active(s, parent.id).host
        for sp in s.scalars(sa.select(models.SubPort).where(models.SubPort.trunk_id == trunk.id)):
            p = s.get(models.Port, sp.port_id)
            if self._active(s, p.id).host != host:
                self._rebind_active(s, p, host, {})
            p.status = parent.status if host else "DOWN"
