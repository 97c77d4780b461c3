"""Hardware watchdog timers (``WatchdogTimerConfig``): Talos's resources, the device armed, fed
and disarmed on a metal node, and never touched on a node that shares the host's devices.

No watchdog is armed here: the controller is handed a recording device. (The real device is driven
in the VM test of the metal image.)
"""

from __future__ import annotations

import asyncio
import errno
from pathlib import Path

from controller_helpers import apply, config, run, running

from ichor.machined.controllers import watchdog
from ichor.machined.cosi import WAIT_STATUSES, Registry, assert_no_resource, assert_resource, spec_to_plain
from ichor.machined.platform import Layout, Platform
from ichor.machined.resources import (
    BOOT_SLOTS,
    WATCHDOG_TIMER_CONFIGS,
    WATCHDOG_TIMER_STATUSES,
    BootSlotSpec,
    WatchdogTimerStatusSpec,
    register_node_types,
)
from ichor.machined.resources._protoenc import decode_spec, encode_spec

WAIT_ID = "runtime.WatchdogTimerController"


def _document(device: str = "/dev/watchdog0", timeout: str | None = None) -> str:
    line = f"timeout: {timeout}\n" if timeout else ""
    return config() + f"---\napiVersion: v1alpha1\nkind: WatchdogTimerConfig\ndevice: {device}\n{line}"


class Device:
    def __init__(self, path: str, log: list[tuple[str, str, int]], rounding: int = 0) -> None:
        self.path, self.log, self.rounding = path, log, rounding

    def set_timeout(self, seconds: int) -> int:
        self.log.append((self.path, "timeout", seconds))
        return seconds + self.rounding

    def keepalive(self) -> None:
        self.log.append((self.path, "keepalive", 0))

    def disarm(self) -> None:
        self.log.append((self.path, "magic close", 0))


class Opener:
    def __init__(self, missing: tuple[str, ...] = (), rounding: int = 0) -> None:
        self.log: list[tuple[str, str, int]] = []
        self.missing = set(missing)
        self.rounding = rounding

    def __call__(self, path: str) -> Device:
        if path in self.missing:
            raise FileNotFoundError(errno.ENOENT, "No such file or directory", path)
        self.log.append((path, "open", 0))
        return Device(path, self.log, self.rounding)

    def count(self, what: str) -> int:
        return sum(1 for _, action, _ in self.log if action == what)


def _layout(root: Path, platform: Platform) -> Layout:
    return Layout(root, "10.5.0.2", platform=platform, own_netns=platform.owns_kernel)


def test_definitions_and_wire_form_are_talos_ones() -> None:
    registry = Registry()
    register_node_types(registry)
    for name in ("WatchdogTimerConfigs.runtime.talos.dev", "WatchdogTimerStatuses.runtime.talos.dev"):
        spec = registry.get(name).spec
        assert (spec.default_namespace, spec.declared_aliases) == ("runtime", ())
        assert [(c.name, c.json_path) for c in spec.print_columns] == [
            ("Device", "{.device}"),
            ("Timeout", "{.timeout}"),
        ]
    status = WatchdogTimerStatusSpec(device="/dev/watchdog0", timeout="1m0s", feed_interval="20s")
    assert spec_to_plain(status) == {"device": "/dev/watchdog0", "timeout": "1m0s", "feedInterval": "20s"}
    data = encode_spec("WatchdogTimerStatuses.runtime.talos.dev", status) or b""
    # Talos's WatchdogTimerStatusSpec: device = 1, timeout = 2 and feed_interval = 3 (Durations).
    assert data.startswith(b"\n\x0e/dev/watchdog0\x12\x02\x08<\x1a\x02\x08\x14")
    assert decode_spec("WatchdogTimerStatuses.runtime.talos.dev", data) == {
        "device": "/dev/watchdog0", "timeout": "1m0s", "feed_interval": "20s"}  # fmt: skip


def test_only_a_metal_node_may_arm_a_watchdog(tmp_path: Path) -> None:
    assert _layout(tmp_path, Platform.METAL).watchdog_refusal() is None
    for platform in (Platform.CONTAINER, Platform.PROCESS):
        refusal = _layout(tmp_path, platform).watchdog_refusal() or ""
        assert refusal.startswith(f"not armed: a {platform.value} node shares the host's devices"), refusal


