"""Which skill server runs a subtask, from the planner's model choice.

Servers are `/skills/<name>` namespaces: `m3` (privileged, every skill), `nomad` and `pixnav` (navigation), `rt1x`
(pick, put) and `octo` (open, close). A name can carry one action type only, so each server offers
`/skills/<name>/navigate` (emmoe_interfaces/action/Navigate) and/or `/skills/<name>/manipulate`
(emmoe_interfaces/action/Manipulate).

Settings:
- "background" (the default, the benchmark's setting with background information, and what the release does):
  every skill runs on M3; the model choice is still validated (F1) but does not change the server.
- "model": the chosen model's server runs the skill. A model that cannot perform the action (NoMaD asked to pick)
  falls back to the model the system prompt assigns to the action (`mismatch="fallback"`), or the attempt fails as
  the model's own failure (`mismatch="strict"`).
"""

from __future__ import annotations

from dataclasses import dataclass

from emmoe_core.names import normalize
from emmoe_core.topics import skill_action

SERVER_OF_MODEL: dict[str, str] = {"NoMaD": "nomad", "PixNav": "pixnav", "RT-1-X": "rt1x", "octo": "octo"}
SERVERS: tuple[str, ...] = ("m3", "nomad", "pixnav", "rt1x", "octo")
# Skills each server can run.
SERVER_SKILLS: dict[str, tuple[str, ...]] = {
    "m3": ("navigate", "pick", "put", "open", "close"),
    "nomad": ("navigate",), "pixnav": ("navigate",), "rt1x": ("pick", "put"), "octo": ("open", "close"),
}
# Fallback server per skill and navigation goal kind (the system prompt's model descriptions).
DEFAULT_SERVER: dict[str, str] = {"navigate:place": "nomad", "navigate:object": "pixnav", "pick": "rt1x",
                                  "put": "rt1x", "open": "octo", "close": "octo"}


@dataclass(frozen=True)
class RoutingConfig:
    """How model choices map to skill servers.

    Attributes:
        setting: "background" (every skill on M3) or "model" (the chosen model's server).
        mismatch: "fallback" or "strict" (see the module docstring).
    """

    setting: str = "background"
    mismatch: str = "fallback"

    def __post_init__(self) -> None:
        if self.setting not in ("background", "model"):
            raise ValueError(f"RoutingConfig.setting: expected 'background' or 'model', got {self.setting!r}")
        if self.mismatch not in ("fallback", "strict"):
            raise ValueError(f"RoutingConfig.mismatch: expected 'fallback' or 'strict', got {self.mismatch!r}")


@dataclass(frozen=True)
class Route:
    """Where a skill goes.

    Attributes:
        server: server name ("m3", "nomad", ...).
        skill: the skill.
        can_run: False when a strict route sends a skill to a model that cannot do it.
    """

    server: str
    skill: str
    can_run: bool = True

    @property
    def action_name(self) -> str:
        """Name of the ROS action that serves it: `/skills/<server>/navigate` or `/skills/<server>/manipulate`."""
        return action_name(self.server, self.skill)


def action_name(server: str, skill: str) -> str:
    """`/skills/<server>/navigate` for navigation, `/skills/<server>/manipulate` for the arm skills."""
    return skill_action(server, "navigate" if skill == "navigate" else "manipulate")


def server_for_model(model: str) -> str | None:
    """Server of a model named as in the model list (case and `_` insensitive), or None."""
    key = normalize(model)
    return next((server for name, server in SERVER_OF_MODEL.items() if normalize(name) == key), None)


def route(model: str, skill: str, target_kind: str = "place", config: RoutingConfig | None = None) -> Route:
    """The server that runs `skill` for a subtask whose planner chose `model`.

    Raises:
        ValueError: the model is not in the model list (the F1 check rejects such subtasks first).
    """
    config = config or RoutingConfig()
    chosen = server_for_model(model)
    if chosen is None:
        raise ValueError(f"model {model!r} is not in the model list {', '.join(SERVER_OF_MODEL)}")
    if config.setting == "background":
        return Route("m3", skill)
    if skill in SERVER_SKILLS[chosen]:
        return Route(chosen, skill)
    if config.mismatch == "strict":
        return Route(chosen, skill, can_run=False)
    key = f"navigate:{target_kind}" if skill == "navigate" else skill
    return Route(DEFAULT_SERVER[key], skill)
