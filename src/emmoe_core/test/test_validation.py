"""The shared configuration checks: positive means a finite number above 0."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

import pytest
from emmoe_core.validation import require_positive, require_positive_fields


@pytest.mark.parametrize("value", [1, 0.001, 2.5, True])
def test_finite_numbers_above_zero_pass(value: object) -> None:
    require_positive("x", value)


@pytest.mark.parametrize("value", [0, 0.0, -1, -0.5, math.nan, math.inf, -math.inf, "1", None])
def test_zero_negatives_nan_infinities_and_non_numbers_are_refused(value: object) -> None:
    with pytest.raises(ValueError, match=f"^timeout_s must be positive, got {re.escape(repr(value))}$"):
        require_positive("timeout_s", value)


@dataclass
class _Config:
    speed: float = 1.0
    period: float = 0.1


def test_fields_are_named_by_their_type_and_checked_in_order() -> None:
    require_positive_fields(_Config(), ("speed", "period"))
    with pytest.raises(ValueError, match=r"^_Config\.period must be positive, got 0\.0$"):
        require_positive_fields(_Config(period=0.0), ("speed", "period"))
    with pytest.raises(ValueError, match=r"^_Config\.speed must be positive"):
        require_positive_fields(_Config(speed=math.nan, period=-1.0), ("speed", "period"))
