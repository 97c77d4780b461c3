import datetime

from ichor.api.gen.common import common_pb2 as _common_pb2
from google.protobuf import duration_pb2 as _duration_pb2
from ichor.api.gen.resource.definitions.enums import enums_pb2 as _enums_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class AddressSpecSpec(_message.Message):
    __slots__ = ("address", "link_name", "family", "scope", "flags", "announce_with_arp", "config_layer")
    ADDRESS_FIELD_NUMBER: _ClassVar[int]
    LINK_NAME_FIELD_NUMBER: _ClassVar[int]
    FAMILY_FIELD_NUMBER: _ClassVar[int]
    SCOPE_FIELD_NUMBER: _ClassVar[int]
    FLAGS_FIELD_NUMBER: _ClassVar[int]
    ANNOUNCE_WITH_ARP_FIELD_NUMBER: _ClassVar[int]
    CONFIG_LAYER_FIELD_NUMBER: _ClassVar[int]
    address: _common_pb2.NetIPPrefix
    link_name: str
    family: _enums_pb2.NethelpersFamily
    scope: _enums_pb2.NethelpersScope
    flags: int
    announce_with_arp: bool
    config_layer: _enums_pb2.NetworkConfigLayer
    def __init__(self, address: _Optional[_Union[_common_pb2.NetIPPrefix, _Mapping]] = ..., link_name: _Optional[str] = ..., family: _Optional[_Union[_enums_pb2.NethelpersFamily, str]] = ..., scope: _Optional[_Union[_enums_pb2.NethelpersScope, str]] = ..., flags: _Optional[int] = ..., announce_with_arp: _Optional[bool] = ..., config_layer: _Optional[_Union[_enums_pb2.NetworkConfigLayer, str]] = ...) -> None: ...

class AddressStatusSpec(_message.Message):
    __slots__ = ("address", "local", "broadcast", "anycast", "multicast", "link_index", "link_name", "family", "scope", "flags")
    ADDRESS_FIELD_NUMBER: _ClassVar[int]
    LOCAL_FIELD_NUMBER: _ClassVar[int]
    BROADCAST_FIELD_NUMBER: _ClassVar[int]
    ANYCAST_FIELD_NUMBER: _ClassVar[int]
    MULTICAST_FIELD_NUMBER: _ClassVar[int]
    LINK_INDEX_FIELD_NUMBER: _ClassVar[int]
    LINK_NAME_FIELD_NUMBER: _ClassVar[int]
    FAMILY_FIELD_NUMBER: _ClassVar[int]
    SCOPE_FIELD_NUMBER: _ClassVar[int]
    FLAGS_FIELD_NUMBER: _ClassVar[int]
    address: _common_pb2.NetIPPrefix
    local: _common_pb2.NetIP
    broadcast: _common_pb2.NetIP
    anycast: _common_pb2.NetIP
    multicast: _common_pb2.NetIP
    link_index: int
    link_name: str
    family: _enums_pb2.NethelpersFamily
    scope: _enums_pb2.NethelpersScope
    flags: int
    def __init__(self, address: _Optional[_Union[_common_pb2.NetIPPrefix, _Mapping]] = ..., local: _Optional[_Union[_common_pb2.NetIP, _Mapping]] = ..., broadcast: _Optional[_Union[_common_pb2.NetIP, _Mapping]] = ..., anycast: _Optional[_Union[_common_pb2.NetIP, _Mapping]] = ..., multicast: _Optional[_Union[_common_pb2.NetIP, _Mapping]] = ..., link_index: _Optional[int] = ..., link_name: _Optional[str] = ..., family: _Optional[_Union[_enums_pb2.NethelpersFamily, str]] = ..., scope: _Optional[_Union[_enums_pb2.NethelpersScope, str]] = ..., flags: _Optional[int] = ...) -> None: ...

