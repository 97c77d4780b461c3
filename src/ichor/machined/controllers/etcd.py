"""Area ``etcd``: from ``cluster.etcd`` to what this node's etcd runs with.

* ``etcd.ConfigController``: MachineConfig + MachineType -> EtcdConfig ``etcd`` (control planes only);
* ``etcd.SpecController``: EtcdConfig + HostnameStatus + NodeAddresses -> EtcdSpec ``etcd``: the
  member name and the advertised/listen addresses picked by ``advertisedSubnets``/``listenSubnets``.
  A subnet that matches no address of the node is a wait naming the key to fix. A shared IP (a
  ``vip`` OperatorSpec) is never one of them: it moves between nodes, and etcd would restart with it.
* ``etcd.MemberController``: Services ``etcd`` (running, healthy) -> EtcdMember ``local``, the member
  id this node's etcd reports.

The etcd service (:mod:`ichor.machined.services.etcd`) runs from EtcdSpec and restarts when it changes.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from ichor import etcd as etcdlib
from ichor.machined.controllers.config import ACTIVE_CONFIG, active_config
from ichor.machined.cosi import ControllerContext, Input, SkipReconcile, TransformController, WaitingFor
from ichor.machined.resources import (
    ETCD_CONFIGS,
    ETCD_ID,
    ETCD_MEMBER_LOCAL_ID,
    ETCD_MEMBERS,
    ETCD_SPECS,
    HOSTNAME_STATUS_ID,
    HOSTNAME_STATUSES,
    MACHINE_TYPE_ID,
    MACHINE_TYPES,
    NODE_ADDRESS_CURRENT_ID,
    NODE_ADDRESS_FILTER_NO_K8S,
    NODE_ADDRESSES,
    OPERATOR_SPECS,
    SERVICES,
    EtcdConfigSpec,
    EtcdMemberSpec,
    EtcdSpecSpec,
    filtered_node_address_id,
)

_ETCD_ADDRESSES = filtered_node_address_id(NODE_ADDRESS_CURRENT_ID, NODE_ADDRESS_FILTER_NO_K8S)
"""Talos's ``current-no-k8s``: etcd never advertises or listens on a pod network address."""

__all__ = ["LocalMemberID", "etcd_config_controller", "etcd_member_controller", "etcd_spec_controller"]


def _split(subnets: list[str] | None) -> tuple[tuple[str, ...], tuple[str, ...]]:
    values = [s.strip() for s in subnets or []]
    return tuple(s for s in values if not s.startswith("!")), tuple(
        s[1:] for s in values if s.startswith("!")
    )


def etcd_config_controller() -> TransformController[EtcdConfigSpec]:
    def derive(ctx: ControllerContext) -> dict[str, EtcdConfigSpec]:
        config = active_config(ctx)
        machine_type = ctx.get_or_none(MACHINE_TYPES, MACHINE_TYPE_ID)
        if machine_type is None:
            raise SkipReconcile
        if not machine_type.spec.is_control_plane:
            return {}
        etcd = config.cluster.etcd if config.cluster is not None else None
        if etcd is None:
            return {ETCD_ID: EtcdConfigSpec()}
        advertise_valid, advertise_exclude = _split(etcd.advertised_subnets)
        listen_valid, listen_exclude = _split(etcd.listen_subnets)
        return {ETCD_ID: EtcdConfigSpec(
            advertise_valid_subnets=advertise_valid, advertise_exclude_subnets=advertise_exclude,
            listen_valid_subnets=listen_valid, listen_exclude_subnets=listen_exclude, image=etcd.image or "",
            extra_args={str(k): str(v) for k, v in (etcd.extra_args or {}).items()},
        )}  # fmt: skip

    return TransformController(
        "etcd.ConfigController", inputs=[ACTIVE_CONFIG, Input(MACHINE_TYPES, id=MACHINE_TYPE_ID)],
        output=ETCD_CONFIGS, map_inputs=derive,
    )  # fmt: skip


