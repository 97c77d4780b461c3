// Reads every resource of every type from Talos nodes with Talos's own Go client and decodes each
// spec in both forms into Talos's Go types: the protobuf form (what talosctl health, the dashboard
// and the client library read) and the YAML form. Prints one line per type and node:
//
//	OK <type> <node> <n>            both forms decode and agree
//	DIFF <type> <node> <id> ...     they disagree (both shown as JSON)
//	EMPTY <type> <node> <id>        the protobuf form decodes to an empty spec, the YAML does not
//	NOTYPE <type> <node>            Talos 1.7 has no Go type for it (an Ichor-only type)
//	ERROR <type> <node> <error>
//
// Build it inside a Talos v1.7.6 source tree (scripts/e2e_official_talosctl.py does) and run it
// with TALOSCONFIG set: talos-cosi-check <node>...
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"reflect"
	"strings"

	"github.com/cosi-project/runtime/pkg/resource"
	"github.com/cosi-project/runtime/pkg/resource/meta"
	"github.com/cosi-project/runtime/pkg/resource/protobuf"
	"github.com/cosi-project/runtime/pkg/safe"
	"github.com/cosi-project/runtime/pkg/state"
	"gopkg.in/yaml.v3"

	"github.com/siderolabs/talos/pkg/machinery/client"
	_ "github.com/siderolabs/talos/pkg/machinery/resources/block"
	_ "github.com/siderolabs/talos/pkg/machinery/resources/cluster"
	_ "github.com/siderolabs/talos/pkg/machinery/resources/config"
	_ "github.com/siderolabs/talos/pkg/machinery/resources/cri"
	_ "github.com/siderolabs/talos/pkg/machinery/resources/etcd"
	_ "github.com/siderolabs/talos/pkg/machinery/resources/files"
	_ "github.com/siderolabs/talos/pkg/machinery/resources/hardware"
	_ "github.com/siderolabs/talos/pkg/machinery/resources/k8s"
	_ "github.com/siderolabs/talos/pkg/machinery/resources/kubeaccess"
	_ "github.com/siderolabs/talos/pkg/machinery/resources/kubespan"
	_ "github.com/siderolabs/talos/pkg/machinery/resources/network"
	_ "github.com/siderolabs/talos/pkg/machinery/resources/perf"
	_ "github.com/siderolabs/talos/pkg/machinery/resources/runtime"
	_ "github.com/siderolabs/talos/pkg/machinery/resources/secrets"
	_ "github.com/siderolabs/talos/pkg/machinery/resources/siderolink"
	_ "github.com/siderolabs/talos/pkg/machinery/resources/time"
	_ "github.com/siderolabs/talos/pkg/machinery/resources/v1alpha1"
)

var oneWay = map[string]bool{
	"Manifests.kubernetes.talos.dev":         true,
	"StaticPods.kubernetes.talos.dev":        true,
	"StaticPodStatuses.kubernetes.talos.dev": true,
	// Its spec's Device is an interface (config.Device): Talos's YAML of it cannot decode into the Go
	// type either; the protobuf form carries the device as YAML bytes, which Talos decodes.
	"DeviceConfigSpecs.net.talos.dev": true,
}

type yamlBytes interface{ MarshalYAMLBytes() ([]byte, error) }

// value is what a spec pointer points to (specs are compared by value).
func value(spec any) any {
	rv := reflect.ValueOf(spec)
	if rv.Kind() == reflect.Ptr && !rv.IsNil() {
		return rv.Elem().Interface()
	}

	return spec
}

// canonical is a spec as JSON with Go's empty values dropped (a nil and an empty slice are alike).
func canonical(spec any) string {
	raw, err := json.Marshal(spec)
	if err != nil {
		return "error: " + err.Error()
	}

	var v any
	if err = json.Unmarshal(raw, &v); err != nil {
		return "error: " + err.Error()
	}

	out, _ := json.Marshal(prune(v)) //nolint:errcheck,errchkjson

	return string(out)
}