class BondMasterSpec(_message.Message):
    __slots__ = ("mode", "hash_policy", "lacp_rate", "arp_validate", "arp_all_targets", "primary_index", "primary_reselect", "fail_over_mac", "ad_select", "mii_mon", "up_delay", "down_delay", "arp_interval", "resend_igmp", "min_links", "lp_interval", "packets_per_slave", "num_peer_notif", "tlb_dynamic_lb", "all_slaves_active", "use_carrier", "ad_actor_sys_prio", "ad_user_port_key", "peer_notify_delay")
    MODE_FIELD_NUMBER: _ClassVar[int]
    HASH_POLICY_FIELD_NUMBER: _ClassVar[int]
    LACP_RATE_FIELD_NUMBER: _ClassVar[int]
    ARP_VALIDATE_FIELD_NUMBER: _ClassVar[int]
    ARP_ALL_TARGETS_FIELD_NUMBER: _ClassVar[int]
    PRIMARY_INDEX_FIELD_NUMBER: _ClassVar[int]
    PRIMARY_RESELECT_FIELD_NUMBER: _ClassVar[int]
    FAIL_OVER_MAC_FIELD_NUMBER: _ClassVar[int]
    AD_SELECT_FIELD_NUMBER: _ClassVar[int]
    MII_MON_FIELD_NUMBER: _ClassVar[int]
    UP_DELAY_FIELD_NUMBER: _ClassVar[int]
    DOWN_DELAY_FIELD_NUMBER: _ClassVar[int]
    ARP_INTERVAL_FIELD_NUMBER: _ClassVar[int]
    RESEND_IGMP_FIELD_NUMBER: _ClassVar[int]
    MIN_LINKS_FIELD_NUMBER: _ClassVar[int]
    LP_INTERVAL_FIELD_NUMBER: _ClassVar[int]
    PACKETS_PER_SLAVE_FIELD_NUMBER: _ClassVar[int]
    NUM_PEER_NOTIF_FIELD_NUMBER: _ClassVar[int]
    TLB_DYNAMIC_LB_FIELD_NUMBER: _ClassVar[int]
    ALL_SLAVES_ACTIVE_FIELD_NUMBER: _ClassVar[int]
    USE_CARRIER_FIELD_NUMBER: _ClassVar[int]
    AD_ACTOR_SYS_PRIO_FIELD_NUMBER: _ClassVar[int]
    AD_USER_PORT_KEY_FIELD_NUMBER: _ClassVar[int]
    PEER_NOTIFY_DELAY_FIELD_NUMBER: _ClassVar[int]
    mode: _enums_pb2.NethelpersBondMode
    hash_policy: _enums_pb2.NethelpersBondXmitHashPolicy
    lacp_rate: _enums_pb2.NethelpersLACPRate
    arp_validate: _enums_pb2.NethelpersARPValidate
    arp_all_targets: _enums_pb2.NethelpersARPAllTargets
    primary_index: int
    primary_reselect: _enums_pb2.NethelpersPrimaryReselect
    fail_over_mac: _enums_pb2.NethelpersFailOverMAC
    ad_select: _enums_pb2.NethelpersADSelect
    mii_mon: int
    up_delay: int
    down_delay: int
    arp_interval: int
    resend_igmp: int
    min_links: int
    lp_interval: int
    packets_per_slave: int
    num_peer_notif: int
    tlb_dynamic_lb: int
    all_slaves_active: int
    use_carrier: bool
    ad_actor_sys_prio: int
    ad_user_port_key: int
    peer_notify_delay: int
    def __init__(self, mode: _Optional[_Union[_enums_pb2.NethelpersBondMode, str]] = ..., hash_policy: _Optional[_Union[_enums_pb2.NethelpersBondXmitHashPolicy, str]] = ..., lacp_rate: _Optional[_Union[_enums_pb2.NethelpersLACPRate, str]] = ..., arp_validate: _Optional[_Union[_enums_pb2.NethelpersARPValidate, str]] = ..., arp_all_targets: _Optional[_Union[_enums_pb2.NethelpersARPAllTargets, str]] = ..., primary_index: _Optional[int] = ..., primary_reselect: _Optional[_Union[_enums_pb2.NethelpersPrimaryReselect, str]] = ..., fail_over_mac: _Optional[_Union[_enums_pb2.NethelpersFailOverMAC, str]] = ..., ad_select: _Optional[_Union[_enums_pb2.NethelpersADSelect, str]] = ..., mii_mon: _Optional[int] = ..., up_delay: _Optional[int] = ..., down_delay: _Optional[int] = ..., arp_interval: _Optional[int] = ..., resend_igmp: _Optional[int] = ..., min_links: _Optional[int] = ..., lp_interval: _Optional[int] = ..., packets_per_slave: _Optional[int] = ..., num_peer_notif: _Optional[int] = ..., tlb_dynamic_lb: _Optional[int] = ..., all_slaves_active: _Optional[int] = ..., use_carrier: _Optional[bool] = ..., ad_actor_sys_prio: _Optional[int] = ..., ad_user_port_key: _Optional[int] = ..., peer_notify_delay: _Optional[int] = ...) -> None: ...

class BondSlave(_message.Message):
    __slots__ = ("master_name", "slave_index")
    MASTER_NAME_FIELD_NUMBER: _ClassVar[int]
    SLAVE_INDEX_FIELD_NUMBER: _ClassVar[int]
    master_name: str
    slave_index: int
    def __init__(self, master_name: _Optional[str] = ..., slave_index: _Optional[int] = ...) -> None: ...

class BridgeMasterSpec(_message.Message):
    __slots__ = ("stp",)
    STP_FIELD_NUMBER: _ClassVar[int]
    stp: STPSpec
    def __init__(self, stp: _Optional[_Union[STPSpec, _Mapping]] = ...) -> None: ...

class BridgeSlave(_message.Message):
    __slots__ = ("master_name",)
    MASTER_NAME_FIELD_NUMBER: _ClassVar[int]
    master_name: str
    def __init__(self, master_name: _Optional[str] = ...) -> None: ...

class DHCP4OperatorSpec(_message.Message):
    __slots__ = ("route_metric", "skip_hostname_request")
    ROUTE_METRIC_FIELD_NUMBER: _ClassVar[int]
    SKIP_HOSTNAME_REQUEST_FIELD_NUMBER: _ClassVar[int]
    route_metric: int
    skip_hostname_request: bool
    def __init__(self, route_metric: _Optional[int] = ..., skip_hostname_request: _Optional[bool] = ...) -> None: ...

class DHCP6OperatorSpec(_message.Message):
    __slots__ = ("duid", "route_metric", "skip_hostname_request")
    DUID_FIELD_NUMBER: _ClassVar[int]
    ROUTE_METRIC_FIELD_NUMBER: _ClassVar[int]
    SKIP_HOSTNAME_REQUEST_FIELD_NUMBER: _ClassVar[int]
    duid: str
    route_metric: int
    skip_hostname_request: bool
    def __init__(self, duid: _Optional[str] = ..., route_metric: _Optional[int] = ..., skip_hostname_request: _Optional[bool] = ...) -> None: ...

class DNSResolveCacheSpec(_message.Message):
    __slots__ = ("status",)
    STATUS_FIELD_NUMBER: _ClassVar[int]
    status: str
    def __init__(self, status: _Optional[str] = ...) -> None: ...

class HardwareAddrSpec(_message.Message):
    __slots__ = ("name", "hardware_addr")
    NAME_FIELD_NUMBER: _ClassVar[int]
    HARDWARE_ADDR_FIELD_NUMBER: _ClassVar[int]
    name: str
    hardware_addr: bytes
    def __init__(self, name: _Optional[str] = ..., hardware_addr: _Optional[bytes] = ...) -> None: ...

