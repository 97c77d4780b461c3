"""The discovery service: how the nodes of one cluster find each other (Talos's ``discovery.talos.dev``).

Server side: an :class:`AffiliateStore` (clusters -> affiliates with opaque encrypted data,
endpoints and a TTL, read through an injectable clock) behind the ``sidero.discovery.server.Cluster``
gRPC service (:class:`ClusterService`), run by :class:`DiscoveryServer` and by
``python -m ichor.discovery serve --listen 127.0.0.1:3000``. The wire format is discovery-api's, so
Talos nodes can use this server and Ichor nodes can use Talos's.

Client side: :class:`DiscoveryClient` encrypts this node's affiliate with the cluster secret
(:class:`AffiliateCipher`, AES-GCM data and AES-ECB endpoints as Talos does), keeps it published
and decrypts the other nodes'; what fails to decrypt is dropped with a logged reason.

Exceptions::

    DiscoveryError              anything this package refuses; carries an optional ``hint``
    ├── DiscoveryConfigError    bad endpoint, cluster id or cluster secret for a client
    └── DecryptError            data or endpoint that does not open with this cluster's key

The server reports bad requests as gRPC ``InvalidArgument``, and full clusters, affiliates or
stores (too many clusters, watchers or bytes, see :class:`Limits`) as ``ResourceExhausted``. This package must not know about node resources or controllers
(``ichor.machined.controllers.cluster`` does) and never sees a cluster secret on the server side.
"""

from __future__ import annotations

from ichor.discovery._client import (
    DEFAULT_TTL,
    DiscoveryClient,
    HelloResult,
    RemoteAffiliate,
    WatchEvent,
    parse_endpoint,
)
from ichor.discovery._crypto import AffiliateCipher
from ichor.discovery._errors import DecryptError, DiscoveryConfigError, DiscoveryError
from ichor.discovery._server import ClusterService, DiscoveryServer
from ichor.discovery._store import AffiliateStore, AffiliateView, Change, LimitExceeded, Limits

__all__ = [
    "DEFAULT_TTL",
    "AffiliateCipher",
    "AffiliateStore",
    "AffiliateView",
    "Change",
    "ClusterService",
    "DecryptError",
    "DiscoveryClient",
    "DiscoveryConfigError",
    "DiscoveryError",
    "DiscoveryServer",
    "HelloResult",
    "LimitExceeded",
    "Limits",
    "RemoteAffiliate",
    "WatchEvent",
    "parse_endpoint",
]
