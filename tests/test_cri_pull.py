"""Image pulls as Talos makes them: retried while the registry is unreachable, never for an image no
mirror has, and failing with each mirror named and what it answered."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from ichor.machined import cri
from ichor.machined.cri._pull import hosts_tried, pull_error

# What ctr 1.6.20 printed on a node whose mirror for docker.io is 10.237.41.1:5000.
NOT_IN_MIRROR = """\
time="2026-11-23T20:03:40Z" level=info msg="trying next host - response was http.StatusNotFound" host="10.237.41.1:5000"
time="2026-11-23T20:03:40Z" level=info msg="trying next host" error="failed to do request: Head \\"https://registry-1.docker.io/v2/library/nothere/manifests/1\\": dial tcp: lookup registry-1.docker.io on 127.0.0.53:53: no such host" host=registry-1.docker.io
ctr: failed to resolve reference "docker.io/library/nothere:1": failed to do request: Head "https://registry-1.docker.io/v2/library/nothere/manifests/1": dial tcp: lookup registry-1.docker.io on 127.0.0.53:53: no such host
"""
MIRROR_DOWN = """\
time="2026-11-23T20:04:52Z" level=info msg="trying next host" error="failed to do request: Head \\"http://10.237.41.1:5000/v2/siderolabs/busybox/manifests/v1.36?ns=ghcr.io\\": dial tcp 10.237.41.1:5000: connect: connection refused" host="10.237.41.1:5000"
time="2026-11-23T20:04:52Z" level=info msg="trying next host" error="failed to do request: Head \\"https://ghcr.io/v2/siderolabs/busybox/manifests/v1.36\\": dial tcp: lookup ghcr.io on 127.0.0.53:53: no such host" host=ghcr.io
ctr: failed to resolve reference "ghcr.io/siderolabs/busybox:v1.36": failed to do request: Head "http://10.237.41.1:5000/v2/siderolabs/busybox/manifests/v1.36?ns=ghcr.io": dial tcp 10.237.41.1:5000: connect: connection refused
"""
MIRROR = ["http://10.237.41.1:5000"]


@pytest.mark.parametrize(
    ("reference", "registry"),
    [("busybox", "docker.io"), ("library/busybox:1", "docker.io"), ("ghcr.io/a/b:v1", "ghcr.io"),
     ("localhost/x", "localhost"), ("reg.local:5000/x@sha256:ab", "reg.local:5000")],
)  # fmt: skip
def test_registry_of(reference: str, registry: str) -> None:
    assert cri.registry_of(reference) == registry


def test_mirrors_are_read_from_the_registrys_hosts_toml_else_default(tmp_path: Path) -> None:
    (tmp_path / "docker.io").mkdir()
    (tmp_path / "docker.io/hosts.toml").write_text(
        '[host."http://10.0.0.1:5000"]\n  capabilities = ["pull", "resolve"]\n[host."https://m2"]\n'
    )
    assert cri.mirrors_for(tmp_path, "docker.io") == ["http://10.0.0.1:5000", "https://m2"]
    assert cri.mirrors_for(tmp_path, "quay.io") == []
    (tmp_path / "_default").mkdir()
    (tmp_path / "_default/hosts.toml").write_text('[host."http://any:1"]\n')
    assert cri.mirrors_for(tmp_path, "quay.io") == ["http://any:1"]


def test_each_host_ctr_tried_is_read_back_with_its_reason() -> None:
    tried = hosts_tried(NOT_IN_MIRROR)
    assert [(t.host, t.not_found) for t in tried] == [
        ("10.237.41.1:5000", True),
        ("registry-1.docker.io", False),
    ]
    assert tried[1].reason == "dial tcp: lookup registry-1.docker.io on 127.0.0.53:53: no such host"


def test_an_image_no_mirror_has_is_not_found_and_names_the_mirror() -> None:
    error = pull_error("docker.io/library/nothere:1", NOT_IN_MIRROR, MIRROR)
    assert error.not_found and error.final
    assert "mirror 10.237.41.1:5000: not found (HTTP 404)" in str(error)
    assert "push docker.io/library/nothere:1 to the mirror (http://10.237.41.1:5000)" in (error.hint or "")


def test_a_mirror_that_is_down_is_worth_retrying() -> None:
    error = pull_error("ghcr.io/siderolabs/busybox:v1.36", MIRROR_DOWN, MIRROR)
    assert not error.final and not error.not_found
    assert "mirror 10.237.41.1:5000: dial tcp 10.237.41.1:5000: connect: connection refused" in str(error)
    assert 'machine.registries.mirrors["ghcr.io"]' in (error.hint or "")


NO_MIRROR = """\
time="2026-11-23T20:03:41Z" level=info msg="trying next host" error="failed to do request: Head \\"https://quay.io/v2/x/y/manifests/1\\": dial tcp: lookup quay.io on 127.0.0.53:53: no such host" host=quay.io
ctr: failed to resolve reference "quay.io/x/y:1": failed to do request: Head "https://quay.io/v2/x/y/manifests/1": dial tcp: lookup quay.io on 127.0.0.53:53: no such host
"""


def test_a_registry_with_no_mirror_that_does_not_resolve_fails_for_good_saying_where_to_add_one() -> None:
    error = pull_error("quay.io/x/y:1", NO_MIRROR, [])
    assert error.final and not error.not_found
    assert "quay.io (the registry itself): dial tcp: lookup quay.io on 127.0.0.53:53: no such host" in str(
        error
    )
    assert 'no mirror is configured for quay.io: add one in machine.registries.mirrors["quay.io"]' in (
        error.hint or ""
    )


class _Clock:
    def __init__(self) -> None:
        self.now = 0.0
        self.slept: list[float] = []

    def __call__(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds


def _attempts(*outcomes: str | None):  # type: ignore[no-untyped-def]
    """An attempt that fails with each stderr in turn (None: succeeds)."""
    left = list(outcomes)

    async def attempt() -> None:
        stderr = left.pop(0)
        if stderr is not None:
            raise cri.PullAttemptError(stderr)

    return attempt


def test_a_pull_retries_with_backoff_and_reasons_until_the_registry_is_back() -> None:
    clock, said = _Clock(), []
    attempt = _attempts(MIRROR_DOWN, MIRROR_DOWN, MIRROR_DOWN, None)
    asyncio.run(cri.pull_with_retry(attempt, "ghcr.io/siderolabs/busybox:v1.36", MIRROR, report=said.append,
                                    clock=clock, sleep=clock.sleep))  # fmt: skip
    assert clock.slept == [5.0, 10.0, 20.0]
    assert said[0] == "Pulling image ghcr.io/siderolabs/busybox:v1.36..."
    assert said[-1] == "Pulled image ghcr.io/siderolabs/busybox:v1.36"
    assert "retrying pull of image ghcr.io/siderolabs/busybox:v1.36 in 5s (attempt 1 failed)" in said[1]
    assert "connection refused" in said[1]


def test_a_pull_gives_up_at_its_deadline_with_the_last_reason() -> None:
    clock = _Clock()
    attempt = _attempts(*[MIRROR_DOWN] * 50)
    with pytest.raises(
        cri.ImagePullError, match=r"refused; .*no such host \(gave up after 5 attempt\(s\) over 100s\)"
    ):
        asyncio.run(cri.pull_with_retry(attempt, "ghcr.io/siderolabs/busybox:v1.36", MIRROR, report=lambda _: None,
                                        timeout=100, clock=clock, sleep=clock.sleep))  # fmt: skip
    assert max(clock.slept) <= cri._pull.PULL_RETRY_LIMIT


def test_an_image_no_mirror_has_fails_at_once() -> None:
    clock = _Clock()
    with pytest.raises(cri.ImagePullError, match="not found") as raised:
        asyncio.run(cri.pull_with_retry(_attempts(NOT_IN_MIRROR), "docker.io/library/nothere:1", MIRROR,
                                        report=lambda _: None, clock=clock, sleep=clock.sleep))  # fmt: skip
    assert raised.value.not_found and clock.slept == []


def test_a_registry_refusing_is_not_containerd_being_down(tmp_path: Path) -> None:
    fake = tmp_path / "ctr"
    fake.write_text(f"#!/bin/sh\ncat >&2 <<'EOF'\n{MIRROR_DOWN}EOF\nexit 1\n")
    fake.chmod(0o755)
    ctr = cri.Ctr(Path("/run/containerd/containerd.sock"), binary=str(fake))
    with pytest.raises(cri.PullAttemptError) as raised:
        asyncio.run(ctr.pull("k8s.io", "ghcr.io/siderolabs/busybox:v1.36", tmp_path))
    assert "connection refused" in raised.value.stderr

    fake.write_text(
        "#!/bin/sh\necho 'ctr: failed to dial \"/run/containerd/containerd.sock\": context deadline exceeded' >&2\nexit 1\n"
    )
    with pytest.raises(cri.ContainerdUnavailableError, match="does not answer"):
        asyncio.run(ctr.pull("k8s.io", "ghcr.io/siderolabs/busybox:v1.36", tmp_path))