class HostDNSConfigSpec(_message.Message):
    __slots__ = ("enabled", "listen_addresses", "service_host_dns_address", "resolve_member_names")
    ENABLED_FIELD_NUMBER: _ClassVar[int]
    LISTEN_ADDRESSES_FIELD_NUMBER: _ClassVar[int]
    SERVICE_HOST_DNS_ADDRESS_FIELD_NUMBER: _ClassVar[int]
    RESOLVE_MEMBER_NAMES_FIELD_NUMBER: _ClassVar[int]
    enabled: bool
    listen_addresses: _containers.RepeatedCompositeFieldContainer[_common_pb2.NetIPPort]
    service_host_dns_address: _common_pb2.NetIP
    resolve_member_names: bool
    def __init__(self, enabled: _Optional[bool] = ..., listen_addresses: _Optional[_Iterable[_Union[_common_pb2.NetIPPort, _Mapping]]] = ..., service_host_dns_address: _Optional[_Union[_common_pb2.NetIP, _Mapping]] = ..., resolve_member_names: _Optional[bool] = ...) -> None: ...

class HostnameSpecSpec(_message.Message):
    __slots__ = ("hostname", "domainname", "config_layer")
    HOSTNAME_FIELD_NUMBER: _ClassVar[int]
    DOMAINNAME_FIELD_NUMBER: _ClassVar[int]
    CONFIG_LAYER_FIELD_NUMBER: _ClassVar[int]
    hostname: str
    domainname: str
    config_layer: _enums_pb2.NetworkConfigLayer
    def __init__(self, hostname: _Optional[str] = ..., domainname: _Optional[str] = ..., config_layer: _Optional[_Union[_enums_pb2.NetworkConfigLayer, str]] = ...) -> None: ...

class HostnameStatusSpec(_message.Message):
    __slots__ = ("hostname", "domainname")
    HOSTNAME_FIELD_NUMBER: _ClassVar[int]
    DOMAINNAME_FIELD_NUMBER: _ClassVar[int]
    hostname: str
    domainname: str
    def __init__(self, hostname: _Optional[str] = ..., domainname: _Optional[str] = ...) -> None: ...

class LinkRefreshSpec(_message.Message):
    __slots__ = ("generation",)
    GENERATION_FIELD_NUMBER: _ClassVar[int]
    generation: int
    def __init__(self, generation: _Optional[int] = ...) -> None: ...

class LinkSpecSpec(_message.Message):
    __slots__ = ("name", "logical", "up", "mtu", "kind", "type", "parent_name", "bond_slave", "bridge_slave", "vlan", "bond_master", "bridge_master", "wireguard", "config_layer")
    NAME_FIELD_NUMBER: _ClassVar[int]
    LOGICAL_FIELD_NUMBER: _ClassVar[int]
    UP_FIELD_NUMBER: _ClassVar[int]
    MTU_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    TYPE_FIELD_NUMBER: _ClassVar[int]
    PARENT_NAME_FIELD_NUMBER: _ClassVar[int]
    BOND_SLAVE_FIELD_NUMBER: _ClassVar[int]
    BRIDGE_SLAVE_FIELD_NUMBER: _ClassVar[int]
    VLAN_FIELD_NUMBER: _ClassVar[int]
    BOND_MASTER_FIELD_NUMBER: _ClassVar[int]
    BRIDGE_MASTER_FIELD_NUMBER: _ClassVar[int]
    WIREGUARD_FIELD_NUMBER: _ClassVar[int]
    CONFIG_LAYER_FIELD_NUMBER: _ClassVar[int]
    name: str
    logical: bool
    up: bool
    mtu: int
    kind: str
    type: _enums_pb2.NethelpersLinkType
    parent_name: str
    bond_slave: BondSlave
    bridge_slave: BridgeSlave
    vlan: VLANSpec
    bond_master: BondMasterSpec
    bridge_master: BridgeMasterSpec
    wireguard: WireguardSpec
    config_layer: _enums_pb2.NetworkConfigLayer
    def __init__(self, name: _Optional[str] = ..., logical: _Optional[bool] = ..., up: _Optional[bool] = ..., mtu: _Optional[int] = ..., kind: _Optional[str] = ..., type: _Optional[_Union[_enums_pb2.NethelpersLinkType, str]] = ..., parent_name: _Optional[str] = ..., bond_slave: _Optional[_Union[BondSlave, _Mapping]] = ..., bridge_slave: _Optional[_Union[BridgeSlave, _Mapping]] = ..., vlan: _Optional[_Union[VLANSpec, _Mapping]] = ..., bond_master: _Optional[_Union[BondMasterSpec, _Mapping]] = ..., bridge_master: _Optional[_Union[BridgeMasterSpec, _Mapping]] = ..., wireguard: _Optional[_Union[WireguardSpec, _Mapping]] = ..., config_layer: _Optional[_Union[_enums_pb2.NetworkConfigLayer, str]] = ...) -> None: ...

