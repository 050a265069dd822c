"""Two cells of one host each (plus helpers) for cross-cell move tests."""
import pytest
import sqlalchemy as sa
from oslo_policy import policy

from novella.db import api_models as am
from novella.db import cell_models as cm
from novella.db import cells as cells_mod
from tests.functional.moves.conftest import MoveCloud
from tests.functional.system.conftest import cloud_factory

CROSS_CELL_RULE = "compute:servers:resize:cross_cell"


class CrossCellCloud(MoveCloud):
    def allow_cross_cell(self, rule="rule:context_is_admin"):
        """Let the cross-cell policy pass (admins by default)."""
        enforcer = self.aio.compute_api_app.app.api.enforcer
        enforcer.load_rules()
        enforcer.set_rules(policy.Rules.from_dict({CROSS_CELL_RULE: rule}), overwrite=False,
                           use_conf=False)

    def cell_of_host(self, host):
        return next(c for c in self.aio.cells if c.name == host.split("-")[0])

    def mapped_cell(self, sid):
        with self.aio.api_db.session() as s:
            cell_id = s.scalars(sa.select(am.InstanceMapping.cell_id).where(
                am.InstanceMapping.instance_uuid == sid)).one()
        return next(c.name for c in self.aio.cells if c.id == cell_id)

    def rows(self, sid):
        """{cell name: {"instance": (hidden, vm_state, host) or None, "migrations": [...],
        "bdms": n, "actions": n}} for every cell."""
        out = {}
        for cell in self.aio.cells:
            with cells_mod.cell_database(cell).session() as s:
                inst = s.scalars(sa.select(cm.Instance).where(cm.Instance.uuid == sid)).first()
                migs = s.scalars(sa.select(cm.Migration).where(
                    cm.Migration.instance_uuid == sid)).all()
                out[cell.name] = {
                    "instance": (inst.hidden, inst.vm_state, inst.host) if inst else None,
                    "migrations": sorted((mg.status, mg.hidden, mg.cross_cell_move)
                                         for mg in migs),
                    "bdms": len(s.scalars(sa.select(cm.BlockDeviceMapping).where(
                        cm.BlockDeviceMapping.instance_uuid == sid)).all()),
                    "actions": len(s.scalars(sa.select(cm.InstanceAction).where(
                        cm.InstanceAction.instance_uuid == sid)).all())}
        return out

    def fault_in(self, sid, cell_name):
        """The message of the server's latest fault in that cell's database ('' if none)."""
        cell = next(c for c in self.aio.cells if c.name == cell_name)
        with cells_mod.cell_database(cell).session() as s:
            row = s.scalars(sa.select(cm.InstanceFault).where(
                cm.InstanceFault.instance_uuid == sid)
                .order_by(cm.InstanceFault.id.desc())).first()
            return row.message if row is not None else ""

    def snapshots(self, sid):
        """Images made from the server (deleted ones too: status)."""
        from novella.image import models
        with self.aio.image_api.db.session() as s:
            rows = s.scalars(sa.select(models.Image)).all()
            return [(r.name, r.status) for r in rows
                    if (r.properties or {}).get("instance_uuid") == sid]

    def bindings(self, sid):
        """{host: status} of the server's port bindings."""
        from novella.context import get_admin_context
        ctxt = get_admin_context()
        net = self.aio.network_api
        out = {}
        for port in net.list_ports(ctxt, device_id=sid):
            for b in net.list_port_bindings(ctxt, port["id"]):
                out[b["host"]] = b["status"]
        return out

    def attachments(self, sid):
        """{attached host: attach status} of the server's live volume attachments."""
        from novella.context import get_admin_context
        return sorted((a.get("attached_host"), a.get("status"))
                      for a in self.aio.volume_api.attachment_list(get_admin_context(),
                                                                   instance_uuid=sid))


@pytest.fixture
def make_xcloud(tmp_path):
    """make_xcloud(hosts_per_cell=1, **{group: {option: value}}) -> a started CrossCellCloud."""
    factory = cloud_factory(tmp_path, CrossCellCloud, cells=2)
    make = next(factory)
    yield lambda hosts_per_cell=1, **overrides: make(hosts_per_cell, **overrides)
    next(factory, None)


@pytest.fixture
def xcloud(make_xcloud):
    cloud = make_xcloud()
    cloud.allow_cross_cell()
    return cloud
