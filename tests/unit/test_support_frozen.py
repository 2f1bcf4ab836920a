"""`@frozen` behaves like `@dataclass(frozen=True)` for everything the configuration model uses."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import pytest

from overbrainer.support import frozen as records
from overbrainer.support.frozen import frozen


def _pair(decorator, field):
    @decorator
    class Base:
        name: str
        count: int = 3
        tags: list = field(default_factory=list)

    @decorator
    class Child(Base):
        extra: str | None = None

        @property
        def label(self) -> str:
            return f"{self.name}:{self.count}"

    return Base, Child


REAL = (*_pair(dataclass(frozen=True), dataclasses.field), dataclasses)
OURS = (*_pair(frozen, records.field), records)


@pytest.mark.parametrize("classes", [REAL, OURS], ids=["dataclass", "frozen"])
def test_same_behaviour_as_a_frozen_dataclass(classes):
    Base, Child, helpers = classes
    a = Child("x", 4, extra="e")
    assert (a.name, a.count, a.tags, a.extra, a.label) == ("x", 4, [], "e", "x:4")
    assert repr(a) == f"{Child.__qualname__}(name='x', count=4, tags=[], extra='e')"
    assert a == Child("x", 4, [], "e") and a != Child("x", 5, extra="e") and a != Base("x", 4)
    assert hash(Base("x", 1, ())) == hash(Base("x", 1, ())) != hash(Base("x", 2, ())) and Base("x").tags is not Base("x").tags
    with pytest.raises(helpers.FrozenInstanceError):
        a.name = "y"
    with pytest.raises(helpers.FrozenInstanceError):
        del a.name
    with pytest.raises(TypeError, match="missing 1 required positional argument: 'name'"):
        Base()
    with pytest.raises(TypeError, match="unexpected keyword argument 'nope'"):
        Base("x", nope=1)
    with pytest.raises(TypeError, match="multiple values for argument 'name'"):
        Base("x", name="y")
    with pytest.raises(TypeError, match="positional arguments"):
        Base("x", 1, [], "too many")
    assert [f.name for f in helpers.fields(a)] == ["name", "count", "tags", "extra"]
    assert helpers.asdict(a) == {"name": "x", "count": 4, "tags": [], "extra": "e"}
    assert helpers.asdict(Child("x", tags=[Base("y")])) == {"name": "x", "count": 3, "tags": [
        {"name": "y", "count": 3, "tags": []}], "extra": None}
    assert helpers.replace(a, count=9) == Child("x", 9, extra="e")
    assert Child.__match_args__ == ("name", "count", "tags", "extra")
    assert isinstance(Child("x").tags, list) and "tags" not in Child.__dict__


def test_fields_name_their_default_or_factory():
    Base, Child, _ = OURS
    found = [(f.name, f.default, f.default_factory) for f in records.fields(Child)]
    assert found == [("name", records.MISSING, records.MISSING), ("count", 3, records.MISSING),
                     ("tags", records.MISSING, list), ("extra", None, records.MISSING)]
    assert records.fields(Child)[:3] == records.fields(Base) and repr(records.fields(Base)[0]) == "Field(name='name')"
    assert records.names(Child("x")) == records.names(Child) == tuple(f.name for f in records.fields(Child))
    for helper in (records.fields, records.names):
        with pytest.raises(TypeError, match="@frozen"):
            helper(object())


def test_a_field_defined_again_is_the_subclass_own_in_the_base_place():
    @frozen
    class A:
        x: int = 3
        y: list = records.field(default_factory=list)

    @frozen
    class B(A):
        x: int  # required here

    @frozen
    class C(B):
        z: str = "z"
        y: tuple = ()

    assert C.__match_args__ == ("x", "y", "z") and A() == A(3, [])
    assert C(1) == C(1, (), "z") and repr(C(1)) == f"{C.__qualname__}(x=1, y=(), z='z')"
    with pytest.raises(TypeError, match="missing 1 required positional argument: 'x'"):
        C()
    assert [(f.name, f.default, f.default_factory) for f in records.fields(B)] == [
        ("x", records.MISSING, records.MISSING), ("y", records.MISSING, list)]


def test_config_model_classes_are_frozen_without_compiled_methods():
    """The configuration model's value classes use `@frozen` (start-up: nothing is compiled)."""
    from overbrainer.config import model
    from overbrainer.support import frozen as frozen_module

    for cls in (model.Project, model.Topic, model.Provider, model.Role, model.Pipeline, model.LocalTarget,
                model.SshTarget, model.RunpodTarget, model.Runpod, model.Export, model.Hub):
        assert cls.__init__ is frozen_module._init, cls
    assert "dataclasses" not in model.__dict__


def test_record_is_mutable_and_unhashable():
    @records.record
    class Box:
        items: list = records.field(default_factory=list)
        label: str = "box"

    box = Box()
    box.label = "crate"
    assert (box, box.label) == (Box([], "crate"), "crate")
    with pytest.raises(TypeError):
        hash(box)

