"""Resource definitions: COSI's alias rules, lookup, print columns, spec rendering."""

from __future__ import annotations

import dataclasses
import enum
from datetime import UTC, datetime, timedelta

import pytest

from ichor.machined.cosi import (
    META_NAMESPACE,
    NAMESPACES,
    RESOURCE_DEFINITIONS,
    WAIT_STATUSES,
    AmbiguousTypeError,
    DefinitionError,
    EmptySpec,
    JSONPathError,
    PrintColumn,
    RegistrationError,
    Registry,
    Resource,
    ResourceType,
    State,
    UnknownTypeError,
    published_definition,
    render_jsonpath,
    resource_to_plain,
    spec_to_plain,
    spec_to_yaml,
)
from ichor.machined.cosi._naming import singular
from ichor.machinery.yamlio import load_documents, to_plain


class Stage(enum.StrEnum):
    BOOTING = "booting"
    RUNNING = "running"


@dataclasses.dataclass(frozen=True)
class UnmetCondition:
    name: str
    reason: str


@dataclasses.dataclass(frozen=True)
class MachineStatusSpec:
    stage: Stage
    ready: bool = False
    unmet_conditions: tuple[UnmetCondition, ...] = ()


MACHINE_STATUSES = ResourceType(
    "MachineStatuses.runtime.talos.dev",
    "runtime",
    MachineStatusSpec,
    print_columns=(PrintColumn("Stage", "{.stage}"), PrintColumn("Ready", "{.ready}")),
)


@dataclasses.dataclass(frozen=True)
class MemberSpec:
    hostname: str = ""
    addresses: tuple[str, ...] = ()


MEMBERS = ResourceType("Members.cluster.talos.dev", "cluster", MemberSpec, aliases=())
MACHINE_CONFIGS = ResourceType(
    "MachineConfigs.config.talos.dev", "config", EmptySpec, aliases=("mc",), sensitive=True
)
STATIC_PODS = ResourceType("StaticPods.kubernetes.talos.dev", "k8s", EmptySpec)
SECURITY_POLICIES = ResourceType("SecurityPolicies.test.ichor.dev", "test", EmptySpec)


def registry() -> Registry:
    return Registry([MACHINE_STATUSES, MEMBERS, MACHINE_CONFIGS, STATIC_PODS])


def test_rd_of_rds_matches_cosi() -> None:
    spec = Registry().lookup("rd").spec
    assert spec.id == "resourcedefinitions.meta.cosi.dev"
    assert spec.display_type == "ResourceDefinition"
    assert spec.default_namespace == "meta"
    assert spec.aliases == ("api-resources", "resourcedefinition", "rd", "rds")
    assert spec.all_aliases == (
        "resourcedefinitions",
        "resourcedefinitions.meta",
        "resourcedefinitions.meta.cosi",
        "api-resources",
        "resourcedefinition",
        "rd",
        "rds",
    )
    data = to_plain(load_documents(spec_to_yaml(spec))[0])
    assert data == {
        "type": "ResourceDefinitions.meta.cosi.dev",
        "displayType": "ResourceDefinition",
        "defaultNamespace": "meta",
        "aliases": ["api-resources", "resourcedefinition", "rd", "rds"],
        "allAliases": list(spec.all_aliases),
        "printColumns": [{"name": "Aliases", "jsonPath": "{.aliases[:]}"}],
    }


def test_namespace_rd_aliases() -> None:
    spec = Registry().lookup("ns").spec
    assert spec.type == NAMESPACES.type
    assert spec.aliases == ("ns", "namespace")


def test_generated_aliases_for_talos_types() -> None:
    reg = registry()
    ms = reg.get(MACHINE_STATUSES.type).spec
    assert ms.display_type == "MachineStatus"
    # Capitals "MS" end in S, so no "mss".
    assert ms.aliases == ("machinestatus", "ms")
    assert ms.all_aliases[:3] == (
        "machinestatuses",
        "machinestatuses.runtime",
        "machinestatuses.runtime.talos",
    )
    mc = reg.get(MACHINE_CONFIGS.type).spec
    assert mc.aliases == ("mc", "machineconfig", "mc", "mcs")
    assert mc.sensitivity == "sensitive"
    members = reg.get(MEMBERS.type).spec
    assert members.aliases == ("member",)  # one capital: no initials


@pytest.mark.parametrize(
    ("typed", "expected"),
    [
        ("members", MEMBERS.type),
        ("Member", MEMBERS.type),
        ("MEMBERS.CLUSTER", MEMBERS.type),
        ("members.cluster.talos", MEMBERS.type),
        ("members.cluster.talos.dev", MEMBERS.type),
        ("mc", MACHINE_CONFIGS.type),
        ("machinestatus", MACHINE_STATUSES.type),
        ("ms", MACHINE_STATUSES.type),
        ("staticpods", STATIC_PODS.type),
        ("rds", RESOURCE_DEFINITIONS.type),
    ],
)
def test_lookup_by_alias_case_insensitive(typed: str, expected: str) -> None:
    assert registry().lookup(typed).spec.type == expected


