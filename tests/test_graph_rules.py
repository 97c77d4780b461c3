"""The rules that keep machined a controller graph.

* Only controllers write derived resources: on a node that booted and runs (in this process, so its
  state can be read whole), every resource of a node type other than the machine config and the
  reset signal is owned by a registered controller. The same rule, statically: no module outside
  ``controllers/`` creates a resource of a derived type.
* Every controller declares what it reads: the registered controllers' inputs and outputs name
  registered types.
"""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Any

import ichor.machined
from ichor.machined.controllers import node_controllers
from ichor.machined.cosi import Source
from ichor.machined.events import EventBus
from ichor.machined.platform import Layout
from ichor.machined.resources import (
    MACHINE_CONFIGS,
    MACHINE_RESET_SIGNALS,
    NODE_TYPES,
    MachineStage,
)

WRITTEN_BY_THE_SEQUENCE = {MACHINE_CONFIGS.type, MACHINE_RESET_SIGNALS.type}
"""The config store writes the machine config, the sequencer the reset signal: not derived."""
DERIVED = {t.type for t in NODE_TYPES} - WRITTEN_BY_THE_SEQUENCE
MACHINED = Path(ichor.machined.__file__).parent


def _controllers(tmp_path: Path) -> list[object]:
    return list(
        node_controllers(
            Layout(tmp_path, "127.0.0.1"),
            stage=Source("stage", MachineStage.BOOTING),
            services=Source("services", {}),
            events=EventBus(),
        )
    )


def test_every_declared_input_and_output_is_a_node_type(tmp_path: Path) -> None:
    known = {t.type for t in NODE_TYPES}
    for controller in _controllers(tmp_path):
        for declared in (*controller.inputs, *controller.outputs):  # type: ignore[attr-defined]
            assert declared.type.type in known, (
                f"{controller.name} declares unregistered {declared.type.type}"
            )  # type: ignore[attr-defined]


def test_every_derived_type_has_a_controller_that_outputs_it(tmp_path: Path) -> None:
    outputs = {o.type.type for c in _controllers(tmp_path) for o in c.outputs}  # type: ignore[attr-defined]
    assert outputs >= DERIVED, f"derived types no controller writes: {sorted(DERIVED - outputs)}"


def _derived_type_names() -> set[str]:
    """The module-level constants naming derived types (``SERVICES``, ``API_CERTIFICATES``, ...)."""
    import ichor.machined.resources as resources

    return {
        name
        for name in dir(resources)
        if name.isupper() and getattr(getattr(resources, name), "type", None) in DERIVED
    }


def test_no_module_outside_controllers_creates_a_derived_resource() -> None:
    derived = _derived_type_names()
    offenders: list[str] = []
    for path in sorted(MACHINED.rglob("*.py")):
        relative = path.relative_to(MACHINED).as_posix()
        if relative.startswith(("controllers/", "cosi/")):
            continue
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            # X.new(...) builds a resource of type X: only controllers (through ctx.modify) may.
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr == "new"
                and isinstance(node.func.value, ast.Name)
                and node.func.value.id in derived
            ):
                offenders.append(f"{relative}:{node.lineno} builds {node.func.value.id}")
            # ctx.modify(X, ...) outside a controller module
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr == "modify"
                and node.args
                and isinstance(node.args[0], ast.Name)
                and node.args[0].id in derived
            ):
                offenders.append(f"{relative}:{node.lineno} modifies {node.args[0].id}")
    assert not offenders, "derived resources written outside controllers/:\n" + "\n".join(offenders)


def _short(rtype: object, namespace: str, id: str | None = None) -> str:
    name = rtype.type.split(".")[0]  # type: ignore[attr-defined]
    if namespace != rtype.default_namespace:  # type: ignore[attr-defined]
        name += f" ({namespace})"
    return f"{name}/{id}" if id else name


def _never_opened() -> Any:
    raise AssertionError("the controller table only lists controllers; none runs")


def controller_table(tmp_path: Path) -> str:
    """ARCHITECTURE.md's controller table, from the registration list (a node with its own network)."""
    rows = ["| controller | inputs | outputs |", "|---|---|---|"]
    controllers = node_controllers(
        Layout(tmp_path, "10.5.0.2", own_netns=True),
        stage=Source("stage", MachineStage.BOOTING),
        services=Source("services", {}),
        events=EventBus(),
        vip_store=_never_opened,
    )
    for c in controllers:
        inputs = ", ".join(_short(i.type, i.ns, i.id) for i in c.inputs) or c.reads or "-"
        outputs = ", ".join(dict.fromkeys(_short(o.type, o.ns) for o in c.outputs)) or c.writes or "-"
        rows.append(f"| `{c.name}` | {inputs} | {outputs} |")
    return "\n".join(rows)


def test_architecture_lists_every_registered_controller(tmp_path: Path) -> None:
    table = controller_table(tmp_path)
    architecture = (Path(__file__).parent.parent / "ARCHITECTURE.md").read_text()
    assert table in architecture, "ARCHITECTURE.md's controller table is stale; it should read:\n" + table