class LinkStatusSpec(_message.Message):
    __slots__ = ("index", "type", "link_index", "flags", "hardware_addr", "broadcast_addr", "mtu", "queue_disc", "master_index", "operational_state", "kind", "slave_kind", "bus_path", "pciid", "driver", "driver_version", "firmware_version", "product_id", "vendor_id", "product", "vendor", "link_state", "speed_megabits", "port", "duplex", "vlan", "bridge_master", "bond_master", "wireguard", "permanent_addr")
    INDEX_FIELD_NUMBER: _ClassVar[int]
    TYPE_FIELD_NUMBER: _ClassVar[int]
    LINK_INDEX_FIELD_NUMBER: _ClassVar[int]
    FLAGS_FIELD_NUMBER: _ClassVar[int]
    HARDWARE_ADDR_FIELD_NUMBER: _ClassVar[int]
    BROADCAST_ADDR_FIELD_NUMBER: _ClassVar[int]
    MTU_FIELD_NUMBER: _ClassVar[int]
    QUEUE_DISC_FIELD_NUMBER: _ClassVar[int]
    MASTER_INDEX_FIELD_NUMBER: _ClassVar[int]
    OPERATIONAL_STATE_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    SLAVE_KIND_FIELD_NUMBER: _ClassVar[int]
    BUS_PATH_FIELD_NUMBER: _ClassVar[int]
    PCIID_FIELD_NUMBER: _ClassVar[int]
    DRIVER_FIELD_NUMBER: _ClassVar[int]
    DRIVER_VERSION_FIELD_NUMBER: _ClassVar[int]
    FIRMWARE_VERSION_FIELD_NUMBER: _ClassVar[int]
    PRODUCT_ID_FIELD_NUMBER: _ClassVar[int]
    VENDOR_ID_FIELD_NUMBER: _ClassVar[int]
    PRODUCT_FIELD_NUMBER: _ClassVar[int]
    VENDOR_FIELD_NUMBER: _ClassVar[int]
    LINK_STATE_FIELD_NUMBER: _ClassVar[int]
    SPEED_MEGABITS_FIELD_NUMBER: _ClassVar[int]
    PORT_FIELD_NUMBER: _ClassVar[int]
    DUPLEX_FIELD_NUMBER: _ClassVar[int]
    VLAN_FIELD_NUMBER: _ClassVar[int]
    BRIDGE_MASTER_FIELD_NUMBER: _ClassVar[int]
    BOND_MASTER_FIELD_NUMBER: _ClassVar[int]
    WIREGUARD_FIELD_NUMBER: _ClassVar[int]
    PERMANENT_ADDR_FIELD_NUMBER: _ClassVar[int]
    index: int
    type: _enums_pb2.NethelpersLinkType
    link_index: int
    flags: int
    hardware_addr: bytes
    broadcast_addr: bytes
    mtu: int
    queue_disc: str
    master_index: int
    operational_state: _enums_pb2.NethelpersOperationalState
    kind: str
    slave_kind: str
    bus_path: str
    pciid: str
    driver: str
    driver_version: str
    firmware_version: str
    product_id: str
    vendor_id: str
    product: str
    vendor: str
    link_state: bool
    speed_megabits: int
    port: _enums_pb2.NethelpersPort
    duplex: _enums_pb2.NethelpersDuplex
    vlan: VLANSpec
    bridge_master: BridgeMasterSpec
    bond_master: BondMasterSpec
    wireguard: WireguardSpec
    permanent_addr: bytes
    def __init__(self, index: _Optional[int] = ..., type: _Optional[_Union[_enums_pb2.NethelpersLinkType, str]] = ..., link_index: _Optional[int] = ..., flags: _Optional[int] = ..., hardware_addr: _Optional[bytes] = ..., broadcast_addr: _Optional[bytes] = ..., mtu: _Optional[int] = ..., queue_disc: _Optional[str] = ..., master_index: _Optional[int] = ..., operational_state: _Optional[_Union[_enums_pb2.NethelpersOperationalState, str]] = ..., kind: _Optional[str] = ..., slave_kind: _Optional[str] = ..., bus_path: _Optional[str] = ..., pciid: _Optional[str] = ..., driver: _Optional[str] = ..., driver_version: _Optional[str] = ..., firmware_version: _Optional[str] = ..., product_id: _Optional[str] = ..., vendor_id: _Optional[str] = ..., product: _Optional[str] = ..., vendor: _Optional[str] = ..., link_state: _Optional[bool] = ..., speed_megabits: _Optional[int] = ..., port: _Optional[_Union[_enums_pb2.NethelpersPort, str]] = ..., duplex: _Optional[_Union[_enums_pb2.NethelpersDuplex, str]] = ..., vlan: _Optional[_Union[VLANSpec, _Mapping]] = ..., bridge_master: _Optional[_Union[BridgeMasterSpec, _Mapping]] = ..., bond_master: _Optional[_Union[BondMasterSpec, _Mapping]] = ..., wireguard: _Optional[_Union[WireguardSpec, _Mapping]] = ..., permanent_addr: _Optional[bytes] = ...) -> None: ...

class NfTablesAddressMatch(_message.Message):
    __slots__ = ("include_subnets", "exclude_subnets", "invert")
    INCLUDE_SUBNETS_FIELD_NUMBER: _ClassVar[int]
    EXCLUDE_SUBNETS_FIELD_NUMBER: _ClassVar[int]
    INVERT_FIELD_NUMBER: _ClassVar[int]
    include_subnets: _containers.RepeatedCompositeFieldContainer[_common_pb2.NetIPPrefix]
    exclude_subnets: _containers.RepeatedCompositeFieldContainer[_common_pb2.NetIPPrefix]
    invert: bool
    def __init__(self, include_subnets: _Optional[_Iterable[_Union[_common_pb2.NetIPPrefix, _Mapping]]] = ..., exclude_subnets: _Optional[_Iterable[_Union[_common_pb2.NetIPPrefix, _Mapping]]] = ..., invert: _Optional[bool] = ...) -> None: ...

class NfTablesChainSpec(_message.Message):
    __slots__ = ("type", "hook", "priority", "rules", "policy")
    TYPE_FIELD_NUMBER: _ClassVar[int]
    HOOK_FIELD_NUMBER: _ClassVar[int]
    PRIORITY_FIELD_NUMBER: _ClassVar[int]
    RULES_FIELD_NUMBER: _ClassVar[int]
    POLICY_FIELD_NUMBER: _ClassVar[int]
    type: str
    hook: _enums_pb2.NethelpersNfTablesChainHook
    priority: _enums_pb2.NethelpersNfTablesChainPriority
    rules: _containers.RepeatedCompositeFieldContainer[NfTablesRule]
    policy: _enums_pb2.NethelpersNfTablesVerdict
    def __init__(self, type: _Optional[str] = ..., hook: _Optional[_Union[_enums_pb2.NethelpersNfTablesChainHook, str]] = ..., priority: _Optional[_Union[_enums_pb2.NethelpersNfTablesChainPriority, str]] = ..., rules: _Optional[_Iterable[_Union[NfTablesRule, _Mapping]]] = ..., policy: _Optional[_Union[_enums_pb2.NethelpersNfTablesVerdict, str]] = ...) -> None: ...