def etcd_spec_controller(*, exclusive: bool = True) -> TransformController[EtcdSpecSpec]:
    """``exclusive``: the node shares the host's network (a process node), so etcd binds only its
    own addresses; a node with a network namespace of its own listens as Talos does (the wildcard,
    or the ``listenSubnets`` matches plus loopback)."""

    def derive(ctx: ControllerContext) -> dict[str, EtcdSpecSpec]:
        config = ctx.get_or_none(ETCD_CONFIGS, ETCD_ID)
        if config is None:
            return {}
        hostname = ctx.get_or_none(HOSTNAME_STATUSES, HOSTNAME_STATUS_ID)
        addresses = ctx.get_or_none(NODE_ADDRESSES, _ETCD_ADDRESSES)
        if hostname is None or addresses is None:
            raise SkipReconcile
        shared = {r.spec.vip.ip for r in ctx.list(OPERATOR_SPECS) if r.spec.operator == "vip"}
        every = ctx.get_or_none(NODE_ADDRESSES, NODE_ADDRESS_CURRENT_ID)
        if not addresses.spec.addresses and every is not None and every.spec.addresses:
            raise WaitingFor(
                "etcd addresses",
                f"every address of the node ({', '.join(str(p.ip) for p in every.spec.addresses)}) is in the "
                "Kubernetes pod or service subnets: give the node an address outside "
                "cluster.network.podSubnets and cluster.network.serviceSubnets (or move those subnets)",
            )
        try:
            selected = etcdlib.select_addresses(
                [str(p.ip) for p in addresses.spec.addresses if str(p.ip) not in shared], advertised_subnets=config.spec.advertised_subnets,
                listen_subnets=config.spec.listen_subnets, exclusive=exclusive,
            )  # fmt: skip
        except etcdlib.EtcdConfigError as err:
            raise WaitingFor("etcd addresses", f"{err} ({err.hint})" if err.hint else str(err)) from None
        return {ETCD_ID: EtcdSpecSpec(
            name=hostname.spec.hostname, advertised_addresses=selected.advertised,
            listen_peer_addresses=selected.listen_peer, listen_client_addresses=selected.listen_client,
            image=config.spec.image, extra_args=dict(config.spec.extra_args),
        )}  # fmt: skip

    return TransformController(
        "etcd.SpecController",
        inputs=[Input(ETCD_CONFIGS, id=ETCD_ID), Input(HOSTNAME_STATUSES, id=HOSTNAME_STATUS_ID),
                Input(NODE_ADDRESSES, id=_ETCD_ADDRESSES), Input(NODE_ADDRESSES, id=NODE_ADDRESS_CURRENT_ID),
                Input(OPERATOR_SPECS)],
        output=ETCD_SPECS, map_inputs=derive,
    )  # fmt: skip


LocalMemberID = Callable[[], Awaitable[int]]
"""Asks this node's etcd (and only it) for its member id (etcd's ``Status`` header)."""


def etcd_member_controller(local_member_id: LocalMemberID | None) -> TransformController[EtcdMemberSpec]:
    """``etcd.MemberController``: this node's etcd member id as EtcdMember ``local`` while the etcd
    service runs healthy (Talos's rule); none otherwise. Talos's client reads it for
    ``etcd leave``/``remove-member`` and reset; with no way to ask etcd (``None``) there is none."""

    async def derive(ctx: ControllerContext) -> dict[str, EtcdMemberSpec]:
        service = ctx.get_or_none(SERVICES, "etcd")
        if service is None or not (service.spec.running and service.spec.healthy) or local_member_id is None:
            return {}
        try:
            member = await local_member_id()
        except (etcdlib.EtcdError, OSError) as exc:
            raise WaitingFor("etcd", f"cannot read the local member id: {exc}", retry_after=5.0) from None
        return {ETCD_MEMBER_LOCAL_ID: EtcdMemberSpec(member_id=f"{member:016x}")}

    return TransformController(
        "etcd.MemberController", inputs=[Input(SERVICES, id="etcd")], output=ETCD_MEMBERS, map_inputs=derive
    )
