"""Projects, users, roles and tokens of the all-in-one's identity service.

Passwords are kept as PBKDF2 hashes. Tokens are signed, expiring documents
naming the user and the project (HMAC-SHA256 with a key kept in the
database), so every process sharing the database can validate them; roles
are looked up on each validation, so a revoked role takes effect at once. A
revoked token's audit id is kept until the token would have expired, and
validation refuses it; so does it a token whose user or project is gone or
disabled. One domain, ``default``, holds everything.
"""
import base64
import datetime
import hashlib
import hmac
import json
import os
import secrets
import uuid

import sqlalchemy as sa
from sqlalchemy import orm

from novella.db.engine import Database

DEFAULT_DOMAIN = {"id": "default", "name": "Default"}
TOKEN_LIFETIME = datetime.timedelta(hours=12)


class Base(orm.DeclarativeBase):
    pass


class Project(Base):
    __tablename__ = "identity_projects"
    id: orm.Mapped[str] = orm.mapped_column(sa.String(64), primary_key=True)
    name: orm.Mapped[str] = orm.mapped_column(sa.String(255), unique=True)
    description: orm.Mapped[str | None] = orm.mapped_column(sa.Text)
    enabled: orm.Mapped[bool] = orm.mapped_column(default=True)


class User(Base):
    __tablename__ = "identity_users"
    id: orm.Mapped[str] = orm.mapped_column(sa.String(64), primary_key=True)
    name: orm.Mapped[str] = orm.mapped_column(sa.String(255), unique=True)
    password_hash: orm.Mapped[str] = orm.mapped_column(sa.String(255))
    default_project_id: orm.Mapped[str | None] = orm.mapped_column(sa.String(64))
    enabled: orm.Mapped[bool] = orm.mapped_column(default=True)


class Role(Base):
    __tablename__ = "identity_roles"
    id: orm.Mapped[str] = orm.mapped_column(sa.String(64), primary_key=True)
    name: orm.Mapped[str] = orm.mapped_column(sa.String(255), unique=True)


class Assignment(Base):
    __tablename__ = "identity_assignments"
    user_id: orm.Mapped[str] = orm.mapped_column(sa.String(64), primary_key=True)
    project_id: orm.Mapped[str] = orm.mapped_column(sa.String(64), primary_key=True)
    role_id: orm.Mapped[str] = orm.mapped_column(sa.String(64), primary_key=True)


class UserExtra(Base):
    """A user's attributes beyond the core ones (email, description), as Keystone's
    ``extra``."""
    __tablename__ = "identity_user_extra"
    user_id: orm.Mapped[str] = orm.mapped_column(sa.String(64), primary_key=True)
    extra: orm.Mapped[dict] = orm.mapped_column(sa.JSON, default=dict)


class RevokedToken(Base):
    __tablename__ = "identity_revoked_tokens"
    audit_id: orm.Mapped[str] = orm.mapped_column(sa.String(64), primary_key=True)
    expires_at: orm.Mapped[int] = orm.mapped_column(sa.BigInteger)


class SigningKey(Base):
    __tablename__ = "identity_signing_key"
    id: orm.Mapped[int] = orm.mapped_column(primary_key=True)
    key: orm.Mapped[str] = orm.mapped_column(sa.String(128))


# Roles imply the weaker ones, as Keystone's default role hierarchy does.
IMPLIED = {"admin": ["member", "reader"], "member": ["reader"]}


class AuthError(Exception):
    pass


class IdentityError(Exception):
    """A refused change, with Keystone's status code and title."""
    code, title = 400, "Bad Request"


class NotFound(IdentityError):
    code, title = 404, "Not Found"


class Conflict(IdentityError):
    code, title = 409, "Conflict"


DEFAULT_ROLES = ("admin", "manager", "member", "reader", "service")


def _hash(password, salt=None):
    salt = salt or secrets.token_hex(8)
    digest = hashlib.pbkdf2_hmac("sha256", password.encode(), salt.encode(), 20000).hex()
    return f"{salt}${digest}"


def _check(password, stored):
    salt, _, _digest = stored.partition("$")
    return hmac.compare_digest(_hash(password, salt), stored)


def _b64(data):
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _unb64(text):
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def _iso(ts):
    return ts.strftime("%Y-%m-%dT%H:%M:%S.000000Z")


