"""The fuzzing suite's budget: one hypothesis profile for every ``tests/test_fuzz_*.py`` property.

Deterministic (``derandomize``: the same examples every run, so a CI failure reproduces locally)
and sized so the whole suite takes well under a minute on a loaded 2-core machine. For a longer
local hunt, ``ICHOR_FUZZ_SCALE=20 pytest -m fuzz`` multiplies every budget (and still derandomizes).

Each property of the suite: no crash (only the package's own exception types, never a bare
``KeyError``/``ValueError``/traceback), bounded memory where input can amplify, a clear error,
nothing written.
"""

from __future__ import annotations

import functools
import os

from hypothesis import HealthCheck, settings

_SCALE = max(1, int(os.environ.get("ICHOR_FUZZ_SCALE", "1")))

settings.register_profile(
    "ichor-fuzz",
    derandomize=True,
    database=None,
    deadline=None,
    print_blob=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much],
)


def budget(examples: int) -> settings:
    """The suite's profile with ``examples`` examples (times ``ICHOR_FUZZ_SCALE``)."""
    return settings(settings.get_profile("ichor-fuzz"), max_examples=examples * _SCALE)


@functools.cache
def generated_controlplane() -> str:
    """A freshly generated control plane config: the well-formed input the fuzzers mutate."""
    from ichor.machinery.generate import GenOptions, OutputType, generate
    from ichor.machinery.secrets import SecretsBundle

    opts = GenOptions(cluster_name="fuzz", endpoint="https://127.0.0.1:6443")
    outputs = generate(
        SecretsBundle.generate(), opts, output_types=[OutputType.CONTROLPLANE], with_docs=False
    )
    return outputs.outputs[OutputType.CONTROLPLANE]
