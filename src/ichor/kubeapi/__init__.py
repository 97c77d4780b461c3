"""A small asyncio client for the Kubernetes API, from a kubeconfig (client certificate + CA).

What the node and the tests need and nothing more: JSON ``GET``/``POST``/``PATCH``/``DELETE``,
API discovery (``/api``, ``/apis``, ``/apis/<group>/<version>``) mapping ``apiVersion`` + ``kind``
to the resource's plural and whether it is namespaced, and :meth:`KubeClient.create` for an object
of any kind. TLS is the standard library's; every request has a timeout and every response body a
size bound. It speaks HTTP/1.1 with one connection per request (the API server closes idle ones
anyway), never follows redirects and never watches.

Exceptions::

    KubeAPIError                   anything this package refuses; carries an optional ``hint``
    ├── KubeconfigInvalidError     the kubeconfig is not one this client can use
    ├── KubeConnectionError        the API server cannot be reached (refused, TLS, timeout, closed)
    ├── KubeResponseError          the reply is not HTTP/JSON we can read, or is over the size bound
    ├── KubeStatusError            the API server answered with a ``Status`` failure (code, reason)
    │   ├── KubeNotFoundError      404 NotFound
    │   └── KubeAlreadyExistsError 409 AlreadyExists
    └── KubeUnknownKindError       discovery does not know this apiVersion/kind

Imports only :mod:`ichor.machinery`: talosctl, machined and the provisioners may all use it.
"""

from __future__ import annotations

from ichor.kubeapi._client import DEFAULT_MAX_RESPONSE_BYTES, DEFAULT_TIMEOUT, APIResource, KubeClient
from ichor.kubeapi._errors import (
    KubeAlreadyExistsError,
    KubeAPIError,
    KubeconfigInvalidError,
    KubeConnectionError,
    KubeNotFoundError,
    KubeResponseError,
    KubeStatusError,
    KubeUnknownKindError,
)
from ichor.kubeapi._kubeconfig import Kubeconfig, load_kubeconfig

__all__ = [
    "DEFAULT_MAX_RESPONSE_BYTES",
    "DEFAULT_TIMEOUT",
    "APIResource",
    "KubeAPIError",
    "KubeAlreadyExistsError",
    "KubeClient",
    "KubeConnectionError",
    "KubeNotFoundError",
    "KubeResponseError",
    "KubeStatusError",
    "KubeUnknownKindError",
    "Kubeconfig",
    "KubeconfigInvalidError",
    "load_kubeconfig",
]
