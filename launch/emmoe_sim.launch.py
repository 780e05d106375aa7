"""The HomieBot EMMOE stack in simulation: `ros2 launch homiebot emmoe_sim.launch.py [config:=FILE] [setting:=S]`.

Starts the simulator (MuJoCo bridge with the skill servers), the error-detection monitor, the
executor (/subtask), the evaluator and the planner (/emmoe/run_task), each with the parameters of
config/emmoe_sim.yaml. The node set is homiebot.bringup.EMMOE_SIM_NODES, which `homiebot up` starts
the same way on installs without `ros2 launch`. Only the planner's environment holds the API key variable.
`setting` (background or no_background, homiebot.setting) sets the nodes' parameters of the benchmark setting.
"""

import os
from typing import Any

from homiebot.bringup import EMMOE_SIM_NODES, config_path, dropped_variables, stack_environment
from homiebot.setting import DEFAULT_SETTING, SETTINGS, setting_overrides
from launch import LaunchDescription
from launch.actions import DeclareLaunchArgument, OpaqueFunction, SetEnvironmentVariable
from launch.substitutions import LaunchConfiguration
from launch_ros.actions import Node


def stack_nodes(context: Any) -> list[Node]:
    """One Node action per process of the stack, with the parameters of the chosen setting on top of the file."""
    overrides = setting_overrides(context.launch_configurations["setting"])
    config = LaunchConfiguration("config")
    nodes = []
    for spec in EMMOE_SIM_NODES:
        options: dict[str, object] = {"name": spec.name} if spec.single_node else {}
        dropped = dropped_variables(spec.name, {})
        if dropped:  # only the planner may see the API key
            options["env"] = {**{name: value for name, value in os.environ.items() if name not in dropped},
                              **stack_environment(None)}
        nodes.append(Node(package=spec.package, executable=spec.executable, output="screen", emulate_tty=True,
                          parameters=[config, dict(spec.parameters), overrides.get(spec.name, {})], **options))
    return nodes


def generate_launch_description() -> LaunchDescription:
    """The stack, all with loopback-only DDS discovery and sockets."""
    actions = [SetEnvironmentVariable(name, value) for name, value in stack_environment(None).items()]
    actions.append(DeclareLaunchArgument("config", default_value=str(config_path()),
                                         description="ROS parameter file of the stack"))
    actions.append(DeclareLaunchArgument("setting", default_value=DEFAULT_SETTING, choices=list(SETTINGS),
                                         description="benchmark setting: background or no_background"))
    actions.append(OpaqueFunction(function=stack_nodes))
    return LaunchDescription(actions)