class NfTablesClampMSS(_message.Message):
    __slots__ = ("mtu",)
    MTU_FIELD_NUMBER: _ClassVar[int]
    mtu: int
    def __init__(self, mtu: _Optional[int] = ...) -> None: ...

class NfTablesConntrackStateMatch(_message.Message):
    __slots__ = ("states",)
    STATES_FIELD_NUMBER: _ClassVar[int]
    states: _containers.RepeatedScalarFieldContainer[_enums_pb2.NethelpersConntrackState]
    def __init__(self, states: _Optional[_Iterable[_Union[_enums_pb2.NethelpersConntrackState, str]]] = ...) -> None: ...

class NfTablesIfNameMatch(_message.Message):
    __slots__ = ("operator", "interface_names")
    OPERATOR_FIELD_NUMBER: _ClassVar[int]
    INTERFACE_NAMES_FIELD_NUMBER: _ClassVar[int]
    operator: _enums_pb2.NethelpersMatchOperator
    interface_names: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, operator: _Optional[_Union[_enums_pb2.NethelpersMatchOperator, str]] = ..., interface_names: _Optional[_Iterable[str]] = ...) -> None: ...

class NfTablesLayer4Match(_message.Message):
    __slots__ = ("protocol", "match_source_port", "match_destination_port")
    PROTOCOL_FIELD_NUMBER: _ClassVar[int]
    MATCH_SOURCE_PORT_FIELD_NUMBER: _ClassVar[int]
    MATCH_DESTINATION_PORT_FIELD_NUMBER: _ClassVar[int]
    protocol: _enums_pb2.NethelpersProtocol
    match_source_port: NfTablesPortMatch
    match_destination_port: NfTablesPortMatch
    def __init__(self, protocol: _Optional[_Union[_enums_pb2.NethelpersProtocol, str]] = ..., match_source_port: _Optional[_Union[NfTablesPortMatch, _Mapping]] = ..., match_destination_port: _Optional[_Union[NfTablesPortMatch, _Mapping]] = ...) -> None: ...

class NfTablesLimitMatch(_message.Message):
    __slots__ = ("packet_rate_per_second",)
    PACKET_RATE_PER_SECOND_FIELD_NUMBER: _ClassVar[int]
    packet_rate_per_second: int
    def __init__(self, packet_rate_per_second: _Optional[int] = ...) -> None: ...

class NfTablesMark(_message.Message):
    __slots__ = ("mask", "xor", "value")
    MASK_FIELD_NUMBER: _ClassVar[int]
    XOR_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    mask: int
    xor: int
    value: int
    def __init__(self, mask: _Optional[int] = ..., xor: _Optional[int] = ..., value: _Optional[int] = ...) -> None: ...

class NfTablesPortMatch(_message.Message):
    __slots__ = ("ranges",)
    RANGES_FIELD_NUMBER: _ClassVar[int]
    ranges: _containers.RepeatedCompositeFieldContainer[PortRange]
    def __init__(self, ranges: _Optional[_Iterable[_Union[PortRange, _Mapping]]] = ...) -> None: ...

class NfTablesRule(_message.Message):
    __slots__ = ("match_o_if_name", "verdict", "match_mark", "set_mark", "match_source_address", "match_destination_address", "match_layer4", "match_i_if_name", "clamp_mss", "match_limit", "match_conntrack_state", "anon_counter")
    MATCH_O_IF_NAME_FIELD_NUMBER: _ClassVar[int]
    VERDICT_FIELD_NUMBER: _ClassVar[int]
    MATCH_MARK_FIELD_NUMBER: _ClassVar[int]
    SET_MARK_FIELD_NUMBER: _ClassVar[int]
    MATCH_SOURCE_ADDRESS_FIELD_NUMBER: _ClassVar[int]
    MATCH_DESTINATION_ADDRESS_FIELD_NUMBER: _ClassVar[int]
    MATCH_LAYER4_FIELD_NUMBER: _ClassVar[int]
    MATCH_I_IF_NAME_FIELD_NUMBER: _ClassVar[int]
    CLAMP_MSS_FIELD_NUMBER: _ClassVar[int]
    MATCH_LIMIT_FIELD_NUMBER: _ClassVar[int]
    MATCH_CONNTRACK_STATE_FIELD_NUMBER: _ClassVar[int]
    ANON_COUNTER_FIELD_NUMBER: _ClassVar[int]
    match_o_if_name: NfTablesIfNameMatch
    verdict: _enums_pb2.NethelpersNfTablesVerdict
    match_mark: NfTablesMark
    set_mark: NfTablesMark
    match_source_address: NfTablesAddressMatch
    match_destination_address: NfTablesAddressMatch
    match_layer4: NfTablesLayer4Match
    match_i_if_name: NfTablesIfNameMatch
    clamp_mss: NfTablesClampMSS
    match_limit: NfTablesLimitMatch
    match_conntrack_state: NfTablesConntrackStateMatch
    anon_counter: bool
    def __init__(self, match_o_if_name: _Optional[_Union[NfTablesIfNameMatch, _Mapping]] = ..., verdict: _Optional[_Union[_enums_pb2.NethelpersNfTablesVerdict, str]] = ..., match_mark: _Optional[_Union[NfTablesMark, _Mapping]] = ..., set_mark: _Optional[_Union[NfTablesMark, _Mapping]] = ..., match_source_address: _Optional[_Union[NfTablesAddressMatch, _Mapping]] = ..., match_destination_address: _Optional[_Union[NfTablesAddressMatch, _Mapping]] = ..., match_layer4: _Optional[_Union[NfTablesLayer4Match, _Mapping]] = ..., match_i_if_name: _Optional[_Union[NfTablesIfNameMatch, _Mapping]] = ..., clamp_mss: _Optional[_Union[NfTablesClampMSS, _Mapping]] = ..., match_limit: _Optional[_Union[NfTablesLimitMatch, _Mapping]] = ..., match_conntrack_state: _Optional[_Union[NfTablesConntrackStateMatch, _Mapping]] = ..., anon_counter: _Optional[bool] = ...) -> None: ...

