"""ichor.machinery.codecache: dataclasses' methods from compiled code recorded beforehand."""

from __future__ import annotations

import dataclasses
import importlib.util
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from ichor.machinery import codecache

MODULE = """
import dataclasses

@dataclasses.dataclass(frozen=True)
class Point:
    x: int
    y: int = 2

@dataclasses.dataclass(order=True)
class Named:
    name: str
    tags: list[str] = dataclasses.field(default_factory=list)
"""


@pytest.fixture
def clean_dataclasses() -> Iterator[None]:
    assert "exec" not in vars(dataclasses)
    yield
    vars(dataclasses).pop("exec", None)


def _module(tmp_path: Path, name: str) -> Path:
    path = tmp_path / f"{name}.py"
    path.write_text(MODULE)
    return path


def _import(path: Path, name: str) -> object:
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    finally:
        del sys.modules[name]
    return module


def test_recorded_texts_are_run_from_their_code_and_the_classes_behave(
    tmp_path: Path, clean_dataclasses: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.syspath_prepend(str(tmp_path))
    _module(tmp_path, "codecache_sample_a")
    out = tmp_path / codecache.FILE_NAME
    count = codecache.record(out, ("codecache_sample_a",))
    sys.modules.pop("codecache_sample_a")
    assert count >= 6  # __init__, __repr__, __eq__, __setattr__/__delattr__, __hash__, the order methods
    assert "exec" not in vars(dataclasses), "record() must leave dataclasses as it found it"

    cache = codecache.install(out)
    assert cache is not None and vars(dataclasses)["exec"] is cache
    assert codecache.install(out) is cache, "a second install keeps the first"
    module = _import(_module(tmp_path, "codecache_sample_b"), "codecache_sample_b")
    assert cache.hits == count and cache.misses == 0
    point = module.Point(1)  # type: ignore[attr-defined]
    assert (point, repr(point), hash(point) == hash(module.Point(1, 2))) == (  # type: ignore[attr-defined]
        module.Point(1, 2),  # type: ignore[attr-defined]
        "Point(x=1, y=2)",
        True,
    )
    with pytest.raises(dataclasses.FrozenInstanceError):
        point.x = 3
    named = module.Named("b")  # type: ignore[attr-defined]
    assert named.tags == [] and module.Named("a") < named  # type: ignore[attr-defined]


def test_a_text_not_recorded_is_compiled_as_before(tmp_path: Path, clean_dataclasses: None) -> None:
    out = tmp_path / codecache.FILE_NAME
    out.write_bytes(codecache.CodeCache({}).dumps())
    cache = codecache.install(out)
    assert cache is not None

    @dataclasses.dataclass
    class Late:
        value: int

    assert (
        Late(3) == Late(3)
        and repr(Late(3)) == "test_a_text_not_recorded_is_compiled_as_before.<locals>.Late(value=3)"
    )
    assert cache.hits == 0 and cache.misses >= 3
    assert cache.codes == {}, "a booting node's cache does not grow"


@pytest.mark.parametrize(
    "data",
    [
        b"\x00\x00\r\n" + codecache.CodeCache({}).dumps()[4:],  # another bytecode version's magic
        importlib.util.MAGIC_NUMBER + b"\xff garbage",
        importlib.util.MAGIC_NUMBER,
        b"",
    ],
    ids=["other-magic", "garbage", "magic-only", "empty"],
)
def test_an_unusable_file_changes_nothing(tmp_path: Path, clean_dataclasses: None, data: bytes) -> None:
    path = tmp_path / codecache.FILE_NAME
    path.write_bytes(data)
    assert codecache.install(path) is None
    assert "exec" not in vars(dataclasses)


def test_the_environment_can_turn_it_off(
    tmp_path: Path, clean_dataclasses: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / codecache.FILE_NAME
    path.write_bytes(codecache.CodeCache({}).dumps())
    monkeypatch.setenv("ICHOR_CODECACHE", "off")
    assert codecache.install(path) is None and "exec" not in vars(dataclasses)
    monkeypatch.setenv("ICHOR_CODECACHE", "on")
    assert codecache.install(path) is not None


def test_a_file_of_other_objects_is_refused(tmp_path: Path, clean_dataclasses: None) -> None:
    import marshal

    path = tmp_path / codecache.FILE_NAME
    path.write_bytes(importlib.util.MAGIC_NUMBER + marshal.dumps({"text": "not code"}))
    assert codecache.install(path) is None
    assert codecache.install(tmp_path / "absent") is None
    assert "exec" not in vars(dataclasses)


def test_the_default_path_is_beside_the_package_and_absent_in_a_checkout() -> None:
    import ichor

    assert codecache.default_path() == Path(ichor.__file__).parent / "_dataclass_code.bin"
    assert not codecache.default_path().exists(), "only an image carries the file"
