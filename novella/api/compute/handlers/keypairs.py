"""/os-keypairs: enough for ``key_name`` at server create."""
import base64
import hashlib

from novella.api.compute import common, errors, quotas, validation as v
from novella.db import keypairs as keypairs_db

P = "os_compute_api:os-keypairs:"
_name = {"type": "string", "minLength": 1, "maxLength": 255,
         "pattern": r"^[a-zA-Z0-9 _.@-]*$"}


def _create_schema(version):
    kp = {"name": _name, "public_key": {"type": "string"}}
    required = ["name"]
    if version >= (2, 2):
        kp["type"] = {"type": "string", "enum": ["ssh", "x509"]}
    if version >= (2, 10):
        kp["user_id"] = {"type": "string"}
    if version >= (2, 92):
        required.append("public_key")
    return v.obj({"keypair": v.obj(kp, required)}, ["keypair"])


def fingerprint(public_key):
    from cryptography import exceptions
    from cryptography.hazmat.primitives import serialization
    try:
        serialization.load_ssh_public_key(public_key.encode())  # a real key, not just base64
        blob = base64.b64decode(public_key.split()[1])
    except (IndexError, ValueError, TypeError, exceptions.UnsupportedAlgorithm):
        raise errors.BadRequest("Keypair data is invalid: failed to generate fingerprint")
    digest = hashlib.md5(blob, usedforsecurity=False).hexdigest()
    return ":".join(digest[i:i + 2] for i in range(0, 32, 2))


def _generate():
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import rsa
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    private = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.TraditionalOpenSSL,
                                serialization.NoEncryption()).decode()
    public = key.public_key().public_bytes(serialization.Encoding.OpenSSH,
                                           serialization.PublicFormat.OpenSSH).decode()
    return private, public + " Generated-by-Nova"


def _generate_x509(user_id):
    """A self-signed certificate for ``user_id`` (ten years, as the reference's
    WinRM certificates) and its private key."""
    import datetime
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import rsa
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, user_id)])
    now = datetime.datetime.now(datetime.timezone.utc)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name)
            .public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now).not_valid_after(now + datetime.timedelta(days=3650))
            .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.CLIENT_AUTH]), False)
            .sign(key, hashes.SHA256()))
    private = key.private_bytes(serialization.Encoding.PEM,
                                serialization.PrivateFormat.TraditionalOpenSSL,
                                serialization.NoEncryption()).decode()
    return private, cert.public_bytes(serialization.Encoding.PEM).decode()


def _user(req):
    user_id = req.GET.get("user_id") if req.at_least("2.10") else None
    return user_id or req.context.user_id


def x509_fingerprint(pem):
    """SHA-1 of the certificate, as colon-separated hex pairs (the reference's)."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes
    try:
        cert = x509.load_pem_x509_certificate(pem.encode())
    except ValueError:
        raise errors.BadRequest("Keypair data is invalid: failed to generate fingerprint")
    digest = cert.fingerprint(hashes.SHA1()).hex()  # noqa: S303 - the reference's format
    return ":".join(digest[i:i + 2] for i in range(0, len(digest), 2))


def view(req, kp, detail=False):
    out = {"name": kp.name, "public_key": kp.public_key, "fingerprint": kp.fingerprint}
    if req.at_least("2.2"):
        out["type"] = kp.type
    if detail:
        out.update({"user_id": kp.user_id, "created_at": common.iso_usec(kp.created_at),
                    "deleted": False, "deleted_at": None, "updated_at": None, "id": kp.id})
    return out


def index(req):
    user_id = _user(req)
    req.authorize(P + "index", {"user_id": user_id})
    paged = req.at_least("2.35")
    limit, marker = common.limit_and_marker(req) if paged else (None, None)
    found = keypairs_db.page(req.api.api_db, user_id, limit, after=marker)
    if found is None:
        raise errors.BadRequest(f"Marker {marker} could not be found.")
    items = [view(req, kp) for kp in found]
    out = {"keypairs": [{"keypair": kp} for kp in items]}
    if paged:
        links = common.next_link(req, ["os-keypairs"], items, limit, id_key="name")
        if links:
            out["keypairs_links"] = links
    return 200, out


def create(req):
    body = req.body_json(_create_schema)["keypair"]
    user_id = body.get("user_id") or req.context.user_id
    req.authorize(P + "create", {"user_id": user_id})
    private = None
    public = body.get("public_key")
    key_type = body.get("type", "ssh")
    if public is None:
        private, public = _generate_x509(user_id) if key_type == "x509" else _generate()
    fp = fingerprint(public) if key_type == "ssh" else x509_fingerprint(public)
    quotas.check_count(req.api, req.context, "key_pairs",
                       keypairs_db.count(req.api.api_db, user_id),
                       user_id=user_id, message="Quota exceeded, too many key pairs.")
    kp = keypairs_db.add(req.api.api_db, name=body["name"], user_id=user_id, public_key=public,
                         fingerprint=fp, type=key_type)
    if kp is None:
        raise errors.Conflict(f"Key pair '{body['name']}' already exists.")
    out = view(req, kp)
    out["user_id"] = user_id
    if private is not None:
        out["private_key"] = private
    return (201 if req.at_least("2.2") else 200), {"keypair": out}


def _not_found(name, user_id):
    return errors.NotFound(f"Keypair {name} not found for user {user_id}")


def show(req, name):
    user_id = _user(req)
    req.authorize(P + "show", {"user_id": user_id})
    kp = keypairs_db.find(req.api.api_db, user_id, name)
    if kp is None:
        raise _not_found(name, user_id)
    return 200, {"keypair": view(req, kp, detail=True)}


def delete(req, name):
    user_id = _user(req)
    req.authorize(P + "delete", {"user_id": user_id})
    if not keypairs_db.delete(req.api.api_db, user_id, name):
        raise _not_found(name, user_id)
    return (204 if req.at_least("2.2") else 202), None


ROUTES = [
    ("GET", "/os-keypairs", index),
    ("POST", "/os-keypairs", create),
    ("GET", "/os-keypairs/{name}", show),
    ("DELETE", "/os-keypairs/{name}", delete),
]
