"""``talosctl gen``: the group; each sub-command lives in its own module and loads lazily."""

from __future__ import annotations

import click

from ichor.cli._lazy import LazyGroup


@click.group(cls=LazyGroup, help="Generate CAs, certificates, and private keys")
def gen() -> None:
    pass


assert isinstance(gen, LazyGroup)
gen.add_lazy("ca", "ichor.cli._gen_pki:gen_ca", "Generates a self-signed X.509 certificate authority")
gen.add_lazy("key", "ichor.cli._gen_pki:gen_key", "Generates an Ed25519 private key")
gen.add_lazy("csr", "ichor.cli._gen_pki:gen_csr", "Generates a CSR using an Ed25519 private key")
gen.add_lazy("crt", "ichor.cli._gen_pki:gen_crt", "Generates an X.509 Ed25519 certificate")
gen.add_lazy("keypair", "ichor.cli._gen_pki:gen_keypair", "Generates an X.509 Ed25519 key pair")
gen.add_lazy(
    "secrets",
    "ichor.cli._gen_pki:gen_secrets",
    "Generates a secrets bundle file which can later be used to generate a config",
)
gen.add_lazy(
    "config", "ichor.cli._gen_config:gen_config", "Generates a set of configuration files for Talos cluster"
)
