"""The checks that configuration dataclasses share in their `__post_init__`, with one message style."""

from __future__ import annotations

import math
from collections.abc import Iterable
from numbers import Real


def require_positive(name: str, value: object) -> None:
    """Raise ValueError("`name` must be positive, got `value`") unless `value` is a finite number above 0.

    Zero, negative numbers, NaN, the infinities and non-numbers are refused.
    """
    if not (isinstance(value, Real) and math.isfinite(value) and float(value) > 0):
        raise ValueError(f"{name} must be positive, got {value!r}")


def require_positive_fields(config: object, names: Iterable[str]) -> None:
    """`require_positive` for each field of `config` in `names`, named `<type of config>.<field>`."""
    for name in names:
        require_positive(f"{type(config).__name__}.{name}", getattr(config, name))
