"""The version contract: which generated defaults a given ``--talos-version`` gets.

Talos keeps configs generated for an older release loadable by that release: ``gen config
--talos-version v1.5`` must not emit fields that 1.5 does not know. Each property below names one
such feature and the first minor release that has it.
"""

from __future__ import annotations

__all__ = ["CURRENT_CONTRACT", "VersionContract"]

import re
from dataclasses import dataclass
from functools import total_ordering

from ichor.machinery.errors import MachineryError

_VERSION = re.compile(r"^v?(\d+)\.(\d+)(?:\.(\d+))?(?:[-+].*)?$")


@total_ordering
@dataclass(frozen=True)
class VersionContract:
    major: int
    minor: int

    @classmethod
    def parse(cls, text: str) -> VersionContract:
        """Parse ``v1.7``, ``1.7.6`` or ``v1.7.0-alpha.1`` into a contract (patch level ignored)."""
        match = _VERSION.match(text.strip())
        if match is None:
            raise MachineryError(
                f"error parsing version {text!r}",
                hint="pass --talos-version as vMAJOR.MINOR, for example v1.7",
            )
        return cls(int(match.group(1)), int(match.group(2)))

    def __lt__(self, other: object) -> bool:
        if not isinstance(other, VersionContract):
            return NotImplemented
        return (self.major, self.minor) < (other.major, other.minor)

    def _at_least(self, major: int, minor: int) -> bool:
        return (self.major, self.minor) >= (major, minor)

    def __str__(self) -> str:
        return f"v{self.major}.{self.minor}"

    @property
    def supports_aggregator_ca(self) -> bool:
        return self._at_least(0, 9)

    @property
    def cluster_discovery_enabled(self) -> bool:
        return self._at_least(0, 13)

    @property
    def pod_security_policy_enabled(self) -> bool:
        return not self._at_least(1, 0)

    @property
    def pod_security_admission_enabled(self) -> bool:
        return self._at_least(1, 1)

    @property
    def stable_hostname_enabled(self) -> bool:
        return self._at_least(1, 2)

    @property
    def kubelet_default_runtime_seccomp_profile_enabled(self) -> bool:
        return self._at_least(1, 2)

    @property
    def kubernetes_discovery_backend_disabled(self) -> bool:
        return self._at_least(1, 3)

    @property
    def apid_ext_key_usage_check_enabled(self) -> bool:
        return self._at_least(1, 3)

    @property
    def api_server_audit_policy_supported(self) -> bool:
        return self._at_least(1, 3)

    @property
    def secretbox_encryption_supported(self) -> bool:
        return self._at_least(1, 3)

    @property
    def kubelet_manifests_directory_disabled(self) -> bool:
        return self._at_least(1, 5)

    @property
    def disk_quota_support_enabled(self) -> bool:
        return self._at_least(1, 5)

    @property
    def kube_prism_enabled(self) -> bool:
        return self._at_least(1, 6)

    @property
    def host_dns_enabled(self) -> bool:
        return self._at_least(1, 7)

    @property
    def use_rsa_service_account_key(self) -> bool:
        return self._at_least(1, 7)


CURRENT_CONTRACT = VersionContract(1, 7)
