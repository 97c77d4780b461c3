"""Kernel command line assembly as Talos 1.7's installer does it, with ``-arg`` dropping (seed 002:670)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from ichor.machinery.kernelargs import Cmdline, installer_cmdline

DEFAULTS = (
    "init_on_alloc=1 slab_nomerge pti=on consoleblank=0 nvme_core.io_timeout=4294967295 "
    "printk.devkmsg=on ima_template=ima-ng ima_appraise=fix ima_hash=sha512"
)


def test_metal_default() -> None:
    assert str(installer_cmdline()) == f"talos.platform=metal console=ttyS0 console=tty0 {DEFAULTS}"


def test_config_url_and_extra_args() -> None:
    cmdline = installer_cmdline(
        config_url="http://10.5.0.1:8080/config.yaml", extra_args=["net.ifnames=0", "ip=dhcp"]
    )
    assert str(cmdline) == (
        f"talos.platform=metal talos.config=http://10.5.0.1:8080/config.yaml console=ttyS0 console=tty0 "
        f"{DEFAULTS} net.ifnames=0 ip=dhcp"
    )


def test_seed_drop_one_console() -> None:
    # 002:670: "console=ttyS0 can be dropped by specifying -console=ttyS0 as an extra argument"
    assert (
        str(installer_cmdline(extra_args=["-console=ttyS0"]))
        == f"talos.platform=metal console=tty0 {DEFAULTS}"
    )


def test_drop_all_of_a_key_and_defaults() -> None:
    cmdline = installer_cmdline(extra_args=["-console", "-pti", "-ima_hash=sha512", "-nothere"])
    assert cmdline.get("console") is None and cmdline.get("pti") is None
    assert cmdline.get("ima_hash") == []
    assert not [a for a in cmdline.args() if a.split("=")[0] in ("ima_hash", "console", "pti")]
    assert "consoleblank=0" in cmdline.args()


def test_console_and_platform_are_overwritten_others_appended() -> None:
    cmdline = installer_cmdline(extra_args=["console=tty1", "talos.platform=openstack", "init_on_alloc=0"])
    assert cmdline.get("console") == ["tty1"]
    assert cmdline.args()[:2] == ["talos.platform=openstack", "console=tty1"]  # replaced where they stood
    assert cmdline.get("init_on_alloc") == ["1", "0"]
    assert str(cmdline).count("init_on_alloc=") == 2


def test_parse_groups_values_of_a_key() -> None:
    cmdline = Cmdline.parse("console=tty0 quiet console=ttyS0,115200 a=b=c\n")
    assert str(cmdline) == "console=tty0 console=ttyS0,115200 quiet a=b=c"
    assert cmdline.first("a") == "b=c" and cmdline.get("quiet") == [""]


_KEYS = ["console", "pti", "quiet", "ima_hash", "talos.platform", "x.y", "slab_nomerge"]
_ARG = st.builds(
    lambda neg, key, value: ("-" if neg else "") + key + ("" if value is None else f"={value}"),
    st.booleans(),
    st.sampled_from(_KEYS),
    st.one_of(st.none(), st.sampled_from(["", "tty0", "ttyS0", "on", "1"])),
)


@settings(max_examples=100, deadline=None)
@given(st.lists(_ARG, max_size=10))
def test_dropped_args_never_survive(extra: list[str]) -> None:
    args = installer_cmdline(extra_args=extra).args()
    keys = [a.lstrip("-").partition("=")[0] for a in extra]
    for arg in extra:
        key, _, value = arg.lstrip("-").partition("=")
        if arg.startswith("-") and keys.count(key) == 1:  # the only mention of its key
            if "=" in arg:
                assert f"{key}={value}" not in args and (value or key not in args)
            else:
                assert not [a for a in args if a.partition("=")[0] == key]
    assert not any(a.startswith("-") for a in args)


def test_grouped_negations_follow_talos() -> None:
    # go-procfs groups "-console=tty0 -console" into one key whose first value decides: only
    # console=tty0 is dropped. Talos does the same, so Ichor does too.
    assert installer_cmdline(extra_args=["-console=tty0", "-console"]).get("console") == ["ttyS0"]