class NodeAddressFilterSpec(_message.Message):
    __slots__ = ("include_subnets", "exclude_subnets")
    INCLUDE_SUBNETS_FIELD_NUMBER: _ClassVar[int]
    EXCLUDE_SUBNETS_FIELD_NUMBER: _ClassVar[int]
    include_subnets: _containers.RepeatedCompositeFieldContainer[_common_pb2.NetIPPrefix]
    exclude_subnets: _containers.RepeatedCompositeFieldContainer[_common_pb2.NetIPPrefix]
    def __init__(self, include_subnets: _Optional[_Iterable[_Union[_common_pb2.NetIPPrefix, _Mapping]]] = ..., exclude_subnets: _Optional[_Iterable[_Union[_common_pb2.NetIPPrefix, _Mapping]]] = ...) -> None: ...

class NodeAddressSpec(_message.Message):
    __slots__ = ("addresses",)
    ADDRESSES_FIELD_NUMBER: _ClassVar[int]
    addresses: _containers.RepeatedCompositeFieldContainer[_common_pb2.NetIPPrefix]
    def __init__(self, addresses: _Optional[_Iterable[_Union[_common_pb2.NetIPPrefix, _Mapping]]] = ...) -> None: ...

class OperatorSpecSpec(_message.Message):
    __slots__ = ("operator", "link_name", "require_up", "dhcp4", "dhcp6", "vip", "config_layer")
    OPERATOR_FIELD_NUMBER: _ClassVar[int]
    LINK_NAME_FIELD_NUMBER: _ClassVar[int]
    REQUIRE_UP_FIELD_NUMBER: _ClassVar[int]
    DHCP4_FIELD_NUMBER: _ClassVar[int]
    DHCP6_FIELD_NUMBER: _ClassVar[int]
    VIP_FIELD_NUMBER: _ClassVar[int]
    CONFIG_LAYER_FIELD_NUMBER: _ClassVar[int]
    operator: _enums_pb2.NetworkOperator
    link_name: str
    require_up: bool
    dhcp4: DHCP4OperatorSpec
    dhcp6: DHCP6OperatorSpec
    vip: VIPOperatorSpec
    config_layer: _enums_pb2.NetworkConfigLayer
    def __init__(self, operator: _Optional[_Union[_enums_pb2.NetworkOperator, str]] = ..., link_name: _Optional[str] = ..., require_up: _Optional[bool] = ..., dhcp4: _Optional[_Union[DHCP4OperatorSpec, _Mapping]] = ..., dhcp6: _Optional[_Union[DHCP6OperatorSpec, _Mapping]] = ..., vip: _Optional[_Union[VIPOperatorSpec, _Mapping]] = ..., config_layer: _Optional[_Union[_enums_pb2.NetworkConfigLayer, str]] = ...) -> None: ...

class PortRange(_message.Message):
    __slots__ = ("lo", "hi")
    LO_FIELD_NUMBER: _ClassVar[int]
    HI_FIELD_NUMBER: _ClassVar[int]
    lo: int
    hi: int
    def __init__(self, lo: _Optional[int] = ..., hi: _Optional[int] = ...) -> None: ...

class ProbeSpecSpec(_message.Message):
    __slots__ = ("interval", "failure_threshold", "tcp", "config_layer")
    INTERVAL_FIELD_NUMBER: _ClassVar[int]
    FAILURE_THRESHOLD_FIELD_NUMBER: _ClassVar[int]
    TCP_FIELD_NUMBER: _ClassVar[int]
    CONFIG_LAYER_FIELD_NUMBER: _ClassVar[int]
    interval: _duration_pb2.Duration
    failure_threshold: int
    tcp: TCPProbeSpec
    config_layer: _enums_pb2.NetworkConfigLayer
    def __init__(self, interval: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ..., failure_threshold: _Optional[int] = ..., tcp: _Optional[_Union[TCPProbeSpec, _Mapping]] = ..., config_layer: _Optional[_Union[_enums_pb2.NetworkConfigLayer, str]] = ...) -> None: ...

class ProbeStatusSpec(_message.Message):
    __slots__ = ("success", "last_error")
    SUCCESS_FIELD_NUMBER: _ClassVar[int]
    LAST_ERROR_FIELD_NUMBER: _ClassVar[int]
    success: bool
    last_error: str
    def __init__(self, success: _Optional[bool] = ..., last_error: _Optional[str] = ...) -> None: ...

class ResolverSpecSpec(_message.Message):
    __slots__ = ("dns_servers", "config_layer")
    DNS_SERVERS_FIELD_NUMBER: _ClassVar[int]
    CONFIG_LAYER_FIELD_NUMBER: _ClassVar[int]
    dns_servers: _containers.RepeatedCompositeFieldContainer[_common_pb2.NetIP]
    config_layer: _enums_pb2.NetworkConfigLayer
    def __init__(self, dns_servers: _Optional[_Iterable[_Union[_common_pb2.NetIP, _Mapping]]] = ..., config_layer: _Optional[_Union[_enums_pb2.NetworkConfigLayer, str]] = ...) -> None: ...

class ResolverStatusSpec(_message.Message):
    __slots__ = ("dns_servers",)
    DNS_SERVERS_FIELD_NUMBER: _ClassVar[int]
    dns_servers: _containers.RepeatedCompositeFieldContainer[_common_pb2.NetIP]
    def __init__(self, dns_servers: _Optional[_Iterable[_Union[_common_pb2.NetIP, _Mapping]]] = ...) -> None: ...

