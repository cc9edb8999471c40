"""The local cluster's certificates (``topogov_local.cluster.pki``): a cluster directory made before a
component was added (``.topogov/local/cluster/pki`` of an earlier checkout, say, made before JobSet
and the training operator) gets that component's client certificate from its own CA when the cluster
starts again, and keeps everything else it had."""

from __future__ import annotations

from cryptography import x509
from cryptography.x509.oid import NameOID

from topogov_local.cluster.pki import COMPONENTS, make_pki


def test_a_component_added_since_the_pki_was_made_gets_a_certificate_from_its_ca(tmp_path):
    pki = make_pki(tmp_path)
    for ext in ("crt", "key"):
        pki.path(f"jobset.{ext}").unlink()
    kept = {p.name: p.read_bytes() for p in tmp_path.iterdir()}

    again = make_pki(tmp_path)

    cert = x509.load_pem_x509_certificate(again.path("jobset.crt").read_bytes())
    ca = x509.load_pem_x509_certificate(again.ca.read_bytes())
    cert.verify_directly_issued_by(ca)
    assert cert.subject.get_attributes_for_oid(NameOID.COMMON_NAME)[0].value == COMPONENTS["jobset"][0]
    assert {p.name: p.read_bytes() for p in tmp_path.iterdir() if p.name in kept} == kept
    assert again.path("jobset.key").stat().st_mode & 0o077 == 0


def test_every_component_has_a_certificate_of_its_user(tmp_path):
    pki = make_pki(tmp_path)
    for name, (user, _group) in COMPONENTS.items():
        cert = x509.load_pem_x509_certificate(pki.path(f"{name}.crt").read_bytes())
        assert cert.subject.get_attributes_for_oid(NameOID.COMMON_NAME)[0].value == user
