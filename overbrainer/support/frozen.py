"""`@frozen`: an immutable record class that costs next to nothing to define.

`@dataclass(frozen=True)` compiles five or six methods per class with `exec`, and even
`dataclass(init=False, …)` inspects every annotation (string annotations go through a regex
each); the configuration model has close to twenty such classes, which alone took a large share of
`overbrainer config check`'s start-up. `@frozen` reads the fields from the class's own annotations
(a base's first, as a dataclass does), keeps them as their names, defaults and default factories
(no object per field: `fields()` makes them when asked), and attaches shared, generic `__init__`, `__repr__`,
`__eq__`, `__hash__`, `__setattr__` and `__delattr__` that behave like the generated ones:
positional or keyword arguments, defaults and `field(default_factory=…)`, `TypeError` on a missing
or unknown argument, `FrozenInstanceError` (an AttributeError) on assignment, equality and hashing
over every field (`@record`: the same, mutable). `fields`, `asdict` and `replace` here do what
`dataclasses`' do for these classes. For value objects built a few times per command (not in hot loops).
Both decorators are marked `typing.dataclass_transform` (PEP 681), so a type checker reads the classes
as dataclasses: their `__init__` signature, field types and immutability are checked.
"""

from __future__ import annotations

from operator import itemgetter
from typing import TYPE_CHECKING, Any, Callable, TypeVar, dataclass_transform

_FIELDS = "__frozen_fields__"  # (names, {name: default}, {name: default factory})
_CLASSVAR = ("ClassVar", "typing.ClassVar")
_C = TypeVar("_C", bound=type)


class FrozenInstanceError(AttributeError):
    """Assignment to a field of a `@frozen` instance."""


class _Missing:
    def __repr__(self) -> str:
        return "MISSING"


MISSING: Any = _Missing()
_new = tuple.__new__


class Field(tuple[Any, ...]):
    """One field of a `@frozen` class, as `field()` and `fields()` give it: its name, and its default
    or default factory. A tuple (name, default, default_factory): one C call makes it."""

    __slots__ = ()
    if TYPE_CHECKING:
        name: str
        default: Any
        default_factory: Any
    else:
        name = property(itemgetter(0))
        default = property(itemgetter(1))
        default_factory = property(itemgetter(2))

    def __repr__(self) -> str:
        return f"Field(name={self.name!r})"


def field(*, default: Any = MISSING, default_factory: Callable[[], Any] | Any = MISSING) -> Any:
    """A field's default as a factory (a fresh list or dict per instance), as `dataclasses.field`."""
    found: Field = _new(Field, ("", default, default_factory))  # named by the decorator
    return found


def _init(self: Any, *args: Any, **kwargs: Any) -> None:
    names, defaults, factories = getattr(type(self), _FIELDS)
    cls_name = type(self).__name__
    if len(args) > len(names):
        raise TypeError(f"{cls_name}.__init__() takes {len(names) + 1} positional arguments "
                        f"but {len(args) + 1} were given")
    for i, name in enumerate(names):
        if i < len(args):
            if name in kwargs:
                raise TypeError(f"{cls_name}.__init__() got multiple values for argument '{name}'")
            value = args[i]
        elif name in kwargs:
            value = kwargs.pop(name)
        elif name in defaults:
            value = defaults[name]
        elif name in factories:
            value = factories[name]()
        else:
            raise TypeError(f"{cls_name}.__init__() missing 1 required positional argument: '{name}'")
        object.__setattr__(self, name, value)
    if kwargs:
        raise TypeError(f"{cls_name}.__init__() got an unexpected keyword argument '{next(iter(kwargs))}'")
    post_init = getattr(self, "__post_init__", None)
    if post_init is not None:
        post_init()


def _values(self: Any) -> tuple[Any, ...]:
    return tuple(getattr(self, name) for name in getattr(type(self), _FIELDS)[0])


def _repr(self: Any) -> str:
    body = ", ".join(f"{name}={getattr(self, name)!r}" for name in getattr(type(self), _FIELDS)[0])
    return f"{type(self).__qualname__}({body})"


def _eq(self: Any, other: Any) -> Any:
    if other.__class__ is self.__class__:
        return _values(self) == _values(other)
    return NotImplemented


def _hash(self: Any) -> int:
    return hash(_values(self))


def _setattr(self: Any, name: str, value: Any) -> None:
    raise FrozenInstanceError(f"cannot assign to field '{name}'")


def _delattr(self: Any, name: str) -> None:
    raise FrozenInstanceError(f"cannot delete field '{name}'")


