"""The benchmark setting, one switch for the whole stack: `background` or `no_background`.

- background (the default, the release's setting): every skill server runs the privileged M3 skills, which read
  the simulator's object and container states; the executor's `routing` parameter stays as configured.
- no_background: the skills see the robot's sensors only (habitat_bridge.sensor_only). The nomad, pixnav, rt1x and
  octo servers run the sensor-only skills, M3 refuses every goal, and the executor routes each skill to the server
  of the model the planner chose (routing "model").

How objects are found (the perception, `--perception`): `learned`, the default in no_background, is the detector
trained on the simulator's renders (emmoe_core.perception.learned), used by the skills and for the planner's
"Visible objects"; `segmentation`, the default in background, reads the simulator's instance segmentation (a
stand-in for an open-vocabulary detector).

`homiebot run|up --setting` and the launch argument `setting:=` turn it into node parameters (`setting_overrides`);
`--set NODE.PARAM=VALUE` items apply after them. `homiebot run` records it in `<out>/setting.json`, with the
experiment's conditions (homiebot.conditions: reliable or paper).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from emmoe_core.perception import PERCEPTIONS

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


def add_perception_argument(parser: argparse.ArgumentParser) -> None:
    """`--perception learned|segmentation` of the commands that start a stack (default: the setting's)."""
    parser.add_argument("--perception", choices=PERCEPTIONS, default=None,
                        help="how objects are found: learned (the detector trained on simulator renders, default "
                             "in no_background) or segmentation (the simulator's instance masks, default in "
                             "background); see homiebot.setting")


def perception_of(setting: str, perception: str | None = None) -> str:
    """`perception` checked, or the setting's default (learned in no_background, segmentation in background).

    Raises:
        ValueError: an unknown setting or perception.
    """
    if perception is None:
        return "learned" if check_setting(setting) == "no_background" else "segmentation"
    if perception not in PERCEPTIONS:
        raise ValueError(f"perception: expected one of {', '.join(PERCEPTIONS)}, got {perception!r}")
    return perception


def setting_overrides(setting: str, perception: str | None = None) -> dict[str, dict[str, object]]:
    """Node parameters of a setting: sim_stack.setting and sim_stack.perception, and homiebot_executor.routing=model
    for no_background.

    Raises:
        ValueError: an unknown setting or perception.
    """
    overrides: dict[str, dict[str, object]] = {STACK_NODE: {"setting": check_setting(setting),
                                                            "perception": perception_of(setting, perception)}}
    if setting == "no_background":
        overrides[EXECUTOR_NODE] = {"routing": "model"}
    return overrides


def detector_of(setting: str, perception: str | None = None) -> str:
    """How the skills of a setting find objects."""
    if check_setting(setting) == "background":
        return "none: the privileged M3 skills read the simulator's object states"
    from emmoe_core.perception.detector import SegmentationDetector
    from emmoe_core.perception.learned import LearnedDetector

    return (LearnedDetector if perception_of(setting, perception) == "learned" else SegmentationDetector).name


def describe(setting: str, conditions: str = "reliable", perception: str | None = None) -> str:
    """One line for logs and result tables: the setting, how objects are found, and the conditions."""
    from homiebot.conditions import DESCRIPTIONS, check_conditions

    return (f"setting {setting} (object finding: {detector_of(setting, perception)}); conditions "
            f"{check_conditions(conditions)} ({DESCRIPTIONS[conditions]})")


def record_setting(out: Path, setting: str, conditions: str = "reliable", perception: str | None = None) -> None:
    """Write `<out>/setting.json` (setting, perception, detector, conditions), refusing a folder recorded in another
    setting, perception or conditions (runs without the file were all made in the background setting, the only one
    before the switch; a file without conditions was written before them, with reliable skills; one without a
    perception before it, with the segmentation stand-in).

    Raises:
        SettingMismatch: the folder's runs were made in another setting, perception or conditions (scores of two
            never mix).
    """
    from homiebot.conditions import DEFAULT_CONDITIONS, DESCRIPTIONS, check_conditions

    check_conditions(conditions)
    perception = perception_of(setting, perception)
    path = out / SETTING_FILE
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
        recorded, recorded_conditions = record.get("setting"), record.get("conditions", DEFAULT_CONDITIONS)
        recorded_perception = record.get("perception", "segmentation")
    except (OSError, ValueError, AttributeError):
        recorded = DEFAULT_SETTING if any(out.glob("*/*/score.json")) else None
        recorded_conditions = DEFAULT_CONDITIONS if recorded else None
        recorded_perception = "segmentation" if recorded else None
    for what, before, now in (("setting", recorded, setting), ("conditions", recorded_conditions, conditions),
                              ("perception", recorded_perception, perception)):
        if before not in (None, now):
            raise SettingMismatch(f"{out} holds runs with {what} {before}, not {now}: use another --out folder")
    out.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"setting": setting, "perception": perception,
                                "detector": detector_of(setting, perception), "conditions": conditions,
                                "conditions_detail": DESCRIPTIONS[conditions]}, indent=2) + "\n", encoding="utf-8")