def test_the_document_becomes_the_config_with_talos_default_timeout(tmp_path: Path) -> None:
    async def main() -> None:
        async with running(watchdog.watchdog_timer_config_controller()) as state:
            apply(state, _document())
            await assert_resource(
                state,
                WATCHDOG_TIMER_CONFIGS,
                "timer",
                lambda r: (r.spec.device, r.spec.timeout) == ("/dev/watchdog0", "1m0s"),
            )
            apply(state, _document("/dev/watchdog1", "2m"))
            await assert_resource(
                state,
                WATCHDOG_TIMER_CONFIGS,
                "timer",
                lambda r: (r.spec.device, r.spec.timeout) == ("/dev/watchdog1", "2m0s"),
            )
            apply(state, config())
            await assert_no_resource(state, WATCHDOG_TIMER_CONFIGS, "timer")

    run(main)


def test_metal_node_arms_feeds_retimes_moves_and_disarms(tmp_path: Path) -> None:
    opener, console = Opener(rounding=0), []

    async def main() -> None:
        controllers = watchdog.watchdog_controllers(
            _layout(tmp_path, Platform.METAL), opener, say=console.append
        )
        async with running(*controllers) as state:
            # 0.3 s is below Talos's 10 s minimum (validation refuses it in a config); the controller
            # takes what it is given, so the feeding can be watched here.
            apply(state, _document(timeout="0.3s"))
            status = await assert_resource(state, WATCHDOG_TIMER_STATUSES, "timer")
            # A driver answering 0 s keeps the asked timeout in the status.
            assert status.spec == WatchdogTimerStatusSpec(
                "/dev/watchdog0", timeout="300ms", feed_interval="100ms"
            )
            assert opener.log[:3] == [("/dev/watchdog0", "open", 0), ("/dev/watchdog0", "timeout", 0),
                                      ("/dev/watchdog0", "keepalive", 0)]  # fmt: skip
            apply(state, _document(timeout="30s"))
            await assert_resource(
                state,
                WATCHDOG_TIMER_STATUSES,
                "timer",
                lambda r: (r.spec.timeout, r.spec.feed_interval) == ("30s", "10s"),
            )
            assert opener.count("open") == 1, "a new timeout keeps the device open"
            apply(state, _document("/dev/watchdog1", "30s"))
            await assert_resource(
                state, WATCHDOG_TIMER_STATUSES, "timer", lambda r: r.spec.device == "/dev/watchdog1"
            )
            assert ("/dev/watchdog0", "magic close", 0) in opener.log and opener.count("open") == 2
            apply(state, config())
            await assert_no_resource(state, WATCHDOG_TIMER_STATUSES, "timer")
            assert opener.log[-1] == ("/dev/watchdog1", "magic close", 0)
            assert state.spec_of(WAIT_STATUSES, WAIT_ID) is None

    run(main)
    assert "watchdog /dev/watchdog1 armed: timeout 30s, fed every 10s" in console, console
    assert "watchdog /dev/watchdog1 disarmed" in console, console


def test_the_watchdog_is_fed_every_third_of_its_timeout(tmp_path: Path) -> None:
    opener = Opener(rounding=0)

    async def main() -> None:
        controller = watchdog.WatchdogTimerController(_layout(tmp_path, Platform.METAL), opener)
        async with running(watchdog.watchdog_timer_config_controller(), controller) as state:
            apply(state, _document(timeout="1s"))  # the driver says 1 s: fed every 333 ms
            status = await assert_resource(state, WATCHDOG_TIMER_STATUSES, "timer")
            assert (status.spec.timeout, status.spec.feed_interval) == (
                "1s",
                "333.333ms",
            )  # microseconds: timedelta's precision
            await asyncio.sleep(1.2)
            feeds = opener.count("keepalive")
            assert 3 <= feeds <= 6, opener.log  # one when armed, then one per 333 ms

    run(main)


def test_the_driver_rounding_sets_the_status_and_the_feeding(tmp_path: Path) -> None:
    opener = Opener(rounding=2)  # the driver sets 2 s more than asked

    async def main() -> None:
        async with running(
            *watchdog.watchdog_controllers(_layout(tmp_path, Platform.METAL), opener)
        ) as state:
            apply(state, _document(timeout="10s"))
            await assert_resource(
                state,
                WATCHDOG_TIMER_STATUSES,
                "timer",
                lambda r: (r.spec.timeout, r.spec.feed_interval) == ("12s", "4s"),
            )

    run(main)


