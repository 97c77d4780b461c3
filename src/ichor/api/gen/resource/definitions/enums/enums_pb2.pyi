from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from typing import ClassVar as _ClassVar

DESCRIPTOR: _descriptor.FileDescriptor

class MachineType(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    TYPE_UNKNOWN: _ClassVar[MachineType]
    TYPE_INIT: _ClassVar[MachineType]
    TYPE_CONTROL_PLANE: _ClassVar[MachineType]
    TYPE_WORKER: _ClassVar[MachineType]

class NethelpersAddressFlag(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    NETHELPERS_ADDRESSFLAG_UNSPECIFIED: _ClassVar[NethelpersAddressFlag]
    ADDRESS_TEMPORARY: _ClassVar[NethelpersAddressFlag]
    ADDRESS_NO_DAD: _ClassVar[NethelpersAddressFlag]
    ADDRESS_OPTIMISTIC: _ClassVar[NethelpersAddressFlag]
    ADDRESS_DAD_FAILED: _ClassVar[NethelpersAddressFlag]
    ADDRESS_HOME: _ClassVar[NethelpersAddressFlag]
    ADDRESS_DEPRECATED: _ClassVar[NethelpersAddressFlag]
    ADDRESS_TENTATIVE: _ClassVar[NethelpersAddressFlag]
    ADDRESS_PERMANENT: _ClassVar[NethelpersAddressFlag]
    ADDRESS_MANAGEMENT_TEMP: _ClassVar[NethelpersAddressFlag]
    ADDRESS_NO_PREFIX_ROUTE: _ClassVar[NethelpersAddressFlag]
    ADDRESS_MC_AUTO_JOIN: _ClassVar[NethelpersAddressFlag]
    ADDRESS_STABLE_PRIVACY: _ClassVar[NethelpersAddressFlag]

class NethelpersADSelect(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    AD_SELECT_STABLE: _ClassVar[NethelpersADSelect]
    AD_SELECT_BANDWIDTH: _ClassVar[NethelpersADSelect]
    AD_SELECT_COUNT: _ClassVar[NethelpersADSelect]

class NethelpersARPAllTargets(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    ARP_ALL_TARGETS_ANY: _ClassVar[NethelpersARPAllTargets]
    ARP_ALL_TARGETS_ALL: _ClassVar[NethelpersARPAllTargets]

class NethelpersARPValidate(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    ARP_VALIDATE_NONE: _ClassVar[NethelpersARPValidate]
    ARP_VALIDATE_ACTIVE: _ClassVar[NethelpersARPValidate]
    ARP_VALIDATE_BACKUP: _ClassVar[NethelpersARPValidate]
    ARP_VALIDATE_ALL: _ClassVar[NethelpersARPValidate]

class NethelpersBondMode(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    BOND_MODE_ROUNDROBIN: _ClassVar[NethelpersBondMode]
    BOND_MODE_ACTIVE_BACKUP: _ClassVar[NethelpersBondMode]
    BOND_MODE_XOR: _ClassVar[NethelpersBondMode]
    BOND_MODE_BROADCAST: _ClassVar[NethelpersBondMode]
    BOND_MODE8023_AD: _ClassVar[NethelpersBondMode]
    BOND_MODE_TLB: _ClassVar[NethelpersBondMode]
    BOND_MODE_ALB: _ClassVar[NethelpersBondMode]

class NethelpersBondXmitHashPolicy(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    BOND_XMIT_POLICY_LAYER2: _ClassVar[NethelpersBondXmitHashPolicy]
    BOND_XMIT_POLICY_LAYER34: _ClassVar[NethelpersBondXmitHashPolicy]
    BOND_XMIT_POLICY_LAYER23: _ClassVar[NethelpersBondXmitHashPolicy]
    BOND_XMIT_POLICY_ENCAP23: _ClassVar[NethelpersBondXmitHashPolicy]
    BOND_XMIT_POLICY_ENCAP34: _ClassVar[NethelpersBondXmitHashPolicy]

class NethelpersConntrackState(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    NETHELPERS_CONNTRACKSTATE_UNSPECIFIED: _ClassVar[NethelpersConntrackState]
    CONNTRACK_STATE_NEW: _ClassVar[NethelpersConntrackState]
    CONNTRACK_STATE_RELATED: _ClassVar[NethelpersConntrackState]
    CONNTRACK_STATE_ESTABLISHED: _ClassVar[NethelpersConntrackState]
    CONNTRACK_STATE_INVALID: _ClassVar[NethelpersConntrackState]

class NethelpersDuplex(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    HALF: _ClassVar[NethelpersDuplex]
    FULL: _ClassVar[NethelpersDuplex]
    UNKNOWN: _ClassVar[NethelpersDuplex]

class NethelpersFailOverMAC(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    FAIL_OVER_MAC_NONE: _ClassVar[NethelpersFailOverMAC]
    FAIL_OVER_MAC_ACTIVE: _ClassVar[NethelpersFailOverMAC]
    FAIL_OVER_MAC_FOLLOW: _ClassVar[NethelpersFailOverMAC]

class NethelpersFamily(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    NETHELPERS_FAMILY_UNSPECIFIED: _ClassVar[NethelpersFamily]
    FAMILY_INET4: _ClassVar[NethelpersFamily]
    FAMILY_INET6: _ClassVar[NethelpersFamily]

class NethelpersLACPRate(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    LACP_RATE_SLOW: _ClassVar[NethelpersLACPRate]
    LACP_RATE_FAST: _ClassVar[NethelpersLACPRate]

class NethelpersLinkType(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    LINK_NETROM: _ClassVar[NethelpersLinkType]
    LINK_ETHER: _ClassVar[NethelpersLinkType]
    LINK_EETHER: _ClassVar[NethelpersLinkType]
    LINK_AX25: _ClassVar[NethelpersLinkType]
    LINK_PRONET: _ClassVar[NethelpersLinkType]
    LINK_CHAOS: _ClassVar[NethelpersLinkType]
    LINK_IEE802: _ClassVar[NethelpersLinkType]
    LINK_ARCNET: _ClassVar[NethelpersLinkType]
    LINK_ATALK: _ClassVar[NethelpersLinkType]
    LINK_DLCI: _ClassVar[NethelpersLinkType]
    LINK_ATM: _ClassVar[NethelpersLinkType]
    LINK_METRICOM: _ClassVar[NethelpersLinkType]
    LINK_IEEE1394: _ClassVar[NethelpersLinkType]
    LINK_EUI64: _ClassVar[NethelpersLinkType]
    LINK_INFINIBAND: _ClassVar[NethelpersLinkType]
    LINK_SLIP: _ClassVar[NethelpersLinkType]
    LINK_CSLIP: _ClassVar[NethelpersLinkType]
    LINK_SLIP6: _ClassVar[NethelpersLinkType]
    LINK_CSLIP6: _ClassVar[NethelpersLinkType]
    LINK_RSRVD: _ClassVar[NethelpersLinkType]
    LINK_ADAPT: _ClassVar[NethelpersLinkType]
    LINK_ROSE: _ClassVar[NethelpersLinkType]
    LINK_X25: _ClassVar[NethelpersLinkType]
    LINK_HWX25: _ClassVar[NethelpersLinkType]
    LINK_CAN: _ClassVar[NethelpersLinkType]
    LINK_PPP: _ClassVar[NethelpersLinkType]
    LINK_CISCO: _ClassVar[NethelpersLinkType]
    LINK_HDLC: _ClassVar[NethelpersLinkType]
    LINK_LAPB: _ClassVar[NethelpersLinkType]
    LINK_DDCMP: _ClassVar[NethelpersLinkType]
    LINK_RAWHDLC: _ClassVar[NethelpersLinkType]
    LINK_TUNNEL: _ClassVar[NethelpersLinkType]
    LINK_TUNNEL6: _ClassVar[NethelpersLinkType]
    LINK_FRAD: _ClassVar[NethelpersLinkType]
    LINK_SKIP: _ClassVar[NethelpersLinkType]
    LINK_LOOPBCK: _ClassVar[NethelpersLinkType]
    LINK_LOCALTLK: _ClassVar[NethelpersLinkType]
    LINK_FDDI: _ClassVar[NethelpersLinkType]
    LINK_BIF: _ClassVar[NethelpersLinkType]
    LINK_SIT: _ClassVar[NethelpersLinkType]
    LINK_IPDDP: _ClassVar[NethelpersLinkType]
    LINK_IPGRE: _ClassVar[NethelpersLinkType]
    LINK_PIMREG: _ClassVar[NethelpersLinkType]
    LINK_HIPPI: _ClassVar[NethelpersLinkType]
    LINK_ASH: _ClassVar[NethelpersLinkType]
    LINK_ECONET: _ClassVar[NethelpersLinkType]
    LINK_IRDA: _ClassVar[NethelpersLinkType]
    LINK_FCPP: _ClassVar[NethelpersLinkType]
    LINK_FCAL: _ClassVar[NethelpersLinkType]
    LINK_FCPL: _ClassVar[NethelpersLinkType]
    LINK_FCFABRIC: _ClassVar[NethelpersLinkType]
    LINK_FCFABRIC1: _ClassVar[NethelpersLinkType]
    LINK_FCFABRIC2: _ClassVar[NethelpersLinkType]
    LINK_FCFABRIC3: _ClassVar[NethelpersLinkType]
    LINK_FCFABRIC4: _ClassVar[NethelpersLinkType]
    LINK_FCFABRIC5: _ClassVar[NethelpersLinkType]
    LINK_FCFABRIC6: _ClassVar[NethelpersLinkType]
    LINK_FCFABRIC7: _ClassVar[NethelpersLinkType]
    LINK_FCFABRIC8: _ClassVar[NethelpersLinkType]
    LINK_FCFABRIC9: _ClassVar[NethelpersLinkType]
    LINK_FCFABRIC10: _ClassVar[NethelpersLinkType]
    LINK_FCFABRIC11: _ClassVar[NethelpersLinkType]
    LINK_FCFABRIC12: _ClassVar[NethelpersLinkType]
    LINK_IEE802TR: _ClassVar[NethelpersLinkType]
    LINK_IEE80211: _ClassVar[NethelpersLinkType]
    LINK_IEE80211PRISM: _ClassVar[NethelpersLinkType]
    LINK_IEE80211_RADIOTAP: _ClassVar[NethelpersLinkType]
    LINK_IEE8021154: _ClassVar[NethelpersLinkType]
    LINK_IEE8021154MONITOR: _ClassVar[NethelpersLinkType]
    LINK_PHONET: _ClassVar[NethelpersLinkType]
    LINK_PHONETPIPE: _ClassVar[NethelpersLinkType]
    LINK_CAIF: _ClassVar[NethelpersLinkType]
    LINK_IP6GRE: _ClassVar[NethelpersLinkType]
    LINK_NETLINK: _ClassVar[NethelpersLinkType]
    LINK6_LOWPAN: _ClassVar[NethelpersLinkType]
    LINK_VOID: _ClassVar[NethelpersLinkType]
    LINK_NONE: _ClassVar[NethelpersLinkType]

class NethelpersMatchOperator(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    OPERATOR_EQUAL: _ClassVar[NethelpersMatchOperator]
    OPERATOR_NOT_EQUAL: _ClassVar[NethelpersMatchOperator]

class NethelpersNfTablesChainHook(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    CHAIN_HOOK_PREROUTING: _ClassVar[NethelpersNfTablesChainHook]
    CHAIN_HOOK_INPUT: _ClassVar[NethelpersNfTablesChainHook]
    CHAIN_HOOK_FORWARD: _ClassVar[NethelpersNfTablesChainHook]
    CHAIN_HOOK_OUTPUT: _ClassVar[NethelpersNfTablesChainHook]
    CHAIN_HOOK_POSTROUTING: _ClassVar[NethelpersNfTablesChainHook]

class NethelpersNfTablesChainPriority(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    NETHELPERS_NFTABLESCHAINPRIORITY_UNSPECIFIED: _ClassVar[NethelpersNfTablesChainPriority]
    CHAIN_PRIORITY_FIRST: _ClassVar[NethelpersNfTablesChainPriority]
    CHAIN_PRIORITY_CONNTRACK_DEFRAG: _ClassVar[NethelpersNfTablesChainPriority]
    CHAIN_PRIORITY_RAW: _ClassVar[NethelpersNfTablesChainPriority]
    CHAIN_PRIORITY_SE_LINUX_FIRST: _ClassVar[NethelpersNfTablesChainPriority]
    CHAIN_PRIORITY_CONNTRACK: _ClassVar[NethelpersNfTablesChainPriority]
    CHAIN_PRIORITY_MANGLE: _ClassVar[NethelpersNfTablesChainPriority]
    CHAIN_PRIORITY_NAT_DEST: _ClassVar[NethelpersNfTablesChainPriority]
    CHAIN_PRIORITY_FILTER: _ClassVar[NethelpersNfTablesChainPriority]
    CHAIN_PRIORITY_SECURITY: _ClassVar[NethelpersNfTablesChainPriority]
    CHAIN_PRIORITY_NAT_SOURCE: _ClassVar[NethelpersNfTablesChainPriority]
    CHAIN_PRIORITY_SE_LINUX_LAST: _ClassVar[NethelpersNfTablesChainPriority]
    CHAIN_PRIORITY_CONNTRACK_HELPER: _ClassVar[NethelpersNfTablesChainPriority]
    CHAIN_PRIORITY_LAST: _ClassVar[NethelpersNfTablesChainPriority]

class NethelpersNfTablesVerdict(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    VERDICT_DROP: _ClassVar[NethelpersNfTablesVerdict]
    VERDICT_ACCEPT: _ClassVar[NethelpersNfTablesVerdict]

class NethelpersOperationalState(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    OPER_STATE_UNKNOWN: _ClassVar[NethelpersOperationalState]
    OPER_STATE_NOT_PRESENT: _ClassVar[NethelpersOperationalState]
    OPER_STATE_DOWN: _ClassVar[NethelpersOperationalState]
    OPER_STATE_LOWER_LAYER_DOWN: _ClassVar[NethelpersOperationalState]
    OPER_STATE_TESTING: _ClassVar[NethelpersOperationalState]
    OPER_STATE_DORMANT: _ClassVar[NethelpersOperationalState]
    OPER_STATE_UP: _ClassVar[NethelpersOperationalState]

class NethelpersPort(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    TWISTED_PAIR: _ClassVar[NethelpersPort]
    AUI: _ClassVar[NethelpersPort]
    MII: _ClassVar[NethelpersPort]
    FIBRE: _ClassVar[NethelpersPort]
    BNC: _ClassVar[NethelpersPort]
    DIRECT_ATTACH: _ClassVar[NethelpersPort]
    NONE: _ClassVar[NethelpersPort]
    OTHER: _ClassVar[NethelpersPort]

class NethelpersPrimaryReselect(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    PRIMARY_RESELECT_ALWAYS: _ClassVar[NethelpersPrimaryReselect]
    PRIMARY_RESELECT_BETTER: _ClassVar[NethelpersPrimaryReselect]
    PRIMARY_RESELECT_FAILURE: _ClassVar[NethelpersPrimaryReselect]

class NethelpersProtocol(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    NETHELPERS_PROTOCOL_UNSPECIFIED: _ClassVar[NethelpersProtocol]
    PROTOCOL_ICMP: _ClassVar[NethelpersProtocol]
    PROTOCOL_TCP: _ClassVar[NethelpersProtocol]
    PROTOCOL_UDP: _ClassVar[NethelpersProtocol]
    PROTOCOL_ICM_PV6: _ClassVar[NethelpersProtocol]

class NethelpersRouteFlag(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    NETHELPERS_ROUTEFLAG_UNSPECIFIED: _ClassVar[NethelpersRouteFlag]
    ROUTE_NOTIFY: _ClassVar[NethelpersRouteFlag]
    ROUTE_CLONED: _ClassVar[NethelpersRouteFlag]
    ROUTE_EQUALIZE: _ClassVar[NethelpersRouteFlag]
    ROUTE_PREFIX: _ClassVar[NethelpersRouteFlag]
    ROUTE_LOOKUP_TABLE: _ClassVar[NethelpersRouteFlag]
    ROUTE_FIB_MATCH: _ClassVar[NethelpersRouteFlag]
    ROUTE_OFFLOAD: _ClassVar[NethelpersRouteFlag]
    ROUTE_TRAP: _ClassVar[NethelpersRouteFlag]

class NethelpersRouteProtocol(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    PROTOCOL_UNSPEC: _ClassVar[NethelpersRouteProtocol]
    PROTOCOL_REDIRECT: _ClassVar[NethelpersRouteProtocol]
    PROTOCOL_KERNEL: _ClassVar[NethelpersRouteProtocol]
    PROTOCOL_BOOT: _ClassVar[NethelpersRouteProtocol]
    PROTOCOL_STATIC: _ClassVar[NethelpersRouteProtocol]
    PROTOCOL_RA: _ClassVar[NethelpersRouteProtocol]
    PROTOCOL_MRT: _ClassVar[NethelpersRouteProtocol]
    PROTOCOL_ZEBRA: _ClassVar[NethelpersRouteProtocol]
    PROTOCOL_BIRD: _ClassVar[NethelpersRouteProtocol]
    PROTOCOL_DNROUTED: _ClassVar[NethelpersRouteProtocol]
    PROTOCOL_XORP: _ClassVar[NethelpersRouteProtocol]
    PROTOCOL_NTK: _ClassVar[NethelpersRouteProtocol]
    PROTOCOL_DHCP: _ClassVar[NethelpersRouteProtocol]
    PROTOCOL_MRTD: _ClassVar[NethelpersRouteProtocol]
    PROTOCOL_KEEPALIVED: _ClassVar[NethelpersRouteProtocol]
    PROTOCOL_BABEL: _ClassVar[NethelpersRouteProtocol]
    PROTOCOL_OPENR: _ClassVar[NethelpersRouteProtocol]
    PROTOCOL_BGP: _ClassVar[NethelpersRouteProtocol]
    PROTOCOL_ISIS: _ClassVar[NethelpersRouteProtocol]
    PROTOCOL_OSPF: _ClassVar[NethelpersRouteProtocol]
    PROTOCOL_RIP: _ClassVar[NethelpersRouteProtocol]
    PROTOCOL_EIGRP: _ClassVar[NethelpersRouteProtocol]

class NethelpersRouteType(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    TYPE_UNSPEC: _ClassVar[NethelpersRouteType]
    TYPE_UNICAST: _ClassVar[NethelpersRouteType]
    TYPE_LOCAL: _ClassVar[NethelpersRouteType]
    TYPE_BROADCAST: _ClassVar[NethelpersRouteType]
    TYPE_ANYCAST: _ClassVar[NethelpersRouteType]
    TYPE_MULTICAST: _ClassVar[NethelpersRouteType]
    TYPE_BLACKHOLE: _ClassVar[NethelpersRouteType]
    TYPE_UNREACHABLE: _ClassVar[NethelpersRouteType]
    TYPE_PROHIBIT: _ClassVar[NethelpersRouteType]
    TYPE_THROW: _ClassVar[NethelpersRouteType]
    TYPE_NAT: _ClassVar[NethelpersRouteType]
    TYPE_X_RESOLVE: _ClassVar[NethelpersRouteType]

class NethelpersRoutingTable(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    TABLE_UNSPEC: _ClassVar[NethelpersRoutingTable]
    TABLE_DEFAULT: _ClassVar[NethelpersRoutingTable]
    TABLE_MAIN: _ClassVar[NethelpersRoutingTable]
    TABLE_LOCAL: _ClassVar[NethelpersRoutingTable]

class NethelpersScope(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    SCOPE_GLOBAL: _ClassVar[NethelpersScope]
    SCOPE_SITE: _ClassVar[NethelpersScope]
    SCOPE_LINK: _ClassVar[NethelpersScope]
    SCOPE_HOST: _ClassVar[NethelpersScope]
    SCOPE_NOWHERE: _ClassVar[NethelpersScope]

class NethelpersVLANProtocol(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    NETHELPERS_VLANPROTOCOL_UNSPECIFIED: _ClassVar[NethelpersVLANProtocol]
    VLAN_PROTOCOL8021_Q: _ClassVar[NethelpersVLANProtocol]
    VLAN_PROTOCOL8021_AD: _ClassVar[NethelpersVLANProtocol]

class KubespanPeerState(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    PEER_STATE_UNKNOWN: _ClassVar[KubespanPeerState]
    PEER_STATE_UP: _ClassVar[KubespanPeerState]
    PEER_STATE_DOWN: _ClassVar[KubespanPeerState]

class NetworkConfigLayer(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    CONFIG_DEFAULT: _ClassVar[NetworkConfigLayer]
    CONFIG_CMDLINE: _ClassVar[NetworkConfigLayer]
    CONFIG_PLATFORM: _ClassVar[NetworkConfigLayer]
    CONFIG_OPERATOR: _ClassVar[NetworkConfigLayer]
    CONFIG_MACHINE_CONFIGURATION: _ClassVar[NetworkConfigLayer]

class NetworkOperator(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    OPERATOR_DHCP4: _ClassVar[NetworkOperator]
    OPERATOR_DHCP6: _ClassVar[NetworkOperator]
    OPERATOR_VIP: _ClassVar[NetworkOperator]

class RuntimeMachineStage(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    MACHINE_STAGE_UNKNOWN: _ClassVar[RuntimeMachineStage]
    MACHINE_STAGE_BOOTING: _ClassVar[RuntimeMachineStage]
    MACHINE_STAGE_INSTALLING: _ClassVar[RuntimeMachineStage]
    MACHINE_STAGE_MAINTENANCE: _ClassVar[RuntimeMachineStage]
    MACHINE_STAGE_RUNNING: _ClassVar[RuntimeMachineStage]
    MACHINE_STAGE_REBOOTING: _ClassVar[RuntimeMachineStage]
    MACHINE_STAGE_SHUTTING_DOWN: _ClassVar[RuntimeMachineStage]
    MACHINE_STAGE_RESETTING: _ClassVar[RuntimeMachineStage]
    MACHINE_STAGE_UPGRADING: _ClassVar[RuntimeMachineStage]
TYPE_UNKNOWN: MachineType
TYPE_INIT: MachineType
TYPE_CONTROL_PLANE: MachineType
TYPE_WORKER: MachineType
NETHELPERS_ADDRESSFLAG_UNSPECIFIED: NethelpersAddressFlag
ADDRESS_TEMPORARY: NethelpersAddressFlag
ADDRESS_NO_DAD: NethelpersAddressFlag
ADDRESS_OPTIMISTIC: NethelpersAddressFlag
ADDRESS_DAD_FAILED: NethelpersAddressFlag
ADDRESS_HOME: NethelpersAddressFlag
ADDRESS_DEPRECATED: NethelpersAddressFlag
ADDRESS_TENTATIVE: NethelpersAddressFlag
ADDRESS_PERMANENT: NethelpersAddressFlag
ADDRESS_MANAGEMENT_TEMP: NethelpersAddressFlag
ADDRESS_NO_PREFIX_ROUTE: NethelpersAddressFlag
ADDRESS_MC_AUTO_JOIN: NethelpersAddressFlag
ADDRESS_STABLE_PRIVACY: NethelpersAddressFlag
AD_SELECT_STABLE: NethelpersADSelect
AD_SELECT_BANDWIDTH: NethelpersADSelect
AD_SELECT_COUNT: NethelpersADSelect
ARP_ALL_TARGETS_ANY: NethelpersARPAllTargets
ARP_ALL_TARGETS_ALL: NethelpersARPAllTargets
ARP_VALIDATE_NONE: NethelpersARPValidate
ARP_VALIDATE_ACTIVE: NethelpersARPValidate
ARP_VALIDATE_BACKUP: NethelpersARPValidate
ARP_VALIDATE_ALL: NethelpersARPValidate
BOND_MODE_ROUNDROBIN: NethelpersBondMode
BOND_MODE_ACTIVE_BACKUP: NethelpersBondMode
BOND_MODE_XOR: NethelpersBondMode
BOND_MODE_BROADCAST: NethelpersBondMode
BOND_MODE8023_AD: NethelpersBondMode
BOND_MODE_TLB: NethelpersBondMode
BOND_MODE_ALB: NethelpersBondMode
BOND_XMIT_POLICY_LAYER2: NethelpersBondXmitHashPolicy
BOND_XMIT_POLICY_LAYER34: NethelpersBondXmitHashPolicy
BOND_XMIT_POLICY_LAYER23: NethelpersBondXmitHashPolicy
BOND_XMIT_POLICY_ENCAP23: NethelpersBondXmitHashPolicy
BOND_XMIT_POLICY_ENCAP34: NethelpersBondXmitHashPolicy
NETHELPERS_CONNTRACKSTATE_UNSPECIFIED: NethelpersConntrackState
CONNTRACK_STATE_NEW: NethelpersConntrackState
CONNTRACK_STATE_RELATED: NethelpersConntrackState
CONNTRACK_STATE_ESTABLISHED: NethelpersConntrackState
CONNTRACK_STATE_INVALID: NethelpersConntrackState
HALF: NethelpersDuplex
FULL: NethelpersDuplex
UNKNOWN: NethelpersDuplex
FAIL_OVER_MAC_NONE: NethelpersFailOverMAC
FAIL_OVER_MAC_ACTIVE: NethelpersFailOverMAC
FAIL_OVER_MAC_FOLLOW: NethelpersFailOverMAC
NETHELPERS_FAMILY_UNSPECIFIED: NethelpersFamily
FAMILY_INET4: NethelpersFamily
FAMILY_INET6: NethelpersFamily
LACP_RATE_SLOW: NethelpersLACPRate
LACP_RATE_FAST: NethelpersLACPRate
LINK_NETROM: NethelpersLinkType
LINK_ETHER: NethelpersLinkType
LINK_EETHER: NethelpersLinkType
LINK_AX25: NethelpersLinkType
LINK_PRONET: NethelpersLinkType
LINK_CHAOS: NethelpersLinkType
LINK_IEE802: NethelpersLinkType
LINK_ARCNET: NethelpersLinkType
LINK_ATALK: NethelpersLinkType
LINK_DLCI: NethelpersLinkType
LINK_ATM: NethelpersLinkType
LINK_METRICOM: NethelpersLinkType
LINK_IEEE1394: NethelpersLinkType
LINK_EUI64: NethelpersLinkType
LINK_INFINIBAND: NethelpersLinkType
LINK_SLIP: NethelpersLinkType
LINK_CSLIP: NethelpersLinkType
LINK_SLIP6: NethelpersLinkType
LINK_CSLIP6: NethelpersLinkType
LINK_RSRVD: NethelpersLinkType
LINK_ADAPT: NethelpersLinkType
LINK_ROSE: NethelpersLinkType
LINK_X25: NethelpersLinkType
LINK_HWX25: NethelpersLinkType
LINK_CAN: NethelpersLinkType
LINK_PPP: NethelpersLinkType
LINK_CISCO: NethelpersLinkType
LINK_HDLC: NethelpersLinkType
LINK_LAPB: NethelpersLinkType
LINK_DDCMP: NethelpersLinkType
LINK_RAWHDLC: NethelpersLinkType
LINK_TUNNEL: NethelpersLinkType
LINK_TUNNEL6: NethelpersLinkType
LINK_FRAD: NethelpersLinkType
LINK_SKIP: NethelpersLinkType
LINK_LOOPBCK: NethelpersLinkType
LINK_LOCALTLK: NethelpersLinkType
LINK_FDDI: NethelpersLinkType
LINK_BIF: NethelpersLinkType
LINK_SIT: NethelpersLinkType
LINK_IPDDP: NethelpersLinkType
LINK_IPGRE: NethelpersLinkType
LINK_PIMREG: NethelpersLinkType
LINK_HIPPI: NethelpersLinkType
LINK_ASH: NethelpersLinkType
LINK_ECONET: NethelpersLinkType
LINK_IRDA: NethelpersLinkType
LINK_FCPP: NethelpersLinkType
LINK_FCAL: NethelpersLinkType
LINK_FCPL: NethelpersLinkType
LINK_FCFABRIC: NethelpersLinkType
LINK_FCFABRIC1: NethelpersLinkType
LINK_FCFABRIC2: NethelpersLinkType
LINK_FCFABRIC3: NethelpersLinkType
LINK_FCFABRIC4: NethelpersLinkType
LINK_FCFABRIC5: NethelpersLinkType
LINK_FCFABRIC6: NethelpersLinkType
LINK_FCFABRIC7: NethelpersLinkType
LINK_FCFABRIC8: NethelpersLinkType
LINK_FCFABRIC9: NethelpersLinkType
LINK_FCFABRIC10: NethelpersLinkType
LINK_FCFABRIC11: NethelpersLinkType
LINK_FCFABRIC12: NethelpersLinkType
LINK_IEE802TR: NethelpersLinkType
LINK_IEE80211: NethelpersLinkType
LINK_IEE80211PRISM: NethelpersLinkType
LINK_IEE80211_RADIOTAP: NethelpersLinkType
LINK_IEE8021154: NethelpersLinkType
LINK_IEE8021154MONITOR: NethelpersLinkType
LINK_PHONET: NethelpersLinkType
LINK_PHONETPIPE: NethelpersLinkType
LINK_CAIF: NethelpersLinkType
LINK_IP6GRE: NethelpersLinkType
LINK_NETLINK: NethelpersLinkType
LINK6_LOWPAN: NethelpersLinkType
LINK_VOID: NethelpersLinkType
LINK_NONE: NethelpersLinkType
OPERATOR_EQUAL: NethelpersMatchOperator
OPERATOR_NOT_EQUAL: NethelpersMatchOperator
CHAIN_HOOK_PREROUTING: NethelpersNfTablesChainHook
CHAIN_HOOK_INPUT: NethelpersNfTablesChainHook
CHAIN_HOOK_FORWARD: NethelpersNfTablesChainHook
CHAIN_HOOK_OUTPUT: NethelpersNfTablesChainHook
CHAIN_HOOK_POSTROUTING: NethelpersNfTablesChainHook
NETHELPERS_NFTABLESCHAINPRIORITY_UNSPECIFIED: NethelpersNfTablesChainPriority
CHAIN_PRIORITY_FIRST: NethelpersNfTablesChainPriority
CHAIN_PRIORITY_CONNTRACK_DEFRAG: NethelpersNfTablesChainPriority
CHAIN_PRIORITY_RAW: NethelpersNfTablesChainPriority
CHAIN_PRIORITY_SE_LINUX_FIRST: NethelpersNfTablesChainPriority
CHAIN_PRIORITY_CONNTRACK: NethelpersNfTablesChainPriority
CHAIN_PRIORITY_MANGLE: NethelpersNfTablesChainPriority
CHAIN_PRIORITY_NAT_DEST: NethelpersNfTablesChainPriority
CHAIN_PRIORITY_FILTER: NethelpersNfTablesChainPriority
CHAIN_PRIORITY_SECURITY: NethelpersNfTablesChainPriority
CHAIN_PRIORITY_NAT_SOURCE: NethelpersNfTablesChainPriority
CHAIN_PRIORITY_SE_LINUX_LAST: NethelpersNfTablesChainPriority
CHAIN_PRIORITY_CONNTRACK_HELPER: NethelpersNfTablesChainPriority
CHAIN_PRIORITY_LAST: NethelpersNfTablesChainPriority
VERDICT_DROP: NethelpersNfTablesVerdict
VERDICT_ACCEPT: NethelpersNfTablesVerdict
OPER_STATE_UNKNOWN: NethelpersOperationalState
OPER_STATE_NOT_PRESENT: NethelpersOperationalState
OPER_STATE_DOWN: NethelpersOperationalState
OPER_STATE_LOWER_LAYER_DOWN: NethelpersOperationalState
OPER_STATE_TESTING: NethelpersOperationalState
OPER_STATE_DORMANT: NethelpersOperationalState
OPER_STATE_UP: NethelpersOperationalState
TWISTED_PAIR: NethelpersPort
AUI: NethelpersPort
MII: NethelpersPort
FIBRE: NethelpersPort
BNC: NethelpersPort
DIRECT_ATTACH: NethelpersPort
NONE: NethelpersPort
OTHER: NethelpersPort
PRIMARY_RESELECT_ALWAYS: NethelpersPrimaryReselect
PRIMARY_RESELECT_BETTER: NethelpersPrimaryReselect
PRIMARY_RESELECT_FAILURE: NethelpersPrimaryReselect
NETHELPERS_PROTOCOL_UNSPECIFIED: NethelpersProtocol
PROTOCOL_ICMP: NethelpersProtocol
PROTOCOL_TCP: NethelpersProtocol
PROTOCOL_UDP: NethelpersProtocol
PROTOCOL_ICM_PV6: NethelpersProtocol
NETHELPERS_ROUTEFLAG_UNSPECIFIED: NethelpersRouteFlag
ROUTE_NOTIFY: NethelpersRouteFlag
ROUTE_CLONED: NethelpersRouteFlag
ROUTE_EQUALIZE: NethelpersRouteFlag
ROUTE_PREFIX: NethelpersRouteFlag
ROUTE_LOOKUP_TABLE: NethelpersRouteFlag
ROUTE_FIB_MATCH: NethelpersRouteFlag
ROUTE_OFFLOAD: NethelpersRouteFlag
ROUTE_TRAP: NethelpersRouteFlag
PROTOCOL_UNSPEC: NethelpersRouteProtocol
PROTOCOL_REDIRECT: NethelpersRouteProtocol
PROTOCOL_KERNEL: NethelpersRouteProtocol
PROTOCOL_BOOT: NethelpersRouteProtocol
PROTOCOL_STATIC: NethelpersRouteProtocol
PROTOCOL_RA: NethelpersRouteProtocol
PROTOCOL_MRT: NethelpersRouteProtocol
PROTOCOL_ZEBRA: NethelpersRouteProtocol
PROTOCOL_BIRD: NethelpersRouteProtocol
PROTOCOL_DNROUTED: NethelpersRouteProtocol
PROTOCOL_XORP: NethelpersRouteProtocol
PROTOCOL_NTK: NethelpersRouteProtocol
PROTOCOL_DHCP: NethelpersRouteProtocol
PROTOCOL_MRTD: NethelpersRouteProtocol
PROTOCOL_KEEPALIVED: NethelpersRouteProtocol
PROTOCOL_BABEL: NethelpersRouteProtocol
PROTOCOL_OPENR: NethelpersRouteProtocol
PROTOCOL_BGP: NethelpersRouteProtocol
PROTOCOL_ISIS: NethelpersRouteProtocol
PROTOCOL_OSPF: NethelpersRouteProtocol
PROTOCOL_RIP: NethelpersRouteProtocol
PROTOCOL_EIGRP: NethelpersRouteProtocol
TYPE_UNSPEC: NethelpersRouteType
TYPE_UNICAST: NethelpersRouteType
TYPE_LOCAL: NethelpersRouteType
TYPE_BROADCAST: NethelpersRouteType
TYPE_ANYCAST: NethelpersRouteType
TYPE_MULTICAST: NethelpersRouteType
TYPE_BLACKHOLE: NethelpersRouteType
TYPE_UNREACHABLE: NethelpersRouteType
TYPE_PROHIBIT: NethelpersRouteType
TYPE_THROW: NethelpersRouteType
TYPE_NAT: NethelpersRouteType
TYPE_X_RESOLVE: NethelpersRouteType
TABLE_UNSPEC: NethelpersRoutingTable
TABLE_DEFAULT: NethelpersRoutingTable
TABLE_MAIN: NethelpersRoutingTable
TABLE_LOCAL: NethelpersRoutingTable
SCOPE_GLOBAL: NethelpersScope
SCOPE_SITE: NethelpersScope
SCOPE_LINK: NethelpersScope
SCOPE_HOST: NethelpersScope
SCOPE_NOWHERE: NethelpersScope
NETHELPERS_VLANPROTOCOL_UNSPECIFIED: NethelpersVLANProtocol
VLAN_PROTOCOL8021_Q: NethelpersVLANProtocol
VLAN_PROTOCOL8021_AD: NethelpersVLANProtocol
PEER_STATE_UNKNOWN: KubespanPeerState
PEER_STATE_UP: KubespanPeerState
PEER_STATE_DOWN: KubespanPeerState
CONFIG_DEFAULT: NetworkConfigLayer
CONFIG_CMDLINE: NetworkConfigLayer
CONFIG_PLATFORM: NetworkConfigLayer
CONFIG_OPERATOR: NetworkConfigLayer
CONFIG_MACHINE_CONFIGURATION: NetworkConfigLayer
OPERATOR_DHCP4: NetworkOperator
OPERATOR_DHCP6: NetworkOperator
OPERATOR_VIP: NetworkOperator
MACHINE_STAGE_UNKNOWN: RuntimeMachineStage
MACHINE_STAGE_BOOTING: RuntimeMachineStage
MACHINE_STAGE_INSTALLING: RuntimeMachineStage
MACHINE_STAGE_MAINTENANCE: RuntimeMachineStage
MACHINE_STAGE_RUNNING: RuntimeMachineStage
MACHINE_STAGE_REBOOTING: RuntimeMachineStage
MACHINE_STAGE_SHUTTING_DOWN: RuntimeMachineStage
MACHINE_STAGE_RESETTING: RuntimeMachineStage
MACHINE_STAGE_UPGRADING: RuntimeMachineStage
