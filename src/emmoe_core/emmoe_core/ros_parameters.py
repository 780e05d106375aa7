"""Config dataclasses as ROS 2 parameters: `declare_config(node, ConfigType)` declares one parameter per field
(nested dataclasses flattened), reads the values back and builds the config, so that its `__post_init__` validation
runs. Re-exported by emmoe_core.ros_helpers, the module nodes import.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, Union

from rcl_interfaces.msg import ParameterDescriptor
from rclpy.exceptions import ParameterException, ParameterUninitializedException
from rclpy.node import Node
from rclpy.parameter import Parameter

# The metadata key of a config field naming its ROS parameter (a str) or describing it (a ParameterSpec).
ROS_PARAMETER = "ros_parameter"


@dataclasses.dataclass(frozen=True)
class ParameterSpec:
    """How one config field becomes a ROS parameter (a field's metadata[ROS_PARAMETER], or a value of
    declare_config's `parameters`).

    Attributes:
        name: the parameter name ("" = the field name).
        dynamic_typing: declare it dynamically typed and pass its value through unchecked (e.g. a tri-state
            "auto"/"true"/"false" that `-p name:=true` delivers as a bool); the dataclass validates it.
    """

    name: str = ""
    dynamic_typing: bool = False


_SCALARS: dict[type, Parameter.Type] = {bool: Parameter.Type.BOOL, int: Parameter.Type.INTEGER,
                                        float: Parameter.Type.DOUBLE, str: Parameter.Type.STRING}
_TYPE_WORDS = {Parameter.Type.BOOL: "a bool (true or false)", Parameter.Type.INTEGER: "an integer",
               Parameter.Type.DOUBLE: "a floating-point number (write 1.0, not 1)", Parameter.Type.STRING: "a string",
               Parameter.Type.STRING_ARRAY: "a list of strings (e.g. \"['a', 'b']\")"}


@dataclasses.dataclass(frozen=True)
class _Leaf:
    """One declared parameter: the field path it fills, its ROS type, default and conversion."""

    path: tuple[str, ...]
    name: str
    kind: Parameter.Type | None  # None: dynamically typed
    default: Any
    convert: Callable[[Any], Any]


def declare_config(node: Node, config_type: type[Any], overrides: Mapping[str, Any] | None = None,
                   parameters: Mapping[str, str | ParameterSpec | None] | None = None) -> Any:
    """Declare one ROS parameter per field of the config dataclass, read them back and build the config.

    Field types: str, int, float, bool, list[str] / tuple[str, ...] (string arrays), Path (a string), `X | None`
    for X in str and Path ("" is None), and nested dataclasses (their fields are flattened into parameters of the
    same level). Defaults come from the dataclass (a nested dataclass field's default instance included).

    Args:
        node: the node that owns the parameters.
        config_type: the dataclass.
        overrides: parameter name -> default used instead of the dataclass's (required for fields without one).
        parameters: field path ("checks.order" for nested fields) -> the parameter's name, a ParameterSpec, or None
            to leave the field at its default without a parameter; it wins over the fields' metadata[ROS_PARAMETER].

    Raises:
        ValueError: a value of the wrong type (naming the parameter) or rejected by the dataclass's validation.
    """
    leaves = _leaves(config_type, (), None, dict(parameters or {}))
    overrides = dict(overrides or {})
    unknown = sorted(set(overrides) - {leaf.name for leaf in leaves})
    if unknown:
        raise ValueError(f"{config_type.__name__}: no parameter named {', '.join(unknown)}")
    values: dict[tuple[str, ...], Any] = {}
    for leaf in leaves:
        default = overrides.get(leaf.name, leaf.default)
        if default is dataclasses.MISSING:
            raise ValueError(f"parameter {leaf.name}: {config_type.__name__} has no default; pass one in overrides")
        values[leaf.path] = leaf.convert(_declare(node, leaf.name, leaf.kind, default))
    return _build(config_type, (), values)


def _declare(node: Node, name: str, kind: Parameter.Type | None, default: Any) -> Any:
    """Declare one parameter and return its value (the default when an empty array was declared and not set)."""
    empty_array = kind is Parameter.Type.STRING_ARRAY and not default
    try:
        if kind is None:
            node.declare_parameter(name, default, ParameterDescriptor(dynamic_typing=True))
        elif empty_array:
            node.declare_parameter(name, Parameter.Type.STRING_ARRAY)  # an empty list would be typed a byte array
        else:
            node.declare_parameter(name, list(default) if kind is Parameter.Type.STRING_ARRAY else default)
        value = node.get_parameter(name).value
    except ParameterUninitializedException:
        return list(default)
    except ParameterException as error:
        wanted = _TYPE_WORDS.get(kind, str(kind)) if kind is not None else "another type"
        raise ValueError(f"parameter {name}: expected {wanted} ({error})") from None
    if kind is Parameter.Type.STRING_ARRAY:
        return [str(item) for item in value]
    return value


def _leaves(config_type: type[Any], prefix: tuple[str, ...], instance: Any,
            parameters: dict[str, str | ParameterSpec | None]) -> list[_Leaf]:
    if not dataclasses.is_dataclass(config_type):
        raise TypeError(f"{config_type!r} is not a dataclass")
    hints = typing.get_type_hints(config_type)
    leaves = []
    for field in dataclasses.fields(config_type):
        if not field.init:
            continue
        path = (*prefix, field.name)
        key = ".".join(path)
        default = _default(field, instance)
        hint = hints[field.name]
        if isinstance(hint, type) and dataclasses.is_dataclass(hint):
            nested = default if default is not dataclasses.MISSING else None
            leaves.extend(_leaves(hint, path, nested, parameters))
            continue
        spec = parameters[key] if key in parameters else field.metadata.get(ROS_PARAMETER, ParameterSpec())
        if spec is None:
            continue
        if isinstance(spec, str):
            spec = ParameterSpec(spec)
        name = spec.name or field.name
        if spec.dynamic_typing:
            leaves.append(_Leaf(path, name, None, default, lambda value: value))
            continue
        kind, convert, default = _parameter_type(key, hint, default)
        leaves.append(_Leaf(path, name, kind, default, convert))
    return leaves


def _default(field: dataclasses.Field[Any], instance: Any) -> Any:
    if instance is not None:
        return getattr(instance, field.name)
    if field.default is not dataclasses.MISSING:
        return field.default
    if field.default_factory is not dataclasses.MISSING:
        return field.default_factory()
    return dataclasses.MISSING


def _parameter_type(key: str, hint: Any, default: Any) -> tuple[Parameter.Type, Callable[[Any], Any], Any]:
    """The ROS type of a field, the conversion of its parameter value, and its default as a parameter value."""
    origin, arguments = typing.get_origin(hint), typing.get_args(hint)
    if origin in (Union, types.UnionType) and len(arguments) == 2 and type(None) in arguments:
        inner = next(argument for argument in arguments if argument is not type(None))
        if inner in (str, Path):
            return (Parameter.Type.STRING, lambda value: inner(value) if value else None,
                    "" if default is None or default is dataclasses.MISSING else str(default))
    elif hint is Path:
        return Parameter.Type.STRING, Path, default if default is dataclasses.MISSING else str(default)
    elif hint is float:  # declared as a double even where the dataclass writes an integer default
        return Parameter.Type.DOUBLE, float, default if default is dataclasses.MISSING else float(default)
    elif hint in _SCALARS:
        return _SCALARS[hint], lambda value: value, default
    elif origin in (list, tuple) and arguments in ((str,), (str, ...)):
        sequence: Callable[[Any], Any] = list if origin is list else tuple
        return (Parameter.Type.STRING_ARRAY, sequence,
                default if default is dataclasses.MISSING else list(default))
    raise TypeError(f"config field {key}: no ROS parameter for type {hint!r}; map it with a ParameterSpec "
                    "(dynamic_typing) or leave it out (parameters={...: None})")


def _build(config_type: type[Any], prefix: tuple[str, ...], values: dict[tuple[str, ...], Any],
           instance: Any = None) -> Any:
    """The config from the parameter values; fields without a parameter keep their defaults (those of `instance`,
    the default value of a nested dataclass field, when there is one)."""
    hints = typing.get_type_hints(config_type)
    arguments = {}
    for field in dataclasses.fields(config_type):
        path = (*prefix, field.name)
        if path in values:
            arguments[field.name] = values[path]
        elif dataclasses.is_dataclass(hints[field.name]) and any(key[:len(path)] == path for key in values):
            nested = _default(field, instance)
            arguments[field.name] = _build(hints[field.name], path, values,
                                           None if nested is dataclasses.MISSING else nested)
    return dataclasses.replace(instance, **arguments) if instance is not None else config_type(**arguments)