def test_lookup_unknown() -> None:
    with pytest.raises(UnknownTypeError) as err:
        registry().lookup("nodes.cluster")
    assert str(err.value) == 'resource "nodes.cluster" is not registered'
    assert err.value.hint and "talosctl get rd" in err.value.hint


def test_lookup_ambiguous_names_candidates() -> None:
    reg = Registry([STATIC_PODS, SECURITY_POLICIES])
    with pytest.raises(AmbiguousTypeError) as err:
        reg.lookup("sp")
    assert str(err.value) == 'resource type "sp" is ambiguous'
    assert err.value.hint is not None
    assert STATIC_PODS.type in err.value.hint and SECURITY_POLICIES.type in err.value.hint
    # The full names still resolve.
    assert reg.lookup("staticpods").spec.type == STATIC_PODS.type


def test_a_canonical_type_name_finds_its_definition_in_the_registry_and_in_the_state() -> None:
    reg = registry()
    state = State()
    reg.publish(state)
    # By id, as COSI looks definitions up: the case does not matter, an alias is not a type name.
    for name in (MEMBERS.type, MEMBERS.type.upper()):
        assert reg.get(name).spec.type == MEMBERS.type
        assert published_definition(state, name).type == MEMBERS.type
    for name in ("members", "Bogus.example.dev"):
        for find in (reg.get, lambda n: published_definition(state, n)):
            with pytest.raises(UnknownTypeError) as err:
                find(name)
            assert str(err.value) == f'resource type "{name}" is not supported'


def test_duplicate_registration_refused() -> None:
    reg = registry()
    with pytest.raises(RegistrationError, match="already registered"):
        reg.register(MEMBERS)
    assert MEMBERS.type in reg


@pytest.mark.parametrize(
    ("type_name", "message"),
    [
        ("Things", "missing suffix"),
        (".cosi.dev", "name is empty"),
        ("Things.", "suffix is empty"),
        ("things.cosi.dev", "name should be in CamelCase"),
        ("1Things.cosi.dev", "name doesn't match"),
        ("Things.cosi_dev", "suffix doesn't match"),
        ("Thing.cosi.dev", "name should be plural"),
        ("Status.cosi.dev", "name should be plural"),
    ],
)
def test_bad_type_names(type_name: str, message: str) -> None:
    with pytest.raises(DefinitionError) as err:
        ResourceType(type_name, "ns", EmptySpec)
    assert str(err.value).startswith(f'resource type "{type_name}": {message}')


@pytest.mark.parametrize(
    ("plural", "expected"),
    [
        ("MachineStatuses", "MachineStatus"),
        ("AddressStatuses", "AddressStatus"),
        ("Identities", "Identity"),
        ("Processes", "Process"),
        ("Patches", "Patch"),
        ("DNSResolveCaches", "DNSResolveCache"),
        ("NodeIPs", "NodeIP"),
        ("Infos", "Info"),
        ("MetaKeys", "MetaKey"),
        ("Status", None),
        ("Info", None),
    ],
)
def test_singular(plural: str, expected: str | None) -> None:
    assert singular(plural) == expected


def test_render_columns_over_spec() -> None:
    reg = registry()
    res = MACHINE_STATUSES.new("machine", MachineStatusSpec(stage=Stage.BOOTING, ready=True))
    assert reg.get(MACHINE_STATUSES.type).column_names() == ["Stage", "Ready"]
    assert reg.render_columns(res) == ["booting", "true"]
    rd = reg.lookup("rd").to_resource()
    assert reg.render_columns(rd) == ["api-resources resourcedefinition rd rds"]
    with pytest.raises(UnknownTypeError, match="is not supported"):
        reg.render_columns(Resource.tombstone("x", "Unknowns.test.dev", "a"))


@pytest.mark.parametrize(
    ("template", "expected"),
    [
        ("{.name}", "n1"),
        ("{.missing}", ""),
        ("{.nested.missing.deeper}", ""),
        ("{.list[0]}", "a"),
        ("{.list[-1]}", "c"),
        ("{.list[5]}", ""),
        ("{.list[*]}", "a b c"),
        ("{.list[:]}", "a b c"),
        ("{.list[1:]}", "b c"),
        ("{.objs[*].id}", "1 2"),
        ("{['dotted.key']}", "v"),
        ("{.flag}", "false"),
        ("{.count}", "3"),
        ("{.nested}", '{"a":1}'),
        ("{.name}/{.count}", "n1/3"),
        ('{.objs[?(@.id=="2")].id}', "2"),
        ("{.objs[?(@.id=='3')].id}", ""),
        ('{.name[?(@.id=="1")]}', ""),
        (
            "{.}",
            '{"count":3,"dotted.key":"v","flag":false,"list":["a","b","c"],"name":"n1","nested":{"a":1},"objs":[{"id":1},{"id":2}]}',
        ),
    ],
)
def test_jsonpath(template: str, expected: str) -> None:
    data = {
        "name": "n1",
        "list": ["a", "b", "c"],
        "objs": [{"id": 1}, {"id": 2}],
        "dotted.key": "v",
        "flag": False,
        "count": 3,
        "nested": {"a": 1},
    }
    assert render_jsonpath(template, data) == expected


