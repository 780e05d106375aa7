"""The benchmark's checks before execution (F1, F2, L1-L4, D1, D2), in order, with the exact feedback strings.

`check_subtask` runs on a `SceneSnapshot` and returns the first failing check (or a pass with the resolved target).
Order (spec, section 3): F1 action or model not in the lists; F2 target unknown (alias table or scene); L1 hand full
for Pick/Open/Close; L2 hand empty for Put; L3 Put into a closed container; L4 Open/Close of something that is not
articulated; D1 target farther than 2 m; D2 target closer than 0.1 m (D1 and D2 skip Go to). The released code ran
the logical checks before the name lookup (F1, L1-L4, F2, D1, D2); `CheckConfig(order="release")` reproduces that.

By default F1 checks only the action and the feedback strings are the release's, byte for byte (its executor
lower-cases the whole subtask first: `[Open, Brown_Table]` -> `Can not open brown_table! ...`); the model check and
the strings as written are settings (`check_model`, `feedback_style="verbatim"`). An unchecked model that is not in
the list is routed as the model the system prompt assigns to the action (`SubtaskText.routed_model`).

The target checked is the last argument as written: the place of a Put (`[Put, apple, fridge]` checks "fridge"),
the target otherwise, as the release does. L1 and L2 read the simulator's hand by default; `hand_source="inventory"`
reads the inventory the planner was told instead, as the release does (its executor tests the inventory string).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from emmoe_core.protocol import ACTIONS, FEEDBACK_STYLES, MODELS, SubtaskText, feedback_for
from emmoe_core.robot.scene import SceneSnapshot

from emmoe_core.robot.naming import (
    ENCLOSED_CANONICALS,
    FAR_THRESHOLD_M,
    NEAR_THRESHOLD_M,
    NameResolver,
    ResolvedTarget,
)

SPEC_ORDER: tuple[str, ...] = ("F1", "F2", "L1", "L2", "L3", "L4", "D1", "D2")
RELEASE_ORDER: tuple[str, ...] = ("F1", "L1", "L2", "L3", "L4", "F2", "D1", "D2")
# Actions the hand must be empty for (L1) and full for (L2).
NEEDS_EMPTY_HAND = ("pick", "open", "close")
NEEDS_HELD_OBJECT = ("put",)
# Where L1 and L2 read whether something is held.
HAND_SOURCES: tuple[str, ...] = ("simulator", "inventory")


@dataclass(frozen=True)
class CheckConfig:
    """Settings of the checks.

    Attributes:
        far_threshold: D1 fires above this planar distance (metres; 2 in the benchmark).
        near_threshold: D2 fires below this planar distance (metres; 0.1 in the benchmark).
        order: "spec" (the paper's table order) or "release" (the released code's order).
        enclosed_canonicals: canonical entries whose door must be open to put something in (L3).
        feedback_style: "release" (the release's strings: the subtask lower-cased) or "verbatim" (names as written,
            F1 with the action as written).
        check_model: F1 also fails for a model outside the model list (the release checks only the action).
        hand_source: what L1 and L2 read: "simulator" (the gripper) or "inventory" (the planner's inventory, as the
            release).
    """

    far_threshold: float = FAR_THRESHOLD_M
    near_threshold: float = NEAR_THRESHOLD_M
    order: str = "spec"
    enclosed_canonicals: tuple[str, ...] = ENCLOSED_CANONICALS
    feedback_style: str = "release"
    check_model: bool = False
    hand_source: str = "simulator"

    def __post_init__(self) -> None:
        if not 0 <= self.near_threshold < self.far_threshold:
            raise ValueError(f"CheckConfig: need 0 <= near_threshold < far_threshold, got {self.near_threshold} "
                             f"and {self.far_threshold}")
        if self.order not in ("spec", "release"):
            raise ValueError(f"CheckConfig.order: expected 'spec' or 'release', got {self.order!r}")
        if self.feedback_style not in FEEDBACK_STYLES:
            raise ValueError(f"CheckConfig.feedback_style: expected one of {', '.join(FEEDBACK_STYLES)}, got "
                             f"{self.feedback_style!r}")
        if self.hand_source not in HAND_SOURCES:
            raise ValueError(f"CheckConfig.hand_source: expected one of {', '.join(HAND_SOURCES)}, got "
                             f"{self.hand_source!r}")

    @property
    def sequence(self) -> tuple[str, ...]:
        """The check codes in the order they run."""
        return SPEC_ORDER if self.order == "spec" else RELEASE_ORDER


@dataclass(frozen=True)
class CheckOutcome:
    """Result of the checks.

    Attributes:
        error_type: "" when every check passed, else "F1".."D2".
        feedback: the exact feedback string ("" when passed).
        detail: human-readable explanation for logs.
        target: the resolved target (None when unresolved, or for End).
    """

    error_type: str = ""
    feedback: str = ""
    detail: str = ""
    target: ResolvedTarget | None = None

    @property
    def passed(self) -> bool:
        """Whether every check passed."""
        return not self.error_type


@dataclass
class _Context:
    request: SubtaskText
    snapshot: SceneSnapshot
    resolver: NameResolver
    config: CheckConfig
    inventory: tuple[str, ...] = ()
    resolved: ResolvedTarget | None = None
    looked_up: bool = False
    detail: str = field(default="")

    def holding(self) -> str:
        """What L1/L2 see in the hand ("" empty): the gripper's object, or the inventory's names."""
        if self.config.hand_source == "inventory":
            return ", ".join(held_names(self.inventory))
        return "" if self.snapshot.hand_empty else self.snapshot.held_object

    def target(self) -> ResolvedTarget | None:
        if not self.looked_up:
            self.resolved = self.resolver.resolve(self.request.checked_target, self.snapshot, self.request.verb)
            self.looked_up = True
        return self.resolved


def _f1(ctx: _Context) -> bool:
    if ctx.request.canonical_action is None:
        ctx.detail = f"action {ctx.request.action!r} is not one of {', '.join(ACTIONS)}"
        return True
    if ctx.config.check_model and ctx.request.canonical_model is None:
        ctx.detail = f"model {ctx.request.model!r} is not one of {', '.join(MODELS)}"
        return True
    return False


def _f2(ctx: _Context) -> bool:
    name = ctx.request.checked_target
    if not name:
        ctx.detail = f"{ctx.request.action} needs a target"
        return True
    if ctx.target() is None:
        known = "the alias table knows it but nothing in the scene matches" if ctx.resolver.knows(name) \
            else "the alias table does not know it and no instance has that name"
        ctx.detail = f"{name!r}: {known}"
        return True
    return False


def held_names(inventory: Sequence[str]) -> list[str]:
    """The inventory's entries that name something held (blank entries and the release's "None" do not)."""
    return [name for name in inventory if name.strip() and name.strip().lower() != "none"]


def _l1(ctx: _Context) -> bool:
    held = ctx.holding()
    if ctx.request.verb in NEEDS_EMPTY_HAND and held:
        ctx.detail = f"the {'inventory' if ctx.config.hand_source == 'inventory' else 'gripper'} holds {held}"
        return True
    return False


def _l2(ctx: _Context) -> bool:
    if ctx.request.verb in NEEDS_HELD_OBJECT and not ctx.holding():
        ctx.detail = f"the {'inventory' if ctx.config.hand_source == 'inventory' else 'gripper'} is empty"
        return True
    return False


def _l3(ctx: _Context) -> bool:
    if ctx.request.verb != "put":
        return False
    target = ctx.target()
    if target is None or not target.put_needs_opening(ctx.config.enclosed_canonicals):
        return False
    part = target.container
    assert part is not None
    ctx.detail = f"{part.name} is at {part.position:.3f} (open from {part.open_threshold:g})"
    return True


def _l4(ctx: _Context) -> bool:
    if ctx.request.verb not in ("open", "close"):
        return False
    target = ctx.target()
    if target is not None and target.container is None:
        ctx.detail = f"{target.instance.name} has no door or drawer"
        return True
    return False


def _distance_check(ctx: _Context, far: bool) -> bool:
    if ctx.request.verb in ("go to", "end"):
        return False
    target = ctx.target()
    if target is None:
        return False
    distance = target.distance
    if far and distance > ctx.config.far_threshold:
        ctx.detail = f"{target.name} is {distance:.2f} m away (limit {ctx.config.far_threshold:g} m)"
        return True
    if not far and distance < ctx.config.near_threshold:
        ctx.detail = f"{target.name} is {distance:.3f} m away (minimum {ctx.config.near_threshold:g} m)"
        return True
    return False


_CHECKS: dict[str, Callable[[_Context], bool]] = {
    "F1": _f1, "F2": _f2, "L1": _l1, "L2": _l2, "L3": _l3, "L4": _l4,
    "D1": lambda ctx: _distance_check(ctx, far=True), "D2": lambda ctx: _distance_check(ctx, far=False),
}


def check_subtask(request: SubtaskText, snapshot: SceneSnapshot, resolver: NameResolver | None = None,
                  config: CheckConfig | None = None, inventory: Sequence[str] = ()) -> CheckOutcome:
    """Run the checks in order and return the first failure, or a pass with the resolved target. `inventory` is
    what the planner was told it holds (read by L1/L2 under `hand_source="inventory"`).

    End passes without checks (its model may be empty or "None"); End always succeeds.
    """
    ctx = _Context(request, snapshot, resolver or NameResolver(), config or CheckConfig(), tuple(inventory))
    if request.verb == "end":
        return CheckOutcome()
    for code in ctx.config.sequence:
        if _CHECKS[code](ctx):
            return CheckOutcome(code, _feedback(code, request, ctx.config.feedback_style), ctx.detail, ctx.resolved)
    return CheckOutcome(target=ctx.target())


def _feedback(code: str, request: SubtaskText, style: str) -> str:
    name = request.checked_target
    if style == "release" and not name:  # the release's name is the last comma part: the action itself in `[Pick]`
        name = request.action
    return feedback_for(code, request.action, name, style)

