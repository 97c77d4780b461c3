"""grub.cfg (Talos 1.7's text, Ichor's counting block) and the grubenv, checked with GRUB's own tools."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ichor.machinery import proc
from ichor.machinery.bootloader import (
    ENV_SIZE,
    BootloaderError,
    MenuEntry,
    Slot,
    create_env,
    installed,
    parse_cmdlines,
    parse_env,
    quote,
    read_env,
    render_env,
    render_grub_cfg,
    unquote,
    update_env,
    upgrade,
    write_env,
)

# testdata/grub_write_test.cfg of Talos v1.7.6 (bootloader/grub), version.Name = "Test"
TALOS_WRITE_TEST = """set default="A - Test v0.0.1"

set timeout=3

insmod all_video

terminal_input console
terminal_output console

menuentry "A - Test v0.0.1" {
  set gfxmode=auto
  set gfxpayload=text
  linux /A/vmlinuz cmdline A
  initrd /A/initramfs.xz
}
menuentry "Reset Talos installation and return to maintenance mode" {
  set gfxmode=auto
  set gfxpayload=text
  linux /A/vmlinuz cmdline A talos.experimental.wipe=system:EPHEMERAL,STATE
  initrd /A/initramfs.xz
}
"""


def _need(tool: str) -> None:
    if shutil.which(tool) is None:
        pytest.skip(f"{tool} not installed (grub-common; scripts/os-packages.txt)")


def test_talos_mode_is_talos_text() -> None:
    entries = {Slot.A: MenuEntry("v0.0.1", "cmdline A")}
    assert render_grub_cfg(entries, Slot.A, counting=False, name="Test") == TALOS_WRITE_TEST
    no_reset = render_grub_cfg(entries, Slot.A, counting=False, name="TestOld", add_reset=False)
    assert no_reset == TALOS_WRITE_TEST.split('menuentry "Reset')[0].replace("Test v", "TestOld v")
    both = {Slot.A: MenuEntry("v1.0.0", "cmdline A"), Slot.B: MenuEntry("1.2.0", "cmdline B")}
    head = render_grub_cfg(both, Slot.A, fallback=Slot.B, counting=False).splitlines()[:3]
    assert head == ['set default="A - Talos v1.0.0"', 'set fallback="B - Talos 1.2.0"', "set timeout=3"]


def test_quote_as_talos() -> None:
    url = "http://my-host/config.yaml?uuid=${uuid}&serial=${serial}"
    assert quote(url) == "http://my-host/config.yaml?uuid=\\$\\{uuid\\}\\&serial=\\$\\{serial\\}"
    assert quote("foo\\$") == "foo\\\\\\$"
    assert unquote(quote(url)) == url


def test_refusals() -> None:
    with pytest.raises(BootloaderError, match="invalid default entry: B"):
        render_grub_cfg({Slot.A: MenuEntry("v1", "x")}, Slot.B)
    entries = {Slot.A: MenuEntry("v1", "x"), Slot.B: MenuEntry("v2", "y")}
    with pytest.raises(BootloaderError, match="must not be the same"):
        render_grub_cfg(entries, Slot.A, fallback=Slot.A)


def test_counting_cfg_passes_grub_script_check(tmp_path: Path) -> None:
    _need("grub-script-check")
    cmdline = "talos.platform=metal console=ttyS0 talos.config=http://10.5.0.1/c?uuid=${uuid}&mac=${mac}"
    entries = {Slot.A: MenuEntry("v1.7.6", cmdline), Slot.B: MenuEntry("v1.7.7", cmdline)}
    cfg = render_grub_cfg(entries, Slot.A)
    path = tmp_path / "grub.cfg"
    path.write_text(cfg)
    proc.run(["grub-script-check", str(path)])
    assert 'menuentry "A - Talos v1.7.6" --id A {' in cfg
    assert "ichor.slot=A" in cfg and "ichor.slot=B" in cfg
    assert "linux /${ichor_good}/vmlinuz" in cfg and "talos.experimental.wipe=system:EPHEMERAL,STATE" in cfg
    assert "uuid=\\$\\{uuid\\}\\&mac" in cfg  # the user's ${uuid} reaches the kernel, not GRUB's expansion
    # the counting chain spells 3, 2, 1 and saves only what GRUB changes
    assert [line.strip() for line in cfg.splitlines() if "set ichor_tries=" in line] == [
        "set ichor_tries=0",
        "set ichor_tries=2",
        "set ichor_tries=1",
        "set ichor_tries=0",
        "set ichor_tries=0",
    ]
    assert "save_env -f ($root)/grub/grubenv ichor_try ichor_tries ichor_failed" in cfg


def test_broken_cfg_is_caught_by_grub_script_check(tmp_path: Path) -> None:
    _need("grub-script-check")
    cfg = render_grub_cfg({Slot.A: MenuEntry("v1", "x")}, Slot.A).replace("  fi\n", "", 1)
    (tmp_path / "bad.cfg").write_text(cfg)
    assert proc.run(["grub-script-check", str(tmp_path / "bad.cfg")], check=False).exit_code != 0


def test_grubenv_read_by_grub_editenv_and_rewritten_in_place(tmp_path: Path) -> None:
    _need("grub-editenv")
    env = tmp_path / "grubenv"
    state = upgrade(installed("v1.7.6"), "v1.7.7").state
    create_env(env, state.to_env())
    listed = proc.run(["grub-editenv", str(env), "list"]).stdout.splitlines()
    assert listed == [f"{k}={v}" for k, v in state.to_env().items()]
    inode = env.stat().st_ino
    update_env(env, {"ichor_good": "B", "ichor_try": "", "ichor_tries": "0"})
    assert env.stat().st_ino == inode and env.stat().st_size == ENV_SIZE  # same file, same size
    assert "ichor_good=B" in proc.run(["grub-editenv", str(env), "list"]).stdout.splitlines()
    # and what GRUB's own tool writes, we read
    proc.run(["grub-editenv", str(env), "set", "ichor_tries=1"])
    assert read_env(env)["ichor_tries"] == "1"
    with pytest.raises(BootloaderError, match="cannot create"):
        create_env(env, {})


def test_grubenv_refusals(tmp_path: Path) -> None:
    with pytest.raises(BootloaderError, match="GRUB's block is 1024"):
        render_env({"k": "x" * 1100})
    with pytest.raises(BootloaderError, match="newline or backslash"):
        render_env({"k": "a\nb"})
    short = tmp_path / "short"
    short.write_bytes(b"# GRUB Environment Block\n")
    with pytest.raises(BootloaderError, match="not 1024"):
        write_env(short, {"a": "b"})
    assert short.stat().st_size == 25  # never truncated or replaced
    with pytest.raises(BootloaderError, match="not a GRUB environment block"):
        read_env(short)


@settings(max_examples=40, deadline=None)
@given(
    st.dictionaries(
        st.from_regex(r"[A-Za-z_][A-Za-z0-9_]{0,15}", fullmatch=True),
        st.text(
            alphabet=st.characters(codec="utf-8", exclude_characters="\n\\", exclude_categories=["Cs"]),
            max_size=30,
        ),
        max_size=10,
    )
)
def test_grubenv_round_trip(env: dict[str, str]) -> None:
    try:
        data = render_env(env)
    except BootloaderError:
        return
    assert len(data) == ENV_SIZE and parse_env(data) == env


def test_cmdlines_read_back_from_a_written_cfg() -> None:
    cmdline = "talos.platform=metal talos.config=http://h/c?uuid=${uuid}&x=1"
    entries = {Slot.A: MenuEntry("v1", cmdline), Slot.B: MenuEntry("v2", "console=ttyS0")}
    assert parse_cmdlines(render_grub_cfg(entries, Slot.B)) == {Slot.A: cmdline, Slot.B: "console=ttyS0"}
    assert parse_cmdlines(TALOS_WRITE_TEST) == {Slot.A: "cmdline A"}


@settings(max_examples=60, deadline=None)
@given(st.binary(min_size=999, max_size=999))
def test_grubenv_parser_reads_any_block_body(body: bytes) -> None:
    env = parse_env(b"# GRUB Environment Block\n" + body)
    assert all("\n" not in k + v and "=" not in k for k, v in env.items())
