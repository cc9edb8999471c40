"""The local cluster's certificates, keys and tokens (``cryptography``, ECDSA P-256), made once per
cluster directory.

* ``ca``: the cluster CA. It signs the API server's serving certificate (and the fault proxy's, so a
  client trusts either), and the client certificates of the components, whose common name is their
  user and organisation their group, as kube-apiserver's x509 authenticator reads them
  (``--client-ca-file``): ``system:kube-controller-manager``, ``system:kube-scheduler`` (the
  built-in RBAC binds both), ``kwok-controller`` and ``kueue-manager`` (bound by the manifests), and
  ``hyperpod-training-operator`` (the ``--hyperpod`` stack's stand-in operator, bound by its own
  ClusterRole: ``hyperpod/operator.py``).
* ``webhook-ca``: Kueue's webhook and metrics serving certificates (127.0.0.1); its PEM is the
  ``caBundle`` of the webhook and CRD-conversion configurations.
* ``sa.key``/``sa.pub``: the service-account token signing pair.
* ``tokens.csv`` (``--token-auth-file``: ``token,user,uid,"group,group"``): the identities Topogov's
  own code and people use, a bearer token each, so the fault proxy can pass them through.
"""

from __future__ import annotations

import datetime as dt
import ipaddress
import secrets
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

# The people and programs with a bearer token: (user, groups). Admin is for kubectl and the tests;
# the two Topogov identities are the groups deploy/rbac.yaml binds (EKS access entries map the
# Lambda roles to them).
IDENTITIES = {
    "admin": ("topogov-admin", ("system:masters",)),
    "reconciler": ("topogov-reconciler", ("topogov:reconciler",)),
    "api": ("topogov-api", ("topogov:api",)),
}
# Components with a client certificate: name -> (user, group)
COMPONENTS = {
    "controller-manager": ("system:kube-controller-manager", None),
    "scheduler": ("system:kube-scheduler", None),
    "kwok": ("kwok-controller", None),
    "kueue": ("kueue-manager", None),
    "hyperpod-operator": ("hyperpod-training-operator", None),
    "jobset": ("jobset-manager", None),
    "training-operator": ("training-operator", None),
}
_DAYS = 365


def _key() -> ec.EllipticCurvePrivateKey:
    return ec.generate_private_key(ec.SECP256R1())


def _pem_key(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )


def _name(cn: str, org: str | None = None) -> x509.Name:
    attrs = [x509.NameAttribute(NameOID.COMMON_NAME, cn)]
    if org:
        attrs.append(x509.NameAttribute(NameOID.ORGANIZATION_NAME, org))
    return x509.Name(attrs)


@dataclass(frozen=True)
class Issuer:
    cert: x509.Certificate
    key: ec.EllipticCurvePrivateKey


def _ca(cn: str) -> Issuer:
    key = _key()
    now = dt.datetime.now(dt.UTC) - dt.timedelta(minutes=5)
    cert = (
        x509.CertificateBuilder()
        .subject_name(_name(cn))
        .issuer_name(_name(cn))
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now)
        .not_valid_after(now + dt.timedelta(days=_DAYS))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                key_cert_sign=True,
                crl_sign=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .sign(key, hashes.SHA256())
    )
    return Issuer(cert, key)


def _leaf(
    issuer: Issuer, cn: str, *, org: str | None = None, server: bool = False, dns: tuple[str, ...] = ()
) -> tuple[x509.Certificate, ec.EllipticCurvePrivateKey]:
    key = _key()
    now = dt.datetime.now(dt.UTC) - dt.timedelta(minutes=5)
    builder = (
        x509.CertificateBuilder()
        .subject_name(_name(cn, org))
        .issuer_name(issuer.cert.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now)
        .not_valid_after(now + dt.timedelta(days=_DAYS))
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(
            x509.ExtendedKeyUsage(
                [ExtendedKeyUsageOID.SERVER_AUTH if server else ExtendedKeyUsageOID.CLIENT_AUTH]
            ),
            critical=False,
        )
    )
    if server:
        names: list[x509.GeneralName] = [x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]
        names += [x509.DNSName(d) for d in ("localhost", *dns)]
        builder = builder.add_extension(x509.SubjectAlternativeName(names), critical=False)
    return builder.sign(issuer.key, hashes.SHA256()), key


