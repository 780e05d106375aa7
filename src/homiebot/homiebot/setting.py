"""The benchmark setting, one switch for the whole stack: `background` or `no_background`.

- background (the default, the release's setting): every skill server runs the privileged M3 skills, which read
  the simulator's object and container states; the executor's `routing` parameter stays as configured.
- no_background: the skills see the robot's sensors only (habitat_bridge.sensor_only). The nomad, pixnav, rt1x and
  octo servers run the sensor-only skills, M3 refuses every goal, and the executor routes each skill to the server
  of the model the planner chose (routing "model"). Object finding uses the simulator's instance segmentation as a
  stand-in for an open-vocabulary detector.

`homiebot run|up --setting` and the launch argument `setting:=` turn it into node parameters (`setting_overrides`);
`--set NODE.PARAM=VALUE` items apply after them. `homiebot run` records it in `<out>/setting.json`, with the
experiment's conditions (homiebot.conditions: reliable or paper).
"""

from __future__ import annotations

import json
from pathlib import Path

SETTINGS: tuple[str, ...] = ("background", "no_background")
DEFAULT_SETTING = "background"
SETTING_FILE = "setting.json"
STACK_NODE = "sim_stack"
EXECUTOR_NODE = "homiebot_executor"


class SettingMismatch(ValueError):
    """An experiment folder holds runs of another setting."""


def check_setting(setting: str) -> str:
    """`setting` when it is one of SETTINGS.

    Raises:
        ValueError: any other value.
    """
    if setting not in SETTINGS:
        raise ValueError(f"setting: expected one of {', '.join(SETTINGS)}, got {setting!r}")
    return setting


def setting_overrides(setting: str) -> dict[str, dict[str, object]]:
    """Node parameters of a setting: sim_stack.setting, and homiebot_executor.routing=model for no_background.

    Raises:
        ValueError: an unknown setting.
    """
    overrides: dict[str, dict[str, object]] = {STACK_NODE: {"setting": check_setting(setting)}}
    if setting == "no_background":
        overrides[EXECUTOR_NODE] = {"routing": "model"}
    return overrides


def detector_of(setting: str) -> str:
    """How the skills of a setting find objects."""
    if check_setting(setting) == "background":
        return "none: the privileged M3 skills read the simulator's object states"
    from homiebot_executor.perception.detector import SegmentationDetector

    return SegmentationDetector.name


def describe(setting: str, conditions: str = "reliable") -> str:
    """One line for logs and result tables: the setting, how objects are found, and the conditions."""
    from homiebot.conditions import DESCRIPTIONS, check_conditions

    return (f"setting {setting} (object finding: {detector_of(setting)}); conditions {check_conditions(conditions)} "
            f"({DESCRIPTIONS[conditions]})")


def record_setting(out: Path, setting: str, conditions: str = "reliable") -> None:
    """Write `<out>/setting.json` (setting, detector, conditions), refusing a folder recorded in another setting or
    other conditions (runs without the file were all made in the background setting, the only one before the
    switch; a file without conditions was written before them, with reliable skills).

    Raises:
        SettingMismatch: the folder's runs were made in another setting or other conditions (scores of two never
            mix).
    """
    from homiebot.conditions import DEFAULT_CONDITIONS, DESCRIPTIONS, check_conditions

    check_conditions(conditions)
    path = out / SETTING_FILE
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
        recorded, recorded_conditions = record.get("setting"), record.get("conditions", DEFAULT_CONDITIONS)
    except (OSError, ValueError, AttributeError):
        recorded = DEFAULT_SETTING if any(out.glob("*/*/score.json")) else None
        recorded_conditions = DEFAULT_CONDITIONS if recorded else None
    if recorded not in (None, setting):
        raise SettingMismatch(f"{out} holds runs of setting {recorded}, not {setting}: use another --out folder")
    if recorded_conditions not in (None, conditions):
        raise SettingMismatch(f"{out} holds runs under conditions {recorded_conditions}, not {conditions}: use "
                              "another --out folder")
    out.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"setting": setting, "detector": detector_of(setting), "conditions": conditions,
                                "conditions_detail": DESCRIPTIONS[conditions]}, indent=2) + "\n", encoding="utf-8")
