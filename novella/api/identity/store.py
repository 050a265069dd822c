"""Projects, users, roles and tokens of the all-in-one's identity service.

Passwords are kept as PBKDF2 hashes. Tokens are stateless: a signed,
expiring document naming the user and the project (HMAC-SHA256 with a key
kept in the database), so every process sharing the database can validate
them; roles are looked up on each validation, so a revoked role takes effect
at once.
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


class SigningKey(Base):
    __tablename__ = "identity_signing_key"
    id: orm.Mapped[int] = orm.mapped_column(primary_key=True)
    key: orm.Mapped[str] = orm.mapped_column(sa.String(128))


# Roles imply the weaker ones, as Keystone's default role hierarchy does.
IMPLIED = {"admin": ["member", "reader"], "member": ["reader"]}


class AuthError(Exception):
    pass


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
            for name in ("admin", "member", "reader"):
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
            user = s.get(User, body["u"])
            if user is None or not user.enabled:
                raise AuthError("The token's user no longer exists.")
            project = s.get(Project, body["p"]) if body["p"] else None
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
