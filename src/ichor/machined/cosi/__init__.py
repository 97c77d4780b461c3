"""Ichor's COSI: resources, their in-memory state, and the controllers that keep them.

Everything a node knows is a resource ``(namespace, type, id, version, owner, phase, labels,
annotations, finalizers) + spec``, kept in a :class:`State`. Resource types are declared once as a
:class:`ResourceType` (name, default namespace, aliases, print columns, sensitivity, spec class);
a :class:`Registry` turns them into ``ResourceDefinitions`` so ``talosctl get <alias>`` can find and
render any type. :class:`Controller` s declare inputs and outputs and are run, woken and restarted
by the :class:`Runtime`; most are :class:`TransformController` s. A controller that cannot make
progress says so with a ``WaitStatuses`` resource (``talosctl get waits``). The runtime keeps its
own log in Talos's shape (``talosctl logs controller-runtime``); controllers add to it through
``ctx.logger``.

Exceptions::

    CosiError                       anything the runtime refuses; carries an optional ``hint``
    ├── NotFoundError               no such resource
    ├── ConflictError               write contradicts the stored resource (e.g. stale version)
    │   ├── AlreadyExistsError      create of an existing id
    │   ├── OwnerConflictError      resource owned by another controller / the user
    │   ├── PhaseConflictError      resource not in the expected phase (tearing down)
    │   └── PendingFinalizersError  destroy while finalizers are attached
    ├── OutputNotDeclaredError      controller wrote a type it did not declare as output
    ├── InputNotDeclaredError       controller read a resource it did not declare as input
    ├── DefinitionError             resource type name breaks COSI's rules
    ├── RegistrationError           duplicate type/controller, two exclusive writers
    ├── UnknownTypeError            no type has this name or alias
    └── AmbiguousTypeError          several types answer to this alias

This package must not know any particular node resource (those live with their controllers), and
must not import the CLI or the API layer; the API layer maps these errors to gRPC codes.
"""

from __future__ import annotations

from ichor.machined.cosi._controller import (
    Controller,
    ControllerContext,
    Input,
    InputKind,
    Output,
    OutputKind,
    Partial,
    SkipReconcile,
    Sleep,
    TransformController,
    missing_input_name,
)
from ichor.machined.cosi._definitions import (
    META_NAMESPACE,
    NAMESPACES,
    RESOURCE_DEFINITIONS,
    NamespaceSpec,
    Registry,
    ResourceDefinition,
    ResourceDefinitionSpec,
    published_definition,
)
from ichor.machined.cosi._errors import (
    AlreadyExistsError,
    AmbiguousTypeError,
    ConflictError,
    CosiError,
    DefinitionError,
    InputNotDeclaredError,
    NotFoundError,
    OutputNotDeclaredError,
    OwnerConflictError,
    PendingFinalizersError,
    PhaseConflictError,
    RegistrationError,
    UnknownTypeError,
)
from ichor.machined.cosi._log import ControllerLogger, LogLevel, RuntimeLog
from ichor.machined.cosi._resource import (
    Clock,
    EmptySpec,
    Metadata,
    Phase,
    PrintColumn,
    Resource,
    ResourceType,
    format_time,
    go_url_plain,
    go_url_text,
    resource_to_plain,
    spec_to_plain,
    spec_to_yaml,
    utc_now,
)
from ichor.machined.cosi._runtime import Backoff, ControllerStatus, Runtime
from ichor.machined.cosi._source import Source
from ichor.machined.cosi._state import (
    DEFAULT_HISTORY,
    Event,
    EventType,
    LabelOp,
    LabelTerm,
    State,
    Watch,
    label_equal,
    label_exists,
    label_not_exists,
)
from ichor.machined.cosi._testing import assert_no_resource, assert_resource
from ichor.machined.cosi._waits import WAIT_STATUSES, WaitingFor, WaitStatusSpec, clear_wait, publish_wait
from ichor.machinery.jsonpath import JSONPathError, render_jsonpath

__all__ = [
    "DEFAULT_HISTORY",
    "META_NAMESPACE",
    "NAMESPACES",
    "RESOURCE_DEFINITIONS",
    "WAIT_STATUSES",
    "AlreadyExistsError",
    "AmbiguousTypeError",
    "Backoff",
    "Clock",
    "ConflictError",
    "Controller",
    "ControllerContext",
    "ControllerLogger",
    "ControllerStatus",
    "CosiError",
    "DefinitionError",
    "EmptySpec",
    "Event",
    "EventType",
    "Input",
    "InputKind",
    "InputNotDeclaredError",
    "JSONPathError",
    "LabelOp",
    "LabelTerm",
    "LogLevel",
    "Metadata",
    "NamespaceSpec",
    "NotFoundError",
    "Output",
    "OutputKind",
    "OutputNotDeclaredError",
    "OwnerConflictError",
    "Partial",
    "PendingFinalizersError",
    "Phase",
    "PhaseConflictError",
    "PrintColumn",
    "RegistrationError",
    "Registry",
    "Resource",
    "ResourceDefinition",
    "ResourceDefinitionSpec",
    "ResourceType",
    "Runtime",
    "RuntimeLog",
    "SkipReconcile",
    "Sleep",
    "Source",
    "State",
    "TransformController",
    "UnknownTypeError",
    "WaitStatusSpec",
    "WaitingFor",
    "Watch",
    "assert_no_resource",
    "assert_resource",
    "clear_wait",
    "format_time",
    "go_url_plain",
    "go_url_text",
    "label_equal",
    "label_exists",
    "label_not_exists",
    "missing_input_name",
    "publish_wait",
    "published_definition",
    "render_jsonpath",
    "resource_to_plain",
    "spec_to_plain",
    "spec_to_yaml",
    "utc_now",
]
