// Prints Talos 1.7's enum strings and values as JSON: {"<proto enum name>": {"<Go String()>": value}}.
//
// Run from a Talos v1.7.6 source tree (scripts/gen_talos_enums.py copies it there): the tables are
// what Talos's YAML shows for each value of the enums its resource protos use.
package main

import (
	"encoding/json"
	"fmt"
	"os"

	"github.com/siderolabs/talos/pkg/machinery/config/machine"
	"github.com/siderolabs/talos/pkg/machinery/nethelpers"
	"github.com/siderolabs/talos/pkg/machinery/resources/kubespan"
	"github.com/siderolabs/talos/pkg/machinery/resources/network"
	"github.com/siderolabs/talos/pkg/machinery/resources/runtime"
)

type integer interface {
	~int | ~int8 | ~int16 | ~int32 | ~int64 | ~uint | ~uint8 | ~uint16 | ~uint32 | ~uint64
}

func add[T interface {
	integer
	fmt.Stringer
}](out map[string]map[string]int64, name string, values []T) {
	table := map[string]int64{}
	for _, v := range values {
		table[v.String()] = int64(v)
	}
	out[name] = table
}

func main() {
	out := map[string]map[string]int64{}
	add(out, "NethelpersAddressFlag", nethelpers.AddressFlagValues())
	add(out, "NethelpersADSelect", nethelpers.ADSelectValues())
	add(out, "NethelpersARPAllTargets", nethelpers.ARPAllTargetsValues())
	add(out, "NethelpersARPValidate", nethelpers.ARPValidateValues())
	add(out, "NethelpersBondMode", nethelpers.BondModeValues())
	add(out, "NethelpersBondXmitHashPolicy", nethelpers.BondXmitHashPolicyValues())
	add(out, "NethelpersConntrackState", nethelpers.ConntrackStateValues())
	add(out, "NethelpersDuplex", nethelpers.DuplexValues())
	add(out, "NethelpersFailOverMAC", nethelpers.FailOverMACValues())
	add(out, "NethelpersFamily", nethelpers.FamilyValues())
	add(out, "NethelpersLACPRate", nethelpers.LACPRateValues())
	add(out, "NethelpersLinkFlag", nethelpers.LinkFlagValues())
	add(out, "NethelpersLinkType", nethelpers.LinkTypeValues())
	add(out, "NethelpersMatchOperator", nethelpers.MatchOperatorValues())
	add(out, "NethelpersNfTablesChainHook", nethelpers.NfTablesChainHookValues())
	add(out, "NethelpersNfTablesChainPriority", nethelpers.NfTablesChainPriorityValues())
	add(out, "NethelpersNfTablesVerdict", nethelpers.NfTablesVerdictValues())
	add(out, "NethelpersOperationalState", nethelpers.OperationalStateValues())
	add(out, "NethelpersPort", nethelpers.PortValues())
	add(out, "NethelpersPrimaryReselect", nethelpers.PrimaryReselectValues())
	add(out, "NethelpersProtocol", nethelpers.ProtocolValues())
	add(out, "NethelpersRouteFlag", nethelpers.RouteFlagValues())
	add(out, "NethelpersRouteProtocol", nethelpers.RouteProtocolValues())
	add(out, "NethelpersRouteType", nethelpers.RouteTypeValues())
	add(out, "NethelpersRoutingTable", nethelpers.RoutingTableValues())
	add(out, "NethelpersScope", nethelpers.ScopeValues())
	add(out, "NethelpersVLANProtocol", nethelpers.VLANProtocolValues())
	add(out, "NetworkConfigLayer", network.ConfigLayerValues())
	add(out, "NetworkOperator", network.OperatorValues())
	add(out, "RuntimeMachineStage", runtime.MachineStageValues())
	add(out, "KubespanPeerState", []kubespan.PeerState{kubespan.PeerStateUnknown, kubespan.PeerStateUp, kubespan.PeerStateDown})
	add(out, "MachineType", []machine.Type{machine.TypeUnknown, machine.TypeInit, machine.TypeControlPlane, machine.TypeWorker})

	enc := json.NewEncoder(os.Stdout)
	enc.SetIndent("", "  ")
	if err := enc.Encode(out); err != nil {
		panic(err)
	}
}
