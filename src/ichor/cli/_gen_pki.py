"""``talosctl gen ca|key|csr|crt|keypair|secrets``: file-producing PKI helpers.

File names, flags and defaults follow Talos 1.7: ``gen ca`` writes ``<org>.crt``, ``<org>.key`` and
``<org>.sha256``; ``gen key`` ``<name>.key``; ``gen csr`` ``<key basename>.csr``; ``gen crt``
``<name>.crt``; ``gen keypair`` ``<org>.crt``/``<org>.key``; ``gen secrets`` ``secrets.yaml``.
Every file is written 0600 through :func:`write_atomic`; existing files need ``-f/--force``, and a
command writing several files checks all of them before writing any.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

_FORCE = click.option("-f", "--force", is_flag=True, help="will overwrite existing files")


def _write_all(files: dict[Path, bytes | str], force: bool) -> None:
    from ichor.machinery.files import check_writable, write_atomic

    for path in files:
        check_writable(path, force=force)
    for path, data in files.items():
        write_atomic(path, data, mode=0o600, force=True)


def _read(path: Path, what: str, flag: str) -> bytes:
    from ichor.machinery.errors import PKIError

    try:
        return path.read_bytes()
    except FileNotFoundError:
        raise PKIError(f"error reading {what}: {str(path)!r} does not exist", hint=f"check {flag}") from None
    except OSError as exc:
        raise PKIError(f"error reading {what} {str(path)!r}: {exc.strerror}", hint=f"check {flag}") from None


@click.command("ca", help="Generates a self-signed X.509 certificate authority")
@click.option("--organization", required=True, help="X.509 distinguished name for the Organization")
@click.option(
    "--hours",
    type=int,
    default=87600,
    show_default=True,
    help="the hours from now on which the certificate validity period ends",
)
@click.option("--rsa", is_flag=True, help="generate in RSA format")
@_FORCE
def gen_ca(organization: str, hours: int, rsa: bool, force: bool) -> None:
    from datetime import timedelta

    from ichor.machinery import pki

    _positive_hours(hours)
    ttl = timedelta(hours=hours)
    ca = (
        pki.new_rsa_ca(organization=organization, ttl=ttl)
        if rsa
        else pki.new_ed25519_ca(organization=organization, ttl=ttl)
    )
    _write_all(
        {
            Path(organization + ".crt"): ca.crt,
            Path(organization + ".sha256"): pki.spki_sha256(ca.crt),
            Path(organization + ".key"): ca.key,
        },
        force,
    )


def _positive_hours(hours: int) -> None:
    if hours <= 0:
        raise click.BadParameter("must be a positive number of hours", param_hint="--hours")


@click.command("key", help="Generates an Ed25519 private key")
@click.option("--name", required=True, help="the basename of the generated file")
@_FORCE
def gen_key(name: str, force: bool) -> None:
    from ichor.machinery import pki

    _write_all({Path(name + ".key"): pki.new_ed25519_key()}, force)


@click.command("csr", help="Generates a CSR using an Ed25519 private key")
@click.option("--key", "key_path", required=True, help="path to the PEM encoded EC or RSA PRIVATE KEY")
@click.option("--ip", required=True, help="generate the certificate for this IP address")
@click.option(
    "--roles",
    default=("os:admin",),
    show_default=True,
    help="roles (comma-separated, repeatable)",
    multiple=True,
)
@_FORCE
def gen_csr(key_path: str, ip: str, roles: tuple[str, ...], force: bool) -> None:
    import ipaddress

    from ichor.machinery import pki
    from ichor.machinery.clientconfig import validate_roles
    from ichor.machinery.errors import PKIError

    try:
        ipaddress.ip_address(ip)
    except ValueError:
        raise PKIError(f"invalid IP: {ip}", hint="pass an IPv4 or IPv6 address to --ip") from None
    role_list = validate_roles([r.strip() for value in roles for r in value.split(",") if r.strip()])
    key_file = Path(key_path)
    key = _read(key_file, "key", "--key")
    csr = pki.new_csr(key, organizations=role_list, ip_addresses=[ip])
    _write_all({key_file.with_suffix(".csr"): csr}, force)


@click.command("crt", help="Generates an X.509 Ed25519 certificate")
@click.option("--name", required=True, help="the basename of the generated file")
@click.option("--ca", "ca_base", required=True, help="path to the PEM encoded CERTIFICATE")
@click.option("--csr", "csr_path", required=True, help="path to the PEM encoded CERTIFICATE REQUEST")
@click.option(
    "--hours",
    type=int,
    default=24,
    show_default=True,
    help="the hours from now on which the certificate validity period ends",
)
@_FORCE
def gen_crt(name: str, ca_base: str, csr_path: str, hours: int, force: bool) -> None:
    from datetime import timedelta

    from ichor.machinery import pki

    _positive_hours(hours)
    # Like Talos, --ca is the CA's basename: <ca>.crt and <ca>.key are read.
    crt_file, key_file = Path(ca_base + ".crt"), Path(ca_base + ".key")
    ca = pki.CertKey(_read(crt_file, "CA cert", "--ca"), _read(key_file, "key file", "--ca"))
    pki.load_certificate(ca.crt, what=str(crt_file))
    pki.load_private_key(ca.key, what=str(key_file))
    csr = pki.load_csr(_read(Path(csr_path), "CSR", "--csr"), what=csr_path)
    crt = pki.issue_certificate(ca, csr, ttl=timedelta(hours=hours), server=False, client=True)
    _write_all({Path(name + ".crt"): crt}, force)


@click.command("keypair", help="Generates an X.509 Ed25519 key pair")
@click.option("--ip", default="", help="generate the certificate for this IP address")
@click.option("--organization", required=True, help="X.509 distinguished name for the Organization")
@_FORCE
def gen_keypair(ip: str, organization: str, force: bool) -> None:
    from datetime import timedelta

    from ichor.machinery import pki

    # Talos builds a self-signed CA here with the library's default 24 h lifetime.
    ca = pki.new_self_signed_ca(
        pki.new_ed25519_key(),
        organization=organization,
        ttl=timedelta(hours=24),
        ip_addresses=[ip] if ip else [],
    )
    _write_all({Path(organization + ".crt"): ca.crt, Path(organization + ".key"): ca.key}, force)


@click.command("secrets", help="Generates a secrets bundle file which can later be used to generate a config")
@click.option(
    "-o",
    "--output-file",
    default="secrets.yaml",
    show_default=True,
    help='path of the output file, or "-" for stdout',
)
@click.option(
    "--talos-version",
    default="",
    help="the desired Talos version to generate secrets bundle for (backwards compatibility, e.g. v0.8)",
)
@click.option(
    "--from-controlplane-config",
    default="",
    help="use the provided controlplane Talos machine configuration as input",
)
@click.option(
    "-p",
    "--from-kubernetes-pki",
    default="",
    help="use a Kubernetes PKI directory (e.g. /etc/kubernetes/pki) as input",
)
@click.option(
    "-t", "--kubernetes-bootstrap-token", default="", help="use the provided bootstrap token as input"
)
@_FORCE
def gen_secrets(
    output_file: str,
    talos_version: str,
    from_controlplane_config: str,
    from_kubernetes_pki: str,
    kubernetes_bootstrap_token: str,
    force: bool,
) -> None:
    from ichor.machinery.contract import CURRENT_CONTRACT, VersionContract
    from ichor.machinery.files import check_writable
    from ichor.machinery.secrets import SecretsBundle

    if from_controlplane_config and from_kubernetes_pki:
        raise click.UsageError("--from-controlplane-config and --from-kubernetes-pki are mutually exclusive")
    if kubernetes_bootstrap_token and not from_kubernetes_pki:
        raise click.UsageError("-t/--kubernetes-bootstrap-token is only used with --from-kubernetes-pki")
    contract = VersionContract.parse(talos_version) if talos_version else CURRENT_CONTRACT
    if output_file != "-":
        # Fail before the (slow) key generation, not after.
        check_writable(Path(output_file), force=force)

    if from_kubernetes_pki:
        bundle = SecretsBundle.from_kubernetes_pki(from_kubernetes_pki, kubernetes_bootstrap_token, contract)
    elif from_controlplane_config:
        bundle = SecretsBundle.from_controlplane_config(_load_v1alpha1(Path(from_controlplane_config)))
    else:
        bundle = SecretsBundle.generate(contract)

    text = bundle.to_yaml()
    if output_file == "-":
        click.echo(text, nl=False)
        return
    _write_all({Path(output_file): text}, force)


def _load_v1alpha1(path: Path) -> Any:
    from ichor.machinery.docident import is_v1alpha1
    from ichor.machinery.errors import SecretsError
    from ichor.machinery.yamlio import load_documents

    hint = "pass the controlplane.yaml written by `talosctl gen config`"
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise SecretsError(
            f"failed to load controlplane config: {str(path)!r} does not exist", hint=hint
        ) from None
    except OSError as exc:
        raise SecretsError(
            f"failed to load controlplane config {str(path)!r}: {exc.strerror}", hint=hint
        ) from None
    for doc in load_documents(data, source=str(path)):
        if isinstance(doc, dict) and is_v1alpha1(doc):
            return doc
    raise SecretsError(
        f"failed to load controlplane config: {str(path)!r} has no v1alpha1 machine config", hint=hint
    )