@dataclass_transform(frozen_default=True, field_specifiers=(field,))
def frozen(cls: _C) -> _C:
    """Class decorator: `cls` as an immutable record (see the module docstring)."""
    made: _C = _make(cls, immutable=True)
    return made


@dataclass_transform(field_specifiers=(field,))
def record(cls: _C) -> _C:
    """Class decorator: `cls` as a mutable record (as `@dataclass`: fields may be assigned, and
    instances are not hashable)."""
    made: _C = _make(cls, immutable=False)
    return made


def _make(cls: Any, immutable: bool) -> Any:
    own = cls.__dict__
    names = tuple(name for name, annotation in own.get("__annotations__", {}).items()
                  if not (isinstance(annotation, str) and annotation.startswith(_CLASSVAR)))
    defaults: dict[str, Any] = {}
    factories: dict[str, Callable[[], Any]] = {}
    for name in names:
        if name in own:
            value = own[name]
            if type(value) is not Field:
                defaults[name] = value
            elif value[2] is not MISSING:
                factories[name] = value[2]
                delattr(cls, name)  # a factory: no class attribute, as a dataclass
            elif value[1] is not MISSING:
                defaults[name] = value[1]
                setattr(cls, name, value[1])
            else:
                delattr(cls, name)
    inherited = [spec for base in cls.__mro__[-2:0:-1] if (spec := base.__dict__.get(_FIELDS)) is not None]
    if inherited:  # the bases' fields first, farthest base first (object has none)
        names, defaults, factories = _laid_over([*inherited, (names, defaults, factories)])
    if own.get("__doc__") is None:
        cls.__doc__ = f"{cls.__name__}({', '.join(names)})"
    setattr(cls, _FIELDS, (names, defaults, factories))
    cls.__match_args__ = names  # type: ignore[misc]  # the class being made gets its own
    cls.__init__ = _init
    cls.__repr__ = _repr
    cls.__eq__ = _eq
    if immutable:
        cls.__hash__ = _hash
        cls.__setattr__ = _setattr
        cls.__delattr__ = _delattr
    else:
        cls.__hash__ = None
    return cls


def _laid_over(specs: list[tuple[tuple[str, ...], dict[str, Any], dict[str, Any]]]
               ) -> tuple[tuple[str, ...], dict[str, Any], dict[str, Any]]:
    """The fields of `specs` laid over each other in order: a field defined again replaces the
    earlier one (its default or factory too) in the earlier one's place."""
    order: dict[str, None] = {}
    defaults: dict[str, Any] = {}
    factories: dict[str, Any] = {}
    for names, spec_defaults, spec_factories in specs:
        for name in names:
            order[name] = None
            defaults.pop(name, None)
            factories.pop(name, None)
        defaults.update(spec_defaults)
        factories.update(spec_factories)
    return tuple(order), defaults, factories


def is_frozen(obj: Any) -> bool:
    return hasattr(type(obj) if not isinstance(obj, type) else obj, _FIELDS)


def fields(obj: Any) -> tuple[Field, ...]:
    """The fields of a `@frozen` class or instance, in order (as `dataclasses.fields`)."""
    try:
        names, defaults, factories = getattr(obj, _FIELDS)
    except AttributeError:
        raise TypeError("must be called with a @frozen class or instance") from None
    return tuple(_new(Field, (name, defaults.get(name, MISSING), factories.get(name, MISSING))) for name in names)


def names(obj: Any) -> tuple[str, ...]:
    """The field names of a `@frozen` class or instance, in order: `fields()` without a Field each."""
    try:
        found: tuple[str, ...] = getattr(obj, _FIELDS)[0]
        return found
    except AttributeError:
        raise TypeError("must be called with a @frozen class or instance") from None


def asdict(obj: Any) -> dict[str, Any]:
    """The instance as a dict, recursively through records, lists, tuples and dicts, each copied
    (as `dataclasses.asdict`)."""
    if not is_frozen(obj) or isinstance(obj, type):
        raise TypeError("asdict() should be called on @frozen instances")
    plain: dict[str, Any] = _plain(obj)
    return plain


def _plain(value: Any) -> Any:
    if is_frozen(value) and not isinstance(value, type):
        return {name: _plain(getattr(value, name)) for name in getattr(type(value), _FIELDS)[0]}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    if isinstance(value, tuple):
        return type(value)(_plain(v) for v in value)
    if isinstance(value, dict):
        return {_plain(k): _plain(v) for k, v in value.items()}
    return value


def replace(obj: Any, **changes: Any) -> Any:
    """A copy of the instance with `changes` applied (as `dataclasses.replace`)."""
    for name in names(obj):
        changes.setdefault(name, getattr(obj, name))
    return type(obj)(**changes)