func prune(v any) any {
	switch t := v.(type) {
	case map[string]any:
		m := map[string]any{}

		for k, x := range t {
			if x = prune(x); x != nil {
				m[k] = x
			}
		}

		if len(m) == 0 {
			return nil
		}

		return m
	case []any:
		if len(t) == 0 {
			return nil
		}

		for i := range t {
			t[i] = prune(t[i])
		}

		return t
	case string:
		if t == "" {
			return nil
		}
	case bool:
		if !t {
			return nil
		}
	case float64:
		if t == 0 {
			return nil
		}
	}

	return v
}

// decodeYAML decodes a yaml_spec into a fresh value of the type's Go spec.
func decodeYAML(specType reflect.Type, text []byte) (out any, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("panic: %v", r)
		}
	}()

	target := reflect.New(specType)
	if err = yaml.Unmarshal(text, target.Interface()); err != nil {
		return nil, err
	}

	return target.Elem().Interface(), nil
}

func main() {
	ctx := context.Background()

	c, err := client.New(ctx, client.WithDefaultConfig())
	if err != nil {
		fmt.Println("ERROR client", err)
		os.Exit(1)
	}

	failed := false

	for _, node := range os.Args[1:] {
		nctx := client.WithNode(ctx, node)

		rds, err := safe.StateListAll[*meta.ResourceDefinition](nctx, c.COSI)
		if err != nil {
			fmt.Println("ERROR rd", node, err)
			os.Exit(1)
		}

		for i := range rds.Len() {
			spec := rds.Get(i).TypedSpec()
			namespaces := []string{spec.DefaultNamespace}
			if strings.HasSuffix(spec.Type, ".net.talos.dev") {
				namespaces = append(namespaces, "network-config")
			}

			for _, ns := range namespaces {
				if !check(nctx, c, node, ns, spec.Type) {
					failed = true
				}
			}
		}
	}

	if failed {
		os.Exit(1)
	}
}

func check(ctx context.Context, c *client.Client, node, ns, typ string) bool {
	list, err := c.COSI.List(ctx, resource.NewMetadata(ns, typ, "", resource.VersionUndefined),
		state.WithListUnmarshalOptions(state.WithSkipProtobufUnmarshal()))
	if err != nil {
		fmt.Println("ERROR", typ, node, err)

		return false
	}

	ok := true

	for _, item := range list.Items {
		raw := item.(*protobuf.Resource) //nolint:forcetypeassert
		id := raw.Metadata().ID()

		fromProto, err := protobuf.UnmarshalResource(raw)
		if err != nil {
			fmt.Println("ERROR", typ, node, id, "protobuf:", err)
			ok = false

			continue
		}

		if _, generic := fromProto.(*protobuf.Resource); generic {
			fmt.Println("NOTYPE", typ, node)

			return true
		}

		specType := reflect.TypeOf(value(fromProto.Spec()))

		text, err := raw.Spec().(yamlBytes).MarshalYAMLBytes()
		if err != nil {
			fmt.Println("ERROR", typ, node, id, "yaml text:", err)
			ok = false

			continue
		}

		if oneWay[typ] {
			// Talos's own YAML of these does not decode into its type (MarshalYAML without
			// UnmarshalYAML); the protobuf form is what clients read.
			if canonical(value(fromProto.Spec())) == canonical(reflect.Zero(specType).Interface()) {
				fmt.Println("EMPTY", typ, node, id)
				ok = false
			}

			continue
		}

		fromYAML, err := decodeYAML(specType, text)
		if err != nil {
			fmt.Println("ERROR", typ, node, id, "yaml:", err)
			ok = false

			continue
		}

		protoSpec := value(fromProto.Spec())
		p := canonical(protoSpec)
		y := canonical(fromYAML)

		empty := canonical(reflect.Zero(specType).Interface())

		switch {
		case p != y:
			fmt.Printf("DIFF %s %s %s\n  protobuf: %s\n  yaml:     %s\n", typ, node, id, p, y)
			ok = false
		case p == empty && y != empty:
			fmt.Println("EMPTY", typ, node, id)
			ok = false
		}
	}

	if ok {
		fmt.Println("OK", typ, node, len(list.Items))
	}

	return ok
}
