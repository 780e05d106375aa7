"""Model routing (homiebot_executor.routing)."""

from __future__ import annotations

import pytest

from homiebot_executor.routing import RoutingConfig, route


def test_background_setting_routes_everything_to_m3():
    for model, skill in (("NoMaD", "navigate"), ("RT-1-X", "pick"), ("octo", "close"), ("PixNav", "put")):
        assert route(model, skill).server == "m3"
    assert route("RT-1-X", "pick").action_name == "/skills/m3/manipulate"
    assert route("NoMaD", "navigate").action_name == "/skills/m3/navigate"


def test_model_setting_routes_by_model_with_fallback():
    config = RoutingConfig(setting="model")
    assert route("NoMaD", "navigate", config=config).action_name == "/skills/nomad/navigate"
    assert route("pixnav", "navigate", config=config).server == "pixnav"
    assert route("RT-1-X", "put", config=config).action_name == "/skills/rt1x/manipulate"
    assert route("octo", "open", config=config).server == "octo"
    assert route("NoMaD", "pick", config=config).server == "rt1x"
    assert route("octo", "navigate", "object", config=config).server == "pixnav"
    strict = route("NoMaD", "pick", config=RoutingConfig(setting="model", mismatch="strict"))
    assert strict.server == "nomad" and not strict.can_run


def test_routing_rejects_unknown_models():
    with pytest.raises(ValueError, match="not in the model list"):
        route("GPT-4o", "pick")
    with pytest.raises(ValueError, match="RoutingConfig.setting"):
        RoutingConfig(setting="magic")
