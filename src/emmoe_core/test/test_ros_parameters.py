"""emmoe_core.ros_parameters against real rclpy: ROS parameters declared from config dataclasses and read back."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import pytest

pytestmark = pytest.mark.ros


@dataclass(frozen=True)
class Inner:
    order: str = "spec"
    limit: float = 2.0

    def __post_init__(self) -> None:
        if self.order not in ("spec", "release"):
            raise ValueError(f"Inner.order: expected spec or release, got {self.order!r}")


@dataclass(frozen=True)
class Sample:
    inner: Inner = Inner(limit=3.0)
    name: str = "robot"
    count: int = 2
    rate: float = 50
    enabled: bool = True
    tags: list[str] = field(default_factory=list)
    views: tuple[str, ...] = ("front", "left")
    out_dir: Path = Path("runs")
    data_dir: Path | None = None


def _sample_with_tristate():
    from emmoe_core.ros_helpers import ROS_PARAMETER, ParameterSpec

    @dataclass(frozen=True)
    class TriState:
        example: str | bool = field(default="auto", metadata={ROS_PARAMETER: ParameterSpec(dynamic_typing=True)})
        renamed: int = field(default=1, metadata={ROS_PARAMETER: "other_name"})

    return TriState


def test_declare_config_defaults(ros_node_factory):
    from emmoe_core.ros_helpers import declare_config

    node = ros_node_factory("config_defaults")
    config = declare_config(node, Sample)
    assert config == Sample()
    assert config.inner == Inner(limit=3.0)  # a nested field's default instance, not the nested class's defaults
    assert node.get_parameter("limit").value == 3.0
    assert node.get_parameter("rate").value == 50.0  # a float field with an integer default is a double
    assert node.get_parameter("out_dir").value == "runs"
    assert node.get_parameter("data_dir").value == ""
    assert node.has_parameter("tags") and node.has_parameter("views")


def test_declare_config_reads_overrides(ros_node_factory):
    from rclpy.parameter import Parameter

    from emmoe_core.ros_helpers import declare_config

    node = ros_node_factory("config_values", parameter_overrides=[
        Parameter("order", value="release"), Parameter("count", value=7), Parameter("rate", value=2.5),
        Parameter("enabled", value=False), Parameter("tags", value=["a", "b"]), Parameter("views", value=["back"]),
        Parameter("out_dir", value="/tmp/x"), Parameter("data_dir", value="/data")])
    config = declare_config(node, Sample)
    assert config.inner == Inner(order="release", limit=3.0)
    assert (config.count, config.rate, config.enabled) == (7, 2.5, False)
    assert config.tags == ["a", "b"] and config.views == ("back",)
    assert config.out_dir == Path("/tmp/x") and config.data_dir == Path("/data")


def test_declare_config_names_defaults_and_exclusions(ros_node_factory):
    from rclpy.parameter import Parameter

    from emmoe_core.ros_helpers import declare_config

    node = ros_node_factory("config_mapping", parameter_overrides=[Parameter("check_order", value="release")])
    config = declare_config(node, Sample, overrides={"name": "fetch"},
                            parameters={"inner.order": "check_order", "tags": None})
    assert config.inner.order == "release" and config.name == "fetch"
    assert node.has_parameter("check_order") and not node.has_parameter("order")
    assert not node.has_parameter("tags")
    with pytest.raises(ValueError, match="no parameter named nothing"):
        declare_config(ros_node_factory("config_unknown"), Sample, overrides={"nothing": 1})


def test_declare_config_metadata_tristate_and_rename(ros_node_factory):
    from rclpy.parameter import Parameter

    from emmoe_core.ros_helpers import declare_config

    tri_state = _sample_with_tristate()
    node = ros_node_factory("config_meta", parameter_overrides=[Parameter("example", value=True),
                                                                 Parameter("other_name", value=4)])
    config = declare_config(node, tri_state)
    assert config.example is True and config.renamed == 4


def test_declare_config_bad_type_names_the_parameter(ros_node_factory):
    from rclpy.parameter import Parameter

    from emmoe_core.ros_helpers import declare_config

    node = ros_node_factory("config_bad_type", parameter_overrides=[Parameter("rate", value=50)])
    with pytest.raises(ValueError, match="parameter rate: expected a floating-point number"):
        declare_config(node, Sample)
    node = ros_node_factory("config_bad_count", parameter_overrides=[Parameter("count", value="two")])
    with pytest.raises(ValueError, match="parameter count: expected an integer"):
        declare_config(node, Sample)


def test_declare_config_runs_post_init(ros_node_factory):
    from rclpy.parameter import Parameter

    from emmoe_core.ros_helpers import declare_config

    node = ros_node_factory("config_invalid", parameter_overrides=[Parameter("order", value="random")])
    with pytest.raises(ValueError, match="Inner.order: expected spec or release"):
        declare_config(node, Sample)


def test_declare_config_requires_a_default(ros_node_factory):
    from emmoe_core.ros_helpers import declare_config

    @dataclass(frozen=True)
    class Required:
        out_dir: Path

    with pytest.raises(ValueError, match="parameter out_dir: Required has no default"):
        declare_config(ros_node_factory("config_required"), Required)
    assert declare_config(ros_node_factory("config_given"), Required, {"out_dir": "runs/x"}).out_dir == Path("runs/x")

