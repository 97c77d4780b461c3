"""``talosctl upgrade-k8s``: upgrade Kubernetes on a running cluster, as Talos 1.7.

Talos 1.7.6's flags and defaults: ``--from`` (detected from the kube-system pods when empty, as
Talos: "automatically detected the lowest Kubernetes version ..."), ``--to`` (1.30.3),
``--dry-run``, ``--pre-pull-images`` and ``--upgrade-kubelet`` (both on; ``--upgrade-kubelet=false``
turns one off), the five image flags (repositories without a tag: the tag is ``v<to>``),
``--endpoint`` (the Kubernetes API server instead of the kubeconfig's: ``host``, ``host:port`` or
``https://host:port``, port 6443 when none, as Talos), ``--with-docs`` and
``--with-examples`` (how each patched machine config is re-encoded). The steps are
:mod:`ichor.client.upgrade_k8s`'s; the one ``-n`` node (or the endpoint) serves the kubeconfig.
"""

from __future__ import annotations

from typing import Any

import click

from ichor.cli._lazy import CobraCommand
from ichor.cli._nodecmd import run_talos
from ichor.machinery.constants import (
    DEFAULT_KUBERNETES_VERSION,
    KUBE_APISERVER_IMAGE,
    KUBE_CONTROLLER_MANAGER_IMAGE,
    KUBE_PROXY_IMAGE,
    KUBE_SCHEDULER_IMAGE,
    KUBELET_IMAGE,
)

LONG_HELP = "Command runs upgrade of Kubernetes control plane components between specified versions."


@click.command("upgrade-k8s", cls=CobraCommand, short_help="Upgrade Kubernetes control plane in the Talos cluster.",
               help=LONG_HELP)  # fmt: skip
@click.option(
    "--from", "from_version", default="", help="the Kubernetes control plane version to upgrade from"
)
@click.option("--to", "to_version", default=DEFAULT_KUBERNETES_VERSION, show_default=True,
              help="the Kubernetes control plane version to upgrade to")  # fmt: skip
@click.option("--endpoint", default="", help="the cluster control plane endpoint")
@click.option("--with-examples/--no-with-examples", default=True, show_default=True,
              help="patch all machine configs with the commented examples")  # fmt: skip
@click.option("--with-docs/--no-with-docs", default=True, show_default=True,
              help="patch all machine configs adding the documentation for each field")  # fmt: skip
@click.option(
    "--dry-run", is_flag=True, default=False, help="skip the actual upgrade and show the upgrade plan instead"
)
@click.option("--pre-pull-images/--no-pre-pull-images", default=True, show_default=True,
              help="pre-pull images before upgrade")  # fmt: skip
@click.option("--upgrade-kubelet/--no-upgrade-kubelet", default=True, show_default=True,
              help="upgrade kubelet service")  # fmt: skip
@click.option("--kubelet-image", default=KUBELET_IMAGE, show_default=True, help="kubelet image to use")
@click.option(
    "--apiserver-image", default=KUBE_APISERVER_IMAGE, show_default=True, help="kube-apiserver image to use"
)
@click.option("--controller-manager-image", default=KUBE_CONTROLLER_MANAGER_IMAGE, show_default=True,
              help="kube-controller-manager image to use")  # fmt: skip
@click.option(
    "--scheduler-image", default=KUBE_SCHEDULER_IMAGE, show_default=True, help="kube-scheduler image to use"
)
@click.option("--proxy-image", default=KUBE_PROXY_IMAGE, show_default=True, help="kube-proxy image to use")
def upgrade_k8s(
    from_version: str,
    to_version: str,
    endpoint: str,
    with_examples: bool,
    with_docs: bool,
    dry_run: bool,
    pre_pull_images: bool,
    upgrade_kubelet: bool,
    kubelet_image: str,
    apiserver_image: str,
    controller_manager_image: str,
    scheduler_image: str,
    proxy_image: str,
) -> None:
    from ichor.client.upgrade_k8s import (
        LiveUpgradeAPI,
        UpgradeOptions,
        UpgradePath,
        detect_lowest_version,
        upgrade_kubernetes,
    )

    async def work(talos: Any) -> None:
        if talos.client.nodes:
            talos.client.require_single_node("upgrade-k8s")
        api = await LiveUpgradeAPI.connect(talos.client, endpoint)
        start = from_version
        if not start:
            start = await detect_lowest_version(api, click.echo)
            click.echo(f"automatically detected the lowest Kubernetes version {start}")
        options = UpgradeOptions(
            UpgradePath.parse(start, to_version), dry_run=dry_run, pre_pull_images=pre_pull_images,
            upgrade_kubelet=upgrade_kubelet, kubelet_image=kubelet_image, apiserver_image=apiserver_image,
            controller_manager_image=controller_manager_image, scheduler_image=scheduler_image,
            proxy_image=proxy_image, with_docs=with_docs, with_examples=with_examples,
        )  # fmt: skip
        await upgrade_kubernetes(api, options, printf=click.echo)

    run_talos(work)