@pytest.mark.parametrize("template", ["{.a", "{.a!b}", "{..a}", '{.a[?(@.b!="c")]}', "{.a[?(@.b==c)]}"])
def test_jsonpath_rejects_unsupported(template: str) -> None:
    with pytest.raises(JSONPathError):
        render_jsonpath(template, {"a": 1})


def test_spec_rendering_keys_and_values() -> None:
    @dataclasses.dataclass(frozen=True)
    class Spec:
        node_ip: str = dataclasses.field(default="", metadata={"yaml": "nodeIP"})
        waiting_for: str = ""
        maybe: str = dataclasses.field(default="", metadata={"omitempty": True})
        when: datetime = datetime(2024, 5, 1, 12, 0, 0, 250000, tzinfo=UTC)
        every: timedelta = timedelta(minutes=1, seconds=30)
        stage: Stage = Stage.RUNNING
        items: tuple[UnmetCondition, ...] = (UnmetCondition("etcd", "not healthy"),)

    assert spec_to_plain(Spec(node_ip="10.0.0.1")) == {
        "nodeIP": "10.0.0.1",
        "waitingFor": "",
        "when": "2024-05-01T12:00:00.25Z",
        "every": "1m30s",
        "stage": "running",
        "items": [{"name": "etcd", "reason": "not healthy"}],
    }
    assert spec_to_yaml(EmptySpec()) == "{}\n"
    text = spec_to_yaml(Spec())
    assert 'waitingFor: ""' in text


def test_resource_to_plain_matches_get_output_layout() -> None:
    state = State(clock=lambda: datetime(2024, 5, 1, tzinfo=UTC))
    stored = state.create(
        MEMBERS.new("n1", MemberSpec("n1", ("10.0.0.1",)), labels={"a": "b"}), owner="MemberController"
    )
    plain = resource_to_plain(stored)
    assert list(plain["metadata"]) == [
        "namespace", "type", "id", "version", "owner", "phase", "created", "updated", "labels",
    ]  # fmt: skip
    assert plain["metadata"]["version"] == "1"
    assert plain["metadata"]["phase"] == "running"
    assert plain["metadata"]["created"] == "2024-05-01T00:00:00Z"
    assert plain["spec"] == {"hostname": "n1", "addresses": ["10.0.0.1"]}


def test_publish_definitions_and_namespaces_idempotently() -> None:
    state = State()
    reg = registry()
    reg.register(WAIT_STATUSES)
    reg.register_namespace("network", "network state")
    reg.publish(state)
    reg.publish(state)
    rd_ids = [r.id for r in state.list(META_NAMESPACE, RESOURCE_DEFINITIONS)]
    assert rd_ids == sorted(t.lower() for t in (
        RESOURCE_DEFINITIONS.type, NAMESPACES.type, MACHINE_STATUSES.type, MEMBERS.type,
        MACHINE_CONFIGS.type, STATIC_PODS.type, WAIT_STATUSES.type,
    ))  # fmt: skip
    assert all(r.metadata.version == 1 for r in state.list(META_NAMESPACE, RESOURCE_DEFINITIONS))
    namespaces = {r.id: r.spec.description for r in state.list(META_NAMESPACE, NAMESPACES)}
    assert set(namespaces) == {"meta", "runtime", "cluster", "config", "k8s", "network"}
    assert namespaces["network"] == "network state"


def test_pydantic_specs_render_by_alias() -> None:
    import pydantic

    class HostnameSpec(pydantic.BaseModel):
        model_config = pydantic.ConfigDict(frozen=True, populate_by_name=True)
        hostname: str
        domain_name: str = pydantic.Field("", alias="domainname")

    hostnames = ResourceType("HostnameStatuses.net.talos.dev", "network", HostnameSpec)
    res = hostnames.new("hostname", HostnameSpec(hostname="talos-1", domainname="example.org"))
    assert spec_to_plain(res.spec) == {"hostname": "talos-1", "domainname": "example.org"}
    assert spec_to_yaml(res.spec) == "hostname: talos-1\ndomainname: example.org\n"
