"""`@frozen`: a frozen dataclass that costs next to nothing to define.

`@dataclass(frozen=True)` compiles five or six methods per class with `exec` when the module is
imported; the configuration model has close to twenty such classes, which alone took a large share
of `overbrainer config check`'s start-up. `@frozen` gives the same class without compiling
anything: it registers the fields with `dataclass(init=False, repr=False, eq=False)` (so
`dataclasses.fields`, `asdict` and `replace` work as usual) and attaches shared, generic
`__init__`, `__repr__`, `__eq__`, `__hash__`, `__setattr__` and `__delattr__` that behave like the
generated ones: positional or keyword arguments, defaults and `default_factory`, `TypeError` on a
missing or unknown argument, `FrozenInstanceError` on assignment, equality and hashing over the
compared fields. For value objects built a few times per command (not in hot loops).
"""

from __future__ import annotations

from dataclasses import MISSING, FrozenInstanceError, dataclass, fields

_FIELDS = "__frozen_fields__"


def _init(self, *args, **kwargs) -> None:
    spec = getattr(type(self), _FIELDS)
    cls_name = type(self).__name__
    if len(args) > len(spec):
        raise TypeError(f"{cls_name}.__init__() takes {len(spec) + 1} positional arguments "
                        f"but {len(args) + 1} were given")
    for i, (name, default, factory) in enumerate(spec):
        if i < len(args):
            if name in kwargs:
                raise TypeError(f"{cls_name}.__init__() got multiple values for argument '{name}'")
            value = args[i]
        elif name in kwargs:
            value = kwargs.pop(name)
        elif default is not MISSING:
            value = default
        elif factory is not MISSING:
            value = factory()
        else:
            raise TypeError(f"{cls_name}.__init__() missing 1 required positional argument: '{name}'")
        object.__setattr__(self, name, value)
    if kwargs:
        raise TypeError(f"{cls_name}.__init__() got an unexpected keyword argument '{next(iter(kwargs))}'")
    post_init = getattr(self, "__post_init__", None)
    if post_init is not None:
        post_init()


def _values(self, which: str) -> tuple:
    return tuple(getattr(self, f.name) for f in fields(self) if getattr(f, which))


def _repr(self) -> str:
    body = ", ".join(f"{f.name}={getattr(self, f.name)!r}" for f in fields(self) if f.repr)
    return f"{type(self).__qualname__}({body})"


def _eq(self, other):
    if other.__class__ is self.__class__:
        return _values(self, "compare") == _values(other, "compare")
    return NotImplemented


def _hash(self) -> int:
    return hash(tuple(getattr(self, f.name) for f in fields(self)
                      if (f.compare if f.hash is None else f.hash)))


def _setattr(self, name, value):
    raise FrozenInstanceError(f"cannot assign to field '{name}'")


def _delattr(self, name):
    raise FrozenInstanceError(f"cannot delete field '{name}'")


def frozen(cls):
    """Class decorator: `cls` as a frozen dataclass (see the module docstring)."""
    if cls.__dict__.get("__doc__") is None:
        # dataclass() would build this from inspect.signature(), which costs more than the class.
        cls.__doc__ = f"{cls.__name__}({', '.join(cls.__dict__.get('__annotations__', {}))})"
    cls = dataclass(init=False, repr=False, eq=False)(cls)
    spec = tuple((f.name, f.default, f.default_factory) for f in fields(cls) if f.init)
    setattr(cls, _FIELDS, spec)
    cls.__init__ = _init
    cls.__repr__ = _repr
    cls.__eq__ = _eq
    cls.__hash__ = _hash
    cls.__setattr__ = _setattr
    cls.__delattr__ = _delattr
    return cls
