"""META byte compatibility with Talos 1.7 (golden vectors from Talos's own code and tests) and behaviour."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ichor.machinery.meta import (
    LENGTH,
    SIZE,
    Meta,
    MetaError,
    MetaKey,
    MetaValue,
    SyslinuxADV,
    TalosADV,
    decode_values,
    encode_values,
    key_id,
    parse_key,
)

VECTORS = json.loads((Path(__file__).parent / "data/meta/talos-v1.7.6-adv.json").read_text())
MIB = 1024 * 1024


def _from_runs(spec: dict[str, object]) -> bytes:
    buf = bytearray(int(spec["length"]))  # type: ignore[call-overload]
    for offset, hexed in spec["nonzero_runs"]:  # type: ignore[attr-defined]
        raw = bytes.fromhex(hexed)
        buf[offset : offset + len(raw)] = raw
    return bytes(buf)


@pytest.mark.parametrize("vector", VECTORS["talos_adv"]["vectors"], ids=lambda v: v["name"])
def test_talos_adv_matches_talos_bytes(vector: dict[str, object]) -> None:
    tags = {int(t): bytes.fromhex(v) for t, v in vector["tags"].items()}  # type: ignore[attr-defined]
    adv = TalosADV(tags)
    both = adv.to_bytes()
    assert len(both) == SIZE
    assert hashlib.sha256(both).hexdigest() == vector["sha256_of_both_copies"]
    head = bytes.fromhex(vector["head_hex"])  # type: ignore[arg-type]
    assert both[: len(head)] == head
    assert both[LENGTH - 36 : LENGTH - 4].hex() == vector["checksum_hex"]
    assert TalosADV.load(both).items() == tags


def test_talos_adv_reads_second_copy_when_first_is_damaged() -> None:
    values = {3: b"value1", 4: b"value2", 5: b"value3"}
    good = TalosADV(values).to_bytes()
    # Talos's recoverable corruptions (talos_test.go), applied for real this time.
    for zero_out in ([], [(0, 2)], [(30, 1000)], [(8, 4), (40, 2)], [(0, LENGTH)]):
        damaged = bytearray(good)
        for start, length in zero_out:
            damaged[start : start + length] = bytes(length)
        assert TalosADV.load(bytes(damaged)).items() == values


def test_talos_adv_both_copies_bad_is_talos_error() -> None:
    with pytest.raises(MetaError, match="adv: unexpected magic 0, expecting 5a4b3c2d"):
        TalosADV.load(bytes(SIZE))
    block = bytearray(TalosADV({6: b"A"}).marshal())
    block[20] ^= 1
    with pytest.raises(MetaError, match="adv: checksum mismatch"):
        TalosADV.parse_copy(bytes(block))


def test_talos_adv_capacity_is_talos_bound() -> None:
    adv = TalosADV()
    # Talos's bound: 20 + sum(len+8) of existing tags + the new value, compared with DataLength.
    assert adv.set(0x0C, bytes(LENGTH - 40 - 20))
    assert not adv.set(0x0D, b"x")
    assert adv.items().keys() == {0x0C}
    assert adv.set(0x0C, b"small")
    assert adv.set(0x0D, b"x")
    with pytest.raises(MetaError):
        adv.set(0, b"end tag")


@pytest.mark.parametrize(
    "vector",
    [v for v in VECTORS["syslinux_adv"]["vectors"] if v["test"] in ("TestADV_SetTag", "TestADV_DeleteTag")],
    ids=lambda v: v["name"],
)
def test_syslinux_adv_edits_match_talos_vectors(vector: dict[str, object]) -> None:
    adv = SyslinuxADV(_from_runs(vector["before"]))  # type: ignore[arg-type]
    if vector["test"] == "TestADV_SetTag":
        ok = adv.set(int(vector["tag"]), str(vector["value"]).encode())  # type: ignore[call-overload]
    else:
        ok = adv.delete(int(vector["tag"]))  # type: ignore[call-overload]
    assert ok is vector["ok"]
    assert adv.to_bytes() == _from_runs(vector["after"])  # type: ignore[arg-type]


def test_syslinux_adv_reads_testdata_tail() -> None:
    (vector,) = [v for v in VECTORS["syslinux_adv"]["vectors"] if v["test"] == "TestNewADV"]
    adv = SyslinuxADV(_from_runs(vector["after"]))
    assert adv.get(1) == b"test me"
    assert adv.tags() == [1]
    (cleanup,) = [v for v in VECTORS["syslinux_adv"]["vectors"] if v["test"] == "TestADV_cleanup"]
    empty = SyslinuxADV()
    assert empty.set(1, b"test me") and empty.delete(1)
    assert empty.to_bytes() == _from_runs(cleanup["after"])


def test_syslinux_adv_limits() -> None:
    adv = SyslinuxADV()
    assert not adv.set(1, bytes(256))
    for _ in range(1024):  # TestADV_overwrite
        assert adv.set(1, b"yes")
    assert adv.tags() == [1]
    for tag in range(1, 255):  # TestADV_many_tags: fills up, then refuses
        adv.set(tag, b"xa")
    assert 100 < len(adv.tags()) < 255
    assert adv.get(2) == b"xa"


@pytest.fixture
def meta_file(tmp_path: Path) -> Path:
    path = tmp_path / "meta"
    with path.open("wb") as f:
        f.truncate(MIB)
    return path


def test_meta_flow_as_talos_test(meta_file: Path) -> None:
    lines: list[str] = []
    meta = Meta.open(meta_file, printer=lines.append)
    assert lines == ["META: loaded 0 keys"]
    meta.set(MetaKey.Upgrade, "1.2.3")
    assert meta.get_str(MetaKey.Upgrade) == "1.2.3"
    assert meta.get(MetaKey.StagedUpgradeImageRef) is None
    assert meta.delete(MetaKey.Upgrade)
    assert not meta.delete(MetaKey.Upgrade)
    meta.set(MetaKey.StagedUpgradeInstallOptions, "install-fast")
    meta.flush()
    meta.reload()
    assert meta.get_str(MetaKey.StagedUpgradeInstallOptions) == "install-fast"
    again = Meta.open(meta_file)
    assert again.items() == {8: b"install-fast"}
    assert [key_id(t) for t in again.items()] == ["0x08"]


def test_meta_on_disk_layout(meta_file: Path) -> None:
    meta = Meta.open(meta_file)
    meta.set(MetaKey.UniqueMachineToken, b"token")
    meta.flush()
    raw = meta_file.read_bytes()
    assert len(raw) == MIB
    assert raw[:LENGTH] == raw[LENGTH:SIZE] == TalosADV({0x10: b"token"}).marshal()
    assert raw[SIZE:] == bytes(MIB - SIZE)  # a zeroed legacy ADV is written back as it was


def test_meta_keeps_legacy_and_memory_on_reload(meta_file: Path) -> None:
    legacy = SyslinuxADV()
    legacy.set(MetaKey.Upgrade, b"B")
    with meta_file.open("r+b") as f:
        f.seek(MIB - 1024)
        f.write(legacy.to_bytes())
    meta = Meta(meta_file)
    meta.set(MetaKey.UserReserved1, "kept")
    meta.reload()
    assert meta.get_str(MetaKey.Upgrade) == "B"  # from the legacy ADV
    assert meta.get_str(MetaKey.UserReserved1) == "kept"  # memory laid over disk
    assert meta.delete(MetaKey.Upgrade)  # deleted in the legacy ADV
    meta.flush()
    assert Meta.open(meta_file).get(MetaKey.Upgrade) is None


def test_meta_full_is_meta_write_failed(meta_file: Path) -> None:
    meta = Meta.open(meta_file)
    meta.set(MetaKey.UserReserved1, bytes(200 * 1024))
    with pytest.raises(MetaError, match=r"^meta write failed$"):
        meta.set(MetaKey.UserReserved2, bytes(62 * 1024))
    assert meta.get(MetaKey.UserReserved2) is None


def test_meta_refuses_short_partition(tmp_path: Path) -> None:
    small = tmp_path / "small"
    small.write_bytes(bytes(4096))
    with pytest.raises(MetaError, match="needs at least"):
        Meta.open(small)
    with pytest.raises(MetaError, match="cannot open META"):
        Meta.open(tmp_path / "missing")


def test_meta_damaged_first_copy_still_reads(meta_file: Path) -> None:
    meta = Meta.open(meta_file)
    meta.set(MetaKey.Upgrade, "A")
    meta.flush()
    with meta_file.open("r+b") as f:
        f.write(b"\xff" * 64)
        f.flush()
        os.fsync(f.fileno())
    assert Meta.open(meta_file).get_str(MetaKey.Upgrade) == "A"


def test_key_names_and_parsing() -> None:
    assert (int(MetaKey.Upgrade), int(MetaKey.UniqueMachineToken)) == (6, 0x10)
    assert [k.name for k in MetaKey][:3] == [
        "Upgrade",
        "StagedUpgradeImageRef",
        "StagedUpgradeInstallOptions",
    ]
    assert parse_key("0x0a") == MetaKey.MetalNetworkPlatformConfig
    assert parse_key("12") == MetaKey.UserReserved1
    with pytest.raises(ValueError, match="key must be a uint8"):
        parse_key("256")


@settings(max_examples=60, deadline=None)
@given(st.dictionaries(st.integers(1, 255), st.binary(max_size=300), max_size=12))
def test_talos_adv_round_trip(tags: dict[int, bytes]) -> None:
    both = TalosADV(tags).to_bytes()
    assert TalosADV.load(both).items() == dict(sorted(tags.items()))
    assert TalosADV.load(bytes(LENGTH) + both[LENGTH:]).items() == dict(sorted(tags.items()))


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["set", "delete"]), st.integers(1, 20), st.binary(max_size=40))))
def test_syslinux_adv_behaves_like_a_map(ops: list[tuple[str, int, bytes]]) -> None:
    adv = SyslinuxADV()
    model: dict[int, bytes] = {}
    for op, tag, value in ops:
        if op == "set":
            if adv.set(tag, value):
                model[tag] = value
            else:
                model.pop(tag, None)  # Talos deletes before it finds no room
        else:
            assert adv.delete(tag) == (tag in model)
            model.pop(tag, None)
        assert {t: adv.get(t) for t in adv.tags()} == model
        assert adv.to_bytes()[:512] == adv.to_bytes()[512:]


def test_meta_inside_a_disk_image(tmp_path: Path) -> None:
    image = tmp_path / "disk"
    with image.open("wb") as f:
        f.truncate(4 * MIB)
    meta = Meta.open(image, offset=2 * MIB, size=MIB)
    meta.set(MetaKey.UUIDOverride, "uuid")
    meta.flush()
    with image.open("rb") as f:
        f.seek(2 * MIB)
        assert f.read(LENGTH) == TalosADV({0x0F: b"uuid"}).marshal()
        f.seek(0)
        assert f.read(2 * MIB) == bytes(2 * MIB)  # nothing outside the partition
    assert Meta.open(image, offset=2 * MIB, size=MIB).get_str(MetaKey.UUIDOverride) == "uuid"


def test_meta_values_as_talos() -> None:
    value = MetaValue.parse("10=foo")
    assert (value.key, value.value, str(value)) == (10, "foo", "0xa=foo")
    assert MetaValue.parse(str(value)) == value
    assert MetaValue.parse("0x0a=a=b").value == "a=b"
    with pytest.raises(MetaError, match=r'^invalid value "foo"$'):
        MetaValue.parse("foo")
    with pytest.raises(MetaError, match=r'^invalid key "256"$'):
        MetaValue.parse("256=x")
    simple = [MetaValue.parse("10=foo"), MetaValue.parse("0xb=bar")]
    assert len(encode_values(simple)) == 20  # Talos's expectedEncodedSize
    assert decode_values(encode_values(simple)) == simple
    huge = [MetaValue(10, "foobar" * 256), MetaValue(11, "baz" * 256)]
    assert len(encode_values(huge, allow_gzip=False)) == 3084  # Talos's expectedEncodedSize
    gzipped = encode_values(huge)
    assert len(gzipped) < 200 and decode_values(gzipped) == huge
    assert decode_values("") == []
    with pytest.raises(MetaError, match="not base64"):
        decode_values("%%%")


def test_syslinux_adv_delete_of_a_garbled_tag_keeps_its_size() -> None:
    raw = bytearray(1024)
    raw[500:502] = b"\x07\xff"  # a tag near the end claiming 255 bytes
    raw[8:10] = b"\x09\xf0"  # a first tag whose length jumps to offset 250
    raw[250:252] = b"\x05\xf8"  # one that jumps to 500
    adv = SyslinuxADV(bytes(raw))
    assert adv.tags() == [9, 5, 7]
    assert adv.delete(7)
    assert len(adv.to_bytes()) == 1024 and adv.tags() == [9, 5]


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 4096), st.integers(0, 255)), min_size=1, max_size=8))
def test_damaged_first_copy_never_yields_wrong_tags(flips: list[tuple[int, int]]) -> None:
    tags = {6: b"A", 0x10: b"token"}
    both = bytearray(TalosADV(tags).to_bytes())
    for offset, value in flips:
        both[offset] = value
    assert TalosADV.load(bytes(both)).items() == tags  # the sha256 catches it; copy 2 answers