class RouteSpecSpec(_message.Message):
    __slots__ = ("family", "destination", "source", "gateway", "out_link_name", "table", "priority", "scope", "type", "flags", "protocol", "config_layer", "mtu")
    FAMILY_FIELD_NUMBER: _ClassVar[int]
    DESTINATION_FIELD_NUMBER: _ClassVar[int]
    SOURCE_FIELD_NUMBER: _ClassVar[int]
    GATEWAY_FIELD_NUMBER: _ClassVar[int]
    OUT_LINK_NAME_FIELD_NUMBER: _ClassVar[int]
    TABLE_FIELD_NUMBER: _ClassVar[int]
    PRIORITY_FIELD_NUMBER: _ClassVar[int]
    SCOPE_FIELD_NUMBER: _ClassVar[int]
    TYPE_FIELD_NUMBER: _ClassVar[int]
    FLAGS_FIELD_NUMBER: _ClassVar[int]
    PROTOCOL_FIELD_NUMBER: _ClassVar[int]
    CONFIG_LAYER_FIELD_NUMBER: _ClassVar[int]
    MTU_FIELD_NUMBER: _ClassVar[int]
    family: _enums_pb2.NethelpersFamily
    destination: _common_pb2.NetIPPrefix
    source: _common_pb2.NetIP
    gateway: _common_pb2.NetIP
    out_link_name: str
    table: _enums_pb2.NethelpersRoutingTable
    priority: int
    scope: _enums_pb2.NethelpersScope
    type: _enums_pb2.NethelpersRouteType
    flags: int
    protocol: _enums_pb2.NethelpersRouteProtocol
    config_layer: _enums_pb2.NetworkConfigLayer
    mtu: int
    def __init__(self, family: _Optional[_Union[_enums_pb2.NethelpersFamily, str]] = ..., destination: _Optional[_Union[_common_pb2.NetIPPrefix, _Mapping]] = ..., source: _Optional[_Union[_common_pb2.NetIP, _Mapping]] = ..., gateway: _Optional[_Union[_common_pb2.NetIP, _Mapping]] = ..., out_link_name: _Optional[str] = ..., table: _Optional[_Union[_enums_pb2.NethelpersRoutingTable, str]] = ..., priority: _Optional[int] = ..., scope: _Optional[_Union[_enums_pb2.NethelpersScope, str]] = ..., type: _Optional[_Union[_enums_pb2.NethelpersRouteType, str]] = ..., flags: _Optional[int] = ..., protocol: _Optional[_Union[_enums_pb2.NethelpersRouteProtocol, str]] = ..., config_layer: _Optional[_Union[_enums_pb2.NetworkConfigLayer, str]] = ..., mtu: _Optional[int] = ...) -> None: ...

class RouteStatusSpec(_message.Message):
    __slots__ = ("family", "destination", "source", "gateway", "out_link_index", "out_link_name", "table", "priority", "scope", "type", "flags", "protocol", "mtu")
    FAMILY_FIELD_NUMBER: _ClassVar[int]
    DESTINATION_FIELD_NUMBER: _ClassVar[int]
    SOURCE_FIELD_NUMBER: _ClassVar[int]
    GATEWAY_FIELD_NUMBER: _ClassVar[int]
    OUT_LINK_INDEX_FIELD_NUMBER: _ClassVar[int]
    OUT_LINK_NAME_FIELD_NUMBER: _ClassVar[int]
    TABLE_FIELD_NUMBER: _ClassVar[int]
    PRIORITY_FIELD_NUMBER: _ClassVar[int]
    SCOPE_FIELD_NUMBER: _ClassVar[int]
    TYPE_FIELD_NUMBER: _ClassVar[int]
    FLAGS_FIELD_NUMBER: _ClassVar[int]
    PROTOCOL_FIELD_NUMBER: _ClassVar[int]
    MTU_FIELD_NUMBER: _ClassVar[int]
    family: _enums_pb2.NethelpersFamily
    destination: _common_pb2.NetIPPrefix
    source: _common_pb2.NetIP
    gateway: _common_pb2.NetIP
    out_link_index: int
    out_link_name: str
    table: _enums_pb2.NethelpersRoutingTable
    priority: int
    scope: _enums_pb2.NethelpersScope
    type: _enums_pb2.NethelpersRouteType
    flags: int
    protocol: _enums_pb2.NethelpersRouteProtocol
    mtu: int
    def __init__(self, family: _Optional[_Union[_enums_pb2.NethelpersFamily, str]] = ..., destination: _Optional[_Union[_common_pb2.NetIPPrefix, _Mapping]] = ..., source: _Optional[_Union[_common_pb2.NetIP, _Mapping]] = ..., gateway: _Optional[_Union[_common_pb2.NetIP, _Mapping]] = ..., out_link_index: _Optional[int] = ..., out_link_name: _Optional[str] = ..., table: _Optional[_Union[_enums_pb2.NethelpersRoutingTable, str]] = ..., priority: _Optional[int] = ..., scope: _Optional[_Union[_enums_pb2.NethelpersScope, str]] = ..., type: _Optional[_Union[_enums_pb2.NethelpersRouteType, str]] = ..., flags: _Optional[int] = ..., protocol: _Optional[_Union[_enums_pb2.NethelpersRouteProtocol, str]] = ..., mtu: _Optional[int] = ...) -> None: ...

class STPSpec(_message.Message):
    __slots__ = ("enabled",)
    ENABLED_FIELD_NUMBER: _ClassVar[int]
    enabled: bool
    def __init__(self, enabled: _Optional[bool] = ...) -> None: ...

class StatusSpec(_message.Message):
    __slots__ = ("address_ready", "connectivity_ready", "hostname_ready", "etc_files_ready")
    ADDRESS_READY_FIELD_NUMBER: _ClassVar[int]
    CONNECTIVITY_READY_FIELD_NUMBER: _ClassVar[int]
    HOSTNAME_READY_FIELD_NUMBER: _ClassVar[int]
    ETC_FILES_READY_FIELD_NUMBER: _ClassVar[int]
    address_ready: bool
    connectivity_ready: bool
    hostname_ready: bool
    etc_files_ready: bool
    def __init__(self, address_ready: _Optional[bool] = ..., connectivity_ready: _Optional[bool] = ..., hostname_ready: _Optional[bool] = ..., etc_files_ready: _Optional[bool] = ...) -> None: ...

