"""The request context: who is asking, carried across every RPC as a dict."""
import uuid

from oslo_context import context as oslo_context


class RequestContext(oslo_context.RequestContext):
    """oslo.context's context, plus the fields policy checks and RPC need."""

    def __init__(self, user_id=None, project_id=None, roles=None, is_admin=None,
                 read_deleted="no", **kwargs):
        kwargs.setdefault("request_id", "req-" + str(uuid.uuid4()))
        super().__init__(user_id=user_id, project_id=project_id,
                         roles=list(roles or []), is_admin=bool(is_admin), **kwargs)
        self.read_deleted = read_deleted

    def to_policy_values(self):
        """oslo.context's values plus ``is_admin``, which the legacy
        ``admin_api`` rule (``is_admin:True``) checks."""
        values = super().to_policy_values()
        values["is_admin"] = self.is_admin
        return values

    def to_dict(self):
        d = super().to_dict()
        d["read_deleted"] = self.read_deleted
        return d

    @classmethod
    def from_dict(cls, values):
        return cls(user_id=values.get("user_id") or values.get("user"),
                   project_id=values.get("project_id"),
                   roles=values.get("roles"),
                   is_admin=values.get("is_admin"),
                   read_deleted=values.get("read_deleted", "no"),
                   request_id=values.get("request_id"),
                   global_request_id=values.get("global_request_id"),
                   auth_token=values.get("auth_token"),
                   system_scope=values.get("system_scope"),
                   user_domain_id=values.get("user_domain_id"),
                   project_domain_id=values.get("project_domain_id"))

    def elevated(self):
        """A copy with admin rights, for internal bookkeeping."""
        ctx = self.from_dict(self.to_dict())
        ctx.is_admin = True
        if "admin" not in ctx.roles:
            ctx.roles.append("admin")
        return ctx


def get_admin_context():
    return RequestContext(user_id=None, project_id=None, roles=["admin"], is_admin=True)