def _write(directory: Path, name: str, cert: x509.Certificate, key: ec.EllipticCurvePrivateKey) -> None:
    (directory / f"{name}.crt").write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    (directory / f"{name}.key").write_bytes(_pem_key(key))
    (directory / f"{name}.key").chmod(0o600)


@dataclass(frozen=True)
class Pki:
    directory: Path

    def path(self, name: str) -> Path:
        return self.directory / name

    @property
    def ca(self) -> Path:
        return self.path("ca.crt")

    @property
    def webhook_ca(self) -> Path:
        return self.path("webhook-ca.crt")

    def token(self, identity: str) -> str:
        for line in self.path("tokens.csv").read_text().splitlines():
            token, user, *_ = line.split(",", 3)
            if user == IDENTITIES[identity][0]:
                return token
        raise KeyError(identity)


def make_pki(directory: Path) -> Pki:
    """Everything the cluster needs in ``directory`` (made once; kept when it is there, a component's
    certificate added when a directory made before that component lacks it)."""
    pki = Pki(directory)
    if pki.path("tokens.csv").exists():
        _add_missing_components(pki)
        return pki
    directory.mkdir(parents=True, exist_ok=True)
    ca = _ca("topogov-local-ca")
    _write(directory, "ca", ca.cert, ca.key)
    api_dns = (
        "kubernetes",
        "kubernetes.default",
        "kubernetes.default.svc",
        "kubernetes.default.svc.cluster.local",
    )
    _write(directory, "apiserver", *_leaf(ca, "kube-apiserver", server=True, dns=api_dns))
    _write(directory, "proxy", *_leaf(ca, "topogov-kubernetes-proxy", server=True))
    _write(
        directory,
        "apiserver-kubelet-client",
        *_leaf(ca, "kube-apiserver-kubelet-client", org="system:masters"),
    )
    for name, (user, group) in COMPONENTS.items():
        _write(directory, name, *_leaf(ca, user, org=group))
    hook = _ca("topogov-local-webhook-ca")
    _write(directory, "webhook-ca", hook.cert, hook.key)
    _write(directory, "webhook", *_leaf(hook, "kueue-webhook", server=True))
    _write(directory, "metrics", *_leaf(hook, "kueue-metrics", server=True))
    sa = _key()
    pki.path("sa.key").write_bytes(_pem_key(sa))
    pki.path("sa.pub").write_bytes(
        sa.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        )
    )
    lines = []
    for i, (user, groups) in enumerate(IDENTITIES.values()):
        lines.append(f'{secrets.token_urlsafe(24)},{user},{1000 + i},"{",".join(groups)}"')
    pki.path("tokens.csv").write_text("\n".join(lines) + "\n")
    pki.path("tokens.csv").chmod(0o600)
    return pki


def _add_missing_components(pki: Pki) -> None:
    """A client certificate for each component of :data:`COMPONENTS` the directory has none for,
    signed by its CA."""
    missing = [name for name in COMPONENTS if not pki.path(f"{name}.crt").exists()]
    if not missing:
        return
    cert = x509.load_pem_x509_certificate(pki.ca.read_bytes())
    key = serialization.load_pem_private_key(pki.path("ca.key").read_bytes(), password=None)
    assert isinstance(key, ec.EllipticCurvePrivateKey)
    issuer = Issuer(cert, key)
    for name in missing:
        user, group = COMPONENTS[name]
        _write(pki.directory, name, *_leaf(issuer, user, org=group))