class IdentityStore:
    def __init__(self, url):
        self.db = url if isinstance(url, Database) else Database(url)
        Base.metadata.create_all(self.db.engine)
        with self.db.session(write=True) as s:
            row = s.get(SigningKey, 1)
            if row is None:
                row = SigningKey(id=1, key=secrets.token_hex(32))
                s.add(row)
            self._key = row.key.encode()
        self._pbkdf2_cache = {}

    # -- bootstrap -----------------------------------------------------------------
    def ensure(self, users):
        """Create what is missing of ``[{"name", "password", "project", "roles"}]``."""
        with self.db.session(write=True) as s:
            for name in DEFAULT_ROLES:
                if s.scalars(sa.select(Role).where(Role.name == name)).first() is None:
                    s.add(Role(id=uuid.uuid4().hex, name=name))
            s.flush()
            for spec in users:
                project = s.scalars(sa.select(Project).where(Project.name == spec["project"])).first()
                if project is None:
                    project = Project(id=uuid.uuid4().hex, name=spec["project"])
                    s.add(project)
                user = s.scalars(sa.select(User).where(User.name == spec["name"])).first()
                if user is None:
                    user = User(id=uuid.uuid4().hex, name=spec["name"],
                                password_hash=_hash(spec["password"]),
                                default_project_id=project.id)
                    s.add(user)
                for role_name in spec["roles"]:
                    role = s.scalars(sa.select(Role).where(Role.name == role_name)).first()
                    if role is None:
                        role = Role(id=uuid.uuid4().hex, name=role_name)
                        s.add(role)
                        s.flush()
                    if s.get(Assignment, (user.id, project.id, role.id)) is None:
                        s.add(Assignment(user_id=user.id, project_id=project.id, role_id=role.id))

    def project_id(self, name):
        with self.db.session() as s:
            return s.scalars(sa.select(Project.id).where(Project.name == name)).first()

    # -- tokens ---------------------------------------------------------------------------
    def authenticate(self, user_name=None, user_id=None, password=None, project_name=None,
                     project_id=None):
        """Check a password; return a token (string) and its document."""
        with self.db.session() as s:
            q = sa.select(User).where(User.id == user_id if user_id else User.name == user_name)
            user = s.scalars(q).first()
            if user is None or not user.enabled or not _check(password or "", user.password_hash):
                raise AuthError("The request you have made requires authentication.")
            if project_id is None and project_name is not None:
                project_id = s.scalars(sa.select(Project.id).where(Project.name == project_name)).first()
                if project_id is None:
                    raise AuthError(f"Could not find project: {project_name}.")
            user_id = user.id
        now = datetime.datetime.now(datetime.timezone.utc)
        body = {"u": user_id, "p": project_id, "e": int((now + TOKEN_LIFETIME).timestamp()),
                "i": int(now.timestamp()), "a": _b64(os.urandom(12))}
        raw = json.dumps(body, separators=(",", ":")).encode()
        token = _b64(raw) + "." + _b64(hmac.new(self._key, raw, hashlib.sha256).digest())
        document = self.validate(token)
        if project_id is not None and not document["roles"]:
            raise AuthError("User has no access to project.")
        return token, document

    def validate(self, token):
        """The token's document (user, project, roles, times); AuthError if invalid."""
        try:
            payload, _, sig = token.partition(".")
            raw = _unb64(payload)
            good = hmac.compare_digest(_unb64(sig), hmac.new(self._key, raw, hashlib.sha256).digest())
            body = json.loads(raw)
        except (ValueError, TypeError):
            raise AuthError("Invalid token.") from None
        if not good or body["e"] < datetime.datetime.now(datetime.timezone.utc).timestamp():
            raise AuthError("The token is invalid or has expired.")
        with self.db.session() as s:
            if s.get(RevokedToken, body["a"]) is not None:
                raise AuthError("The token has been revoked.")
            user = s.get(User, body["u"])
            if user is None or not user.enabled:
                raise AuthError("The token's user no longer exists.")
            project = s.get(Project, body["p"]) if body["p"] else None
            if body["p"] and (project is None or not project.enabled):
                raise AuthError("The token's project no longer exists.")
            roles = []
            if project is not None:
                q = (sa.select(Role).join(Assignment, Assignment.role_id == Role.id)
                     .where(Assignment.user_id == user.id, Assignment.project_id == project.id))
                roles = list(s.scalars(q))
            names = {r.name for r in roles}
            for r in list(names):
                names.update(IMPLIED.get(r, []))
            by_name = {r.name: r.id for r in s.scalars(sa.select(Role).where(Role.name.in_(names)))}
            role_docs = [{"id": by_name.get(n, n), "name": n} for n in sorted(names)]
            doc = {
                "methods": ["password"],
                "user": {"id": user.id, "name": user.name, "domain": DEFAULT_DOMAIN,
                         "password_expires_at": None},
                "roles": role_docs,
                "audit_ids": [body["a"]],
                "issued_at": _iso(datetime.datetime.fromtimestamp(body["i"], datetime.timezone.utc)),
                "expires_at": _iso(datetime.datetime.fromtimestamp(body["e"], datetime.timezone.utc)),
            }
            if project is not None:
                doc["project"] = {"id": project.id, "name": project.name, "domain": DEFAULT_DOMAIN}
                doc["is_domain"] = False
            return doc

    def revoke(self, token):
        """Refuse ``token`` from now on (its audit id kept until it would expire)."""
        self.validate(token)
        body = json.loads(_unb64(token.partition(".")[0]))
        now = int(datetime.datetime.now(datetime.timezone.utc).timestamp())
        with self.db.session(write=True) as s:
            s.execute(sa.delete(RevokedToken).where(RevokedToken.expires_at < now))
            s.merge(RevokedToken(audit_id=body["a"], expires_at=body["e"]))

    # -- the admin API: projects, users, roles and their assignments ---------------------
    @staticmethod
    def _unique(s, model, name, kind, except_id=None):
        q = sa.select(model.id).where(model.name == name)
        if except_id is not None:
            q = q.where(model.id != except_id)
        if s.scalars(q).first() is not None:
            raise Conflict(f"Conflict occurred attempting to store {kind} - Duplicate entry "
                           f"found with name {name} at domain ID default.")

    @staticmethod
    def _get(s, model, kind, id_):
        row = s.get(model, id_)
        if row is None:
            raise NotFound(f"Could not find {kind}: {id_}.")
        return row

    def create_project(self, name, description="", enabled=True):
        with self.db.session(write=True) as s:
            self._unique(s, Project, name, "project")
            project = Project(id=uuid.uuid4().hex, name=name, description=description or "",
                              enabled=enabled)
            s.add(project)
            s.flush()
            return _project_fields(project)

    def get_project(self, project_id):
        with self.db.session() as s:
            return _project_fields(self._get(s, Project, "project", project_id))

    def list_projects(self, name=None, user_id=None):
        with self.db.session() as s:
            q = sa.select(Project).order_by(Project.name)
            if name is not None:
                q = q.where(Project.name == name)
            if user_id is not None:
                q = q.where(Project.id.in_(sa.select(Assignment.project_id)
                                           .where(Assignment.user_id == user_id)))
            return [_project_fields(p) for p in s.scalars(q)]

    def update_project(self, project_id, changes):
        with self.db.session(write=True) as s:
            project = self._get(s, Project, "project", project_id)
            if "name" in changes:
                self._unique(s, Project, changes["name"], "project", except_id=project_id)
                project.name = changes["name"]
            for key in ("description", "enabled"):
                if key in changes:
                    setattr(project, key, changes[key])
            return _project_fields(project)

    def delete_project(self, project_id):
        with self.db.session(write=True) as s:
            project = self._get(s, Project, "project", project_id)
            s.execute(sa.delete(Assignment).where(Assignment.project_id == project_id))
            s.delete(project)

    def create_user(self, name, password=None, default_project_id=None, enabled=True,
                    extra=None):
        with self.db.session(write=True) as s:
            self._unique(s, User, name, "user")
            if default_project_id is not None:
                self._get(s, Project, "project", default_project_id)
            user = User(id=uuid.uuid4().hex, name=name,
                        password_hash=_hash(password) if password else "!",
                        default_project_id=default_project_id, enabled=enabled)
            s.add(user)
            s.add(UserExtra(user_id=user.id, extra=dict(extra or {})))
            s.flush()
            return _user_fields(user, extra)

    def _user_extra(self, s, user_id):
        row = s.get(UserExtra, user_id)
        return dict(row.extra or {}) if row is not None else {}

    def get_user(self, user_id):
        with self.db.session() as s:
            user = self._get(s, User, "user", user_id)
            return _user_fields(user, self._user_extra(s, user_id))

    def list_users(self, name=None):
        with self.db.session() as s:
            q = sa.select(User).order_by(User.name)
            if name is not None:
                q = q.where(User.name == name)
            return [_user_fields(u, self._user_extra(s, u.id)) for u in s.scalars(q)]

    def update_user(self, user_id, changes):
        with self.db.session(write=True) as s:
            user = self._get(s, User, "user", user_id)
            if "name" in changes:
                self._unique(s, User, changes["name"], "user", except_id=user_id)
                user.name = changes["name"]
            if "password" in changes:
                user.password_hash = _hash(changes["password"])
            if "enabled" in changes:
                user.enabled = bool(changes["enabled"])
            if "default_project_id" in changes:
                if changes["default_project_id"] is not None:
                    self._get(s, Project, "project", changes["default_project_id"])
                user.default_project_id = changes["default_project_id"]
            extra = self._user_extra(s, user_id)
            extra.update({k: v for k, v in changes.items() if k not in _USER_CORE})
            s.merge(UserExtra(user_id=user_id, extra=extra))
            return _user_fields(user, extra)

    def delete_user(self, user_id):
        with self.db.session(write=True) as s:
            user = self._get(s, User, "user", user_id)
            s.execute(sa.delete(Assignment).where(Assignment.user_id == user_id))
            s.execute(sa.delete(UserExtra).where(UserExtra.user_id == user_id))
            s.delete(user)

    def create_role(self, name):
        with self.db.session(write=True) as s:
            self._unique(s, Role, name, "role")
            role = Role(id=uuid.uuid4().hex, name=name)
            s.add(role)
            s.flush()
            return {"id": role.id, "name": role.name}

    def get_role(self, role_id):
        with self.db.session() as s:
            role = self._get(s, Role, "role", role_id)
            return {"id": role.id, "name": role.name}

    def list_roles(self, name=None):
        with self.db.session() as s:
            q = sa.select(Role).order_by(Role.name)
            if name is not None:
                q = q.where(Role.name == name)
            return [{"id": r.id, "name": r.name} for r in s.scalars(q)]

    def delete_role(self, role_id):
        with self.db.session(write=True) as s:
            role = self._get(s, Role, "role", role_id)
            s.execute(sa.delete(Assignment).where(Assignment.role_id == role_id))
            s.delete(role)

    def _assignment_parts(self, s, project_id, user_id, role_id):
        self._get(s, Project, "project", project_id)
        self._get(s, User, "user", user_id)
        self._get(s, Role, "role", role_id)

    def grant(self, project_id, user_id, role_id):
        with self.db.session(write=True) as s:
            self._assignment_parts(s, project_id, user_id, role_id)
            if s.get(Assignment, (user_id, project_id, role_id)) is None:
                s.add(Assignment(user_id=user_id, project_id=project_id, role_id=role_id))

    def has_grant(self, project_id, user_id, role_id):
        with self.db.session() as s:
            self._assignment_parts(s, project_id, user_id, role_id)
            return s.get(Assignment, (user_id, project_id, role_id)) is not None

    def revoke_grant(self, project_id, user_id, role_id):
        with self.db.session(write=True) as s:
            self._assignment_parts(s, project_id, user_id, role_id)
            row = s.get(Assignment, (user_id, project_id, role_id))
            if row is None:
                raise NotFound(f"Could not find role assignment with role: {role_id}, user "
                               f"or group: {user_id}, project, domain, or system: "
                               f"{project_id}.")
            s.delete(row)

    def assignments(self, user_id=None, project_id=None, role_id=None):
        """[(user, project, role)] of the grants matching the filters, with names."""
        with self.db.session() as s:
            q = (sa.select(Assignment, User.name, Project.name, Role.name)
                 .join(User, User.id == Assignment.user_id)
                 .join(Project, Project.id == Assignment.project_id)
                 .join(Role, Role.id == Assignment.role_id)
                 .order_by(User.name, Project.name, Role.name))
            for column, value in ((Assignment.user_id, user_id),
                                  (Assignment.project_id, project_id),
                                  (Assignment.role_id, role_id)):
                if value is not None:
                    q = q.where(column == value)
            return [((a.user_id, user), (a.project_id, project), (a.role_id, role))
                    for a, user, project, role in s.execute(q)]


_USER_CORE = {"name", "password", "enabled", "default_project_id", "domain_id", "id"}


def _project_fields(p):
    return {"id": p.id, "name": p.name, "description": p.description or "",
            "enabled": p.enabled}


def _user_fields(u, extra):
    return {**(extra or {}), "id": u.id, "name": u.name, "enabled": u.enabled,
            "default_project_id": u.default_project_id}
