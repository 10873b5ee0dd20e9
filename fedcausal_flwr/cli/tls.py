"""Certificates and SuperNode keys for a secure Flower deployment (TLS + node authentication).

What :func:`fedcausal_flwr.cli.deployment.deploy` uses, and what a user can call to prepare a
deployment across machines:

- :func:`make_certificates` writes a local CA (``ca.pem``, ``ca.key``) and a SuperLink
  certificate signed by it (``server.pem``, ``server.key``) valid for the given host names and
  IP addresses. Give ``flower-superlink`` ``--ssl-ca-certfile ca.pem --ssl-certfile server.pem
  --ssl-keyfile server.key``; SuperNodes and ``flwr`` get only ``ca.pem`` (``--root-certificates``
  / ``root-certificates``).
- :func:`make_node_key` writes a SuperNode's key pair in OpenSSH format on NIST P-384, the form
  Flower 1.41 reads: the private key for ``flower-supernode --auth-supernode-private-key``, the
  ``.pub`` file for ``flwr supernode register``.

Both keep existing files, so a deployment directory creates them once and reuses them.
Uses the ``cryptography`` package (a Flower dependency). ``python -m fedcausal_flwr.cli.tls DIR
[HOST ...]`` writes the certificates for a SuperLink reachable as HOST (default: loopback).
"""

from __future__ import annotations

import datetime as dt
import ipaddress
import os
import sys
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

LOOPBACK = ("127.0.0.1", "localhost")
DAYS = 365


def _write(path: Path, data: bytes, private: bool = False) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600 if private else 0o644)
    with os.fdopen(fd, "wb") as f:
        f.write(data)
    tmp.replace(path)


def _pem_key(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption())


def _san(hosts: tuple[str, ...] | list[str]) -> x509.SubjectAlternativeName:
    names: list[x509.GeneralName] = []
    for h in hosts:
        try:
            names.append(x509.IPAddress(ipaddress.ip_address(h)))
        except ValueError:
            names.append(x509.DNSName(h))
    return x509.SubjectAlternativeName(names)


def make_certificates(directory: Path, hosts: tuple[str, ...] | list[str] = LOOPBACK,
                      days: int = DAYS) -> dict[str, Path]:
    """A CA and a SuperLink certificate for ``hosts`` in ``directory`` (kept if present).

    Parameters
    ----------
    directory
        Where ``ca.pem``, ``ca.key``, ``server.pem`` and ``server.key`` go (keys mode 0600).
    hosts
        IP addresses and DNS names the SuperNodes and ``flwr`` use to reach the SuperLink;
        they go into the certificate's subject alternative names.
    days
        Validity.

    Returns
    -------
    dict
        ``{"ca": ..., "ca_key": ..., "cert": ..., "key": ...}`` paths.
    """
    d = Path(directory)
    paths = {"ca": d / "ca.pem", "ca_key": d / "ca.key", "cert": d / "server.pem",
             "key": d / "server.key"}
    if all(p.exists() for p in paths.values()):
        return paths
    now = dt.datetime.now(dt.UTC)
    ca_key = ec.generate_private_key(ec.SECP384R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "fedcausal-flwr local CA")])
    ca = (x509.CertificateBuilder().subject_name(ca_name).issuer_name(ca_name)
          .public_key(ca_key.public_key()).serial_number(x509.random_serial_number())
          .not_valid_before(now - dt.timedelta(minutes=5))
          .not_valid_after(now + dt.timedelta(days=days))
          .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
          .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True,
                                       content_commitment=False, key_encipherment=False,
                                       data_encipherment=False, key_agreement=False,
                                       encipher_only=False, decipher_only=False), critical=True)
          .add_extension(x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()),
                         critical=False)
          .sign(ca_key, hashes.SHA256()))
    key = ec.generate_private_key(ec.SECP384R1())
    cert = (x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, hosts[0])]))
            .issuer_name(ca_name).public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - dt.timedelta(minutes=5))
            .not_valid_after(now + dt.timedelta(days=days))
            .add_extension(_san(hosts), critical=False)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]),
                           critical=False)
            .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(
                ca_key.public_key()), critical=False)
            .sign(ca_key, hashes.SHA256()))
    _write(paths["ca_key"], _pem_key(ca_key), private=True)
    _write(paths["key"], _pem_key(key), private=True)
    _write(paths["cert"], cert.public_bytes(serialization.Encoding.PEM))
    _write(paths["ca"], ca.public_bytes(serialization.Encoding.PEM))
    return paths


def make_node_key(path: Path) -> tuple[Path, Path]:
    """A SuperNode key pair: ``path`` (OpenSSH private key, 0600) and ``path.pub``.

    NIST P-384 in OpenSSH format, as ``flower-supernode --auth-supernode-private-key`` and
    ``flwr supernode register`` read them (``ssh-keygen -t ecdsa -b 384 -N '' -f PATH`` makes
    the same). Kept if both files exist.
    """
    path = Path(path)
    pub = path.with_name(path.name + ".pub")
    if path.exists() and pub.exists():
        return path, pub
    key = ec.generate_private_key(ec.SECP384R1())
    _write(path, key.private_bytes(serialization.Encoding.PEM,
                                   serialization.PrivateFormat.OpenSSH,
                                   serialization.NoEncryption()), private=True)
    _write(pub, key.public_key().public_bytes(serialization.Encoding.OpenSSH,
                                              serialization.PublicFormat.OpenSSH) + b"\n")
    return path, pub


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit("usage: python -m fedcausal_flwr.cli.tls DIR [HOST ...]")
    out = make_certificates(Path(sys.argv[1]), tuple(sys.argv[2:]) or LOOPBACK)
    print("\n".join(f"{k}: {v}" for k, v in out.items()))
