"""Options of the composed simulation stack (homiebot.sim_stack)."""

from __future__ import annotations

import pytest

from homiebot.sim_stack import parse_failures, parse_remotes


def test_stack_options():
    assert parse_failures("navigate=0.3, pick=0.5") == {"navigate": 0.3, "pick": 0.5}
    assert set(parse_failures("table4")) == {"navigate", "pick", "put", "open", "close"}
    assert parse_remotes(["rt1x=http://127.0.0.1:8000"]) == {"rt1x": "http://127.0.0.1:8000"}
    with pytest.raises(ValueError, match="--fail"):
        parse_failures("pick")
    with pytest.raises(ValueError, match="--remote"):
        parse_remotes(["m3=http://127.0.0.1:1"])