def test_a_missing_device_is_named_and_tried_again(tmp_path: Path) -> None:
    opener, console = Opener(missing=("/dev/watchdog9",)), []

    async def main() -> None:
        controller = watchdog.WatchdogTimerController(
            _layout(tmp_path, Platform.METAL), opener, say=console.append, retry_after=0.2
        )
        async with running(watchdog.watchdog_timer_config_controller(), controller) as state:
            apply(state, _document("/dev/watchdog9"))
            wait = await assert_resource(state, WAIT_STATUSES, WAIT_ID)
            assert wait.spec.reason == "/dev/watchdog9: No such file or directory", wait.spec
            assert state.spec_of(WATCHDOG_TIMER_STATUSES, "timer") is None
            opener.missing.clear()  # the driver loaded late
            await assert_resource(state, WATCHDOG_TIMER_STATUSES, "timer")
            await assert_no_resource(state, WAIT_STATUSES, WAIT_ID)

    run(main)
    assert "watchdog not armed: /dev/watchdog9: No such file or directory" in console, console


def test_a_container_node_publishes_the_config_and_never_opens_the_host_device(tmp_path: Path) -> None:
    opener, console = Opener(), []

    async def main() -> None:
        layout = _layout(tmp_path, Platform.CONTAINER)
        async with running(*watchdog.watchdog_controllers(layout, opener, say=console.append)) as state:
            apply(state, _document())
            await assert_resource(state, WATCHDOG_TIMER_CONFIGS, "timer")
            wait = await assert_resource(state, WAIT_STATUSES, WAIT_ID)
            assert wait.spec.reason.startswith("/dev/watchdog0 not armed: a container node shares"), wait.spec
            await asyncio.sleep(0.05)
            assert state.spec_of(WATCHDOG_TIMER_STATUSES, "timer") is None
            apply(state, config())
            await assert_no_resource(state, WAIT_STATUSES, WAIT_ID)

    run(main)
    assert opener.log == []
    assert any(line.startswith("watchdog /dev/watchdog0 not armed: a container node") for line in console), (
        console
    )


def test_a_trial_boot_arms_the_first_watchdog_until_the_slot_is_blessed(tmp_path: Path) -> None:
    """No document: a node booted on a trial slot arms /dev/watchdog0 (2 min), so a hang spends a
    try; the blessing disarms it; the document, when there is one, wins; no device, no watchdog."""
    opener, devices = Opener(), {"/dev/watchdog0"}

    async def main() -> None:
        controllers = watchdog.watchdog_controllers(
            _layout(tmp_path, Platform.METAL), opener, device_exists=devices.__contains__
        )
        async with running(*controllers) as state:
            apply(state, config())
            state.create(BOOT_SLOTS.new("A", BootSlotSpec(version="v1.7.6", state="good")))
            state.create(
                BOOT_SLOTS.new("B", BootSlotSpec(version="v1.7.7", state="trial", tries=2, booted=True))
            )
            status = await assert_resource(state, WATCHDOG_TIMER_STATUSES, "timer")
            assert status.spec == WatchdogTimerStatusSpec(
                "/dev/watchdog0", timeout="2m0s", feed_interval="40s"
            )
            apply(state, _document(timeout="30s"))  # the document wins
            await assert_resource(state, WATCHDOG_TIMER_STATUSES, "timer", lambda r: r.spec.timeout == "30s")
            apply(state, config())
            await assert_resource(state, WATCHDOG_TIMER_STATUSES, "timer", lambda r: r.spec.timeout == "2m0s")
            # blessed: the trial is over, the watchdog disarmed with the magic close
            state.update(state.get("runtime", BOOT_SLOTS, "B").with_spec(
                BootSlotSpec(version="v1.7.7", state="good", booted=True)))  # fmt: skip
            await assert_no_resource(state, WATCHDOG_TIMER_STATUSES, "timer")
            assert opener.log[-1] == ("/dev/watchdog0", "magic close", 0)
            # a trial on a machine with no watchdog: nothing armed, nothing waited for
            devices.clear()
            state.update(state.get("runtime", BOOT_SLOTS, "B").with_spec(
                BootSlotSpec(version="v1.7.8", state="trial", tries=3, booted=True)))  # fmt: skip
            await asyncio.sleep(0.2)
            assert state.spec_of(WATCHDOG_TIMER_CONFIGS, "timer") is None
            assert state.spec_of(WAIT_STATUSES, WAIT_ID) is None
            # a trial slot that is not the booted one arms nothing either
            devices.add("/dev/watchdog0")
            state.update(state.get("runtime", BOOT_SLOTS, "B").with_spec(
                BootSlotSpec(version="v1.7.8", state="trial", tries=3, booted=False)))  # fmt: skip
            await asyncio.sleep(0.2)
            assert state.spec_of(WATCHDOG_TIMER_CONFIGS, "timer") is None

    run(main)
    assert opener.count("open") == 1, opener.log