class TCPProbeSpec(_message.Message):
    __slots__ = ("endpoint", "timeout")
    ENDPOINT_FIELD_NUMBER: _ClassVar[int]
    TIMEOUT_FIELD_NUMBER: _ClassVar[int]
    endpoint: str
    timeout: _duration_pb2.Duration
    def __init__(self, endpoint: _Optional[str] = ..., timeout: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ...) -> None: ...

class TimeServerSpecSpec(_message.Message):
    __slots__ = ("ntp_servers", "config_layer")
    NTP_SERVERS_FIELD_NUMBER: _ClassVar[int]
    CONFIG_LAYER_FIELD_NUMBER: _ClassVar[int]
    ntp_servers: _containers.RepeatedScalarFieldContainer[str]
    config_layer: _enums_pb2.NetworkConfigLayer
    def __init__(self, ntp_servers: _Optional[_Iterable[str]] = ..., config_layer: _Optional[_Union[_enums_pb2.NetworkConfigLayer, str]] = ...) -> None: ...

class TimeServerStatusSpec(_message.Message):
    __slots__ = ("ntp_servers",)
    NTP_SERVERS_FIELD_NUMBER: _ClassVar[int]
    ntp_servers: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, ntp_servers: _Optional[_Iterable[str]] = ...) -> None: ...

class VIPEquinixMetalSpec(_message.Message):
    __slots__ = ("project_id", "device_id", "api_token")
    PROJECT_ID_FIELD_NUMBER: _ClassVar[int]
    DEVICE_ID_FIELD_NUMBER: _ClassVar[int]
    API_TOKEN_FIELD_NUMBER: _ClassVar[int]
    project_id: str
    device_id: str
    api_token: str
    def __init__(self, project_id: _Optional[str] = ..., device_id: _Optional[str] = ..., api_token: _Optional[str] = ...) -> None: ...

class VIPHCloudSpec(_message.Message):
    __slots__ = ("device_id", "network_id", "api_token")
    DEVICE_ID_FIELD_NUMBER: _ClassVar[int]
    NETWORK_ID_FIELD_NUMBER: _ClassVar[int]
    API_TOKEN_FIELD_NUMBER: _ClassVar[int]
    device_id: int
    network_id: int
    api_token: str
    def __init__(self, device_id: _Optional[int] = ..., network_id: _Optional[int] = ..., api_token: _Optional[str] = ...) -> None: ...

class VIPOperatorSpec(_message.Message):
    __slots__ = ("ip", "gratuitous_arp", "equinix_metal", "h_cloud")
    IP_FIELD_NUMBER: _ClassVar[int]
    GRATUITOUS_ARP_FIELD_NUMBER: _ClassVar[int]
    EQUINIX_METAL_FIELD_NUMBER: _ClassVar[int]
    H_CLOUD_FIELD_NUMBER: _ClassVar[int]
    ip: _common_pb2.NetIP
    gratuitous_arp: bool
    equinix_metal: VIPEquinixMetalSpec
    h_cloud: VIPHCloudSpec
    def __init__(self, ip: _Optional[_Union[_common_pb2.NetIP, _Mapping]] = ..., gratuitous_arp: _Optional[bool] = ..., equinix_metal: _Optional[_Union[VIPEquinixMetalSpec, _Mapping]] = ..., h_cloud: _Optional[_Union[VIPHCloudSpec, _Mapping]] = ...) -> None: ...

class VLANSpec(_message.Message):
    __slots__ = ("vid", "protocol")
    VID_FIELD_NUMBER: _ClassVar[int]
    PROTOCOL_FIELD_NUMBER: _ClassVar[int]
    vid: int
    protocol: _enums_pb2.NethelpersVLANProtocol
    def __init__(self, vid: _Optional[int] = ..., protocol: _Optional[_Union[_enums_pb2.NethelpersVLANProtocol, str]] = ...) -> None: ...

class WireguardPeer(_message.Message):
    __slots__ = ("public_key", "preshared_key", "endpoint", "persistent_keepalive_interval", "allowed_ips")
    PUBLIC_KEY_FIELD_NUMBER: _ClassVar[int]
    PRESHARED_KEY_FIELD_NUMBER: _ClassVar[int]
    ENDPOINT_FIELD_NUMBER: _ClassVar[int]
    PERSISTENT_KEEPALIVE_INTERVAL_FIELD_NUMBER: _ClassVar[int]
    ALLOWED_IPS_FIELD_NUMBER: _ClassVar[int]
    public_key: str
    preshared_key: str
    endpoint: str
    persistent_keepalive_interval: _duration_pb2.Duration
    allowed_ips: _containers.RepeatedCompositeFieldContainer[_common_pb2.NetIPPrefix]
    def __init__(self, public_key: _Optional[str] = ..., preshared_key: _Optional[str] = ..., endpoint: _Optional[str] = ..., persistent_keepalive_interval: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ..., allowed_ips: _Optional[_Iterable[_Union[_common_pb2.NetIPPrefix, _Mapping]]] = ...) -> None: ...

class WireguardSpec(_message.Message):
    __slots__ = ("private_key", "public_key", "listen_port", "firewall_mark", "peers")
    PRIVATE_KEY_FIELD_NUMBER: _ClassVar[int]
    PUBLIC_KEY_FIELD_NUMBER: _ClassVar[int]
    LISTEN_PORT_FIELD_NUMBER: _ClassVar[int]
    FIREWALL_MARK_FIELD_NUMBER: _ClassVar[int]
    PEERS_FIELD_NUMBER: _ClassVar[int]
    private_key: str
    public_key: str
    listen_port: int
    firewall_mark: int
    peers: _containers.RepeatedCompositeFieldContainer[WireguardPeer]
    def __init__(self, private_key: _Optional[str] = ..., public_key: _Optional[str] = ..., listen_port: _Optional[int] = ..., firewall_mark: _Optional[int] = ..., peers: _Optional[_Iterable[_Union[WireguardPeer, _Mapping]]] = ...) -> None: ...
