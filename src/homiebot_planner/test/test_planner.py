"""The planning loop with the mock backend: exact messages, re-sampling, giving up after 5 failures, observations."""

from __future__ import annotations

import numpy as np
import pytest

from homiebot_planner.backends import MockBackend, MockConfig
from homiebot_planner.planner import Observation, Planner, PlannerConfig
from homiebot_planner.prompts import REQUEST_LINES, in_context_example, system_prompt

TASK = "put the apple in the fridge"
GO = "Analysis: the fridge is ahead.\nSubtask: [Go to, fridge]\nModel: NoMaD"
OPEN = "Analysis: open it.\nSubtask: [Open, fridge]\nModel: octo"
END = "Analysis: done.\nSubtask: [End]\nModel: None"


def _views(seed: int = 0) -> dict[str, np.ndarray]:
    generator = np.random.default_rng(seed)
    return {view: generator.integers(0, 255, (8, 8, 3), dtype=np.uint8) for view in ("front", "left", "back", "right")}


def test_by_default_every_request_is_the_system_prompt_and_the_current_turn() -> None:
    backend = MockBackend([GO, OPEN])
    planner = Planner(backend, TASK)
    observation = Observation(images=_views())
    for success in (True, False):
        planner.record_result(planner.decide(observation), success, "None")
    planner.decide(observation)
    for request in backend.requests:
        assert [message.role for message in request.messages] == ["system", "user"]
    assert "(1) Go to, fridge(success) (2) Open, fridge(fail) " in backend.requests[2].messages[1].text
    example = Planner(backend, TASK, PlannerConfig(in_context_example=True)).messages(observation, "now")
    assert [(message.role, message.text) for message in example[1:]] == [
        ("user", in_context_example().user), ("assistant", in_context_example().assistant), ("user", "now")]


def test_messages_of_the_first_two_steps_are_exact() -> None:
    backend = MockBackend([GO, OPEN])
    planner = Planner(backend, TASK, PlannerConfig(history_window=3))
    observation = Observation(images=_views())
    first = planner.decide(observation)
    assert (first.round_number, first.subtask.action, first.subtask.target, first.model) == (1, "Go to", "fridge",
                                                                                             "NoMaD")
    planner.record_result(first, True, "None")
    second = planner.decide(observation)
    planner.record_result(second, False, "Unable to open, the target is far away")
    messages = backend.requests[1].messages
    assert [(message.role, message.text) for message in messages] == [
        ("system", system_prompt("images")),
        ("user", f"Task: {TASK}\nInventory: None\nHistorical Execution: None\nFeedback: None\n{REQUEST_LINES['live']}"),
        ("assistant", GO),
        ("user", f"Task: {TASK}\nInventory: None\nHistorical Execution: (1) Go to, fridge(success) \n"
                 f"Feedback: None\n{REQUEST_LINES['live']}"),
    ]
    assert [len(message.images) for message in messages] == [0, 0, 0, 4]
    third_user = planner.user_message(observation)
    assert third_user == (f"Task: {TASK}\nInventory: None\nHistorical Execution: (1) Go to, fridge(success) "
                          f"(2) Open, fridge(fail) \nFeedback: Unable to open, the target is far away\n"
                          f"{REQUEST_LINES['live']}")
    assert backend.requests[1].temperature == 0.2


def test_window_keeps_the_last_three_rounds_and_the_example_comes_first() -> None:
    backend = MockBackend([GO])
    planner = Planner(backend, TASK, PlannerConfig(in_context_example=True, request_variant="sft", history_window=3))
    for _ in range(5):
        decision = planner.decide(Observation())
        planner.record_result(decision, True, "None")
    messages = backend.requests[-1].messages
    example = in_context_example()
    assert [message.role for message in messages] == ["system", "user", "assistant"] + ["user", "assistant"] * 3 + [
        "user"]
    assert (messages[1].text, messages[2].text) == (example.user, example.assistant)
    assert "Historical Execution: (1) Go to, fridge(success) \n" in messages[3].text  # round 2 of 5
    assert messages[-1].text.endswith(REQUEST_LINES["sft"])


def test_images_in_documented_or_release_order() -> None:
    views = _views()
    for release, order in ((False, ("front", "left", "back", "right")), (True, ("left", "back", "right", "front"))):
        backend = MockBackend([GO])
        Planner(backend, TASK, PlannerConfig(release_image_order=release)).decide(Observation(images=views))
        sent = backend.requests[0].messages[-1].images
        assert all(image is views[view] for image, view in zip(sent, order, strict=True))


def test_gives_up_after_five_unparsable_samples() -> None:
    backend = MockBackend(["I think I should open the fridge."])
    planner = Planner(backend, TASK)
    decision = planner.decide(Observation())
    assert decision.gave_up and decision.samples == 5 and len(backend.requests) == 5
    # A give-up is not the agent's End (issue 11): no subtask, and the round is not logged, as in the release.
    assert not decision.is_end and decision.subtask.action == "" and decision.model == ""
    assert decision.raw_output == "I think I should open the fridge." and decision.round_number == 1
    assert planner.memory.rounds == []


def test_resamples_until_an_answer_parses() -> None:
    backend = MockBackend(["garbage", "Analysis: x\nSubtask: [Open, fridge]", OPEN])
    decision = Planner(backend, TASK).decide(Observation())
    assert decision.samples == 3 and not decision.gave_up and decision.subtask.action == "Open"


def test_invalid_answers_pass_unless_validity_is_required() -> None:
    fetch = "Analysis: x\nSubtask: [Fetch, apple]\nModel: RT-1-X"
    loose = Planner(MockBackend([fetch, OPEN]), TASK).decide(Observation())
    assert loose.subtask.action == "Fetch" and not loose.valid and loose.samples == 1
    strict = Planner(MockBackend([fetch, OPEN]), TASK, PlannerConfig(require_valid=True)).decide(Observation())
    assert strict.subtask.action == "Open" and strict.valid and strict.samples == 2


def test_text_mode_gets_display_names_and_constraints() -> None:
    backend = MockBackend(MockConfig(outputs=(GO,), observation_mode="text"))
    planner = Planner(backend, TASK)
    observation = Observation(visible={"front": ["frl_apartment_refrigerator", "013_apple"],
                                       "back": ["frl_apartment_sofa", "024_bowl"]})
    planner.memory.inventory.append("banana")
    planner.decide(observation)
    request = backend.requests[0]
    assert request.messages[0].text == system_prompt("text")
    assert request.messages[-1].text.startswith(
        "Visible objects:\nfront: fridge, apple\nleft: None\nback: sofa, bowl\nright: None\nTask: ")
    assert request.messages[-1].images == ()
    assert request.constraints.names == ("fridge", "apple", "sofa", "bowl")
    assert request.constraints.receptacles == ("fridge", "sofa") and request.constraints.containers == ("bowl",)
    assert request.constraints.held == ("banana",)
    assert request.constraints.object_rules and request.constraints.repeated == ()


def test_the_vocabulary_lets_constrained_decoding_name_what_is_out_of_sight() -> None:
    observation = Observation(visible={"front": ["frl_apartment_sofa", "013_apple"]})
    visible_only = Planner(MockBackend(MockConfig(outputs=(GO,), observation_mode="text")), TASK)
    assert visible_only.constraints(observation).names == ("sofa", "apple")
    planner = Planner(MockBackend(MockConfig(outputs=(GO,), observation_mode="text")), TASK,
                      PlannerConfig(target_names="vocabulary"))
    constraints = planner.constraints(observation)
    assert constraints.names[:2] == ("sofa", "apple")  # what is in view comes first
    # A place out of sight, an alias of a table and a room, as the expert's plans name them; no spelling with a space.
    assert {"fridge", "refrigerator", "brown_table", "living_room"} <= set(constraints.names)
    assert not [name for name in constraints.names if " " in name]
    assert "brown_table" in constraints.receptacles and "banana" not in constraints.receptacles
    assert "banana" in constraints.names and "bowl" in constraints.containers
    with pytest.raises(ValueError, match="target_names"):
        PlannerConfig(target_names="everything")


def test_text_mode_says_where_small_objects_rest_unless_turned_off() -> None:
    observation = Observation(visible={"front": ["013_apple", "frl_apartment_sofa", "013_apple"]},
                              locations={"front": ["on frl_apartment_sofa", "", "in frl_apartment_refrigerator"]})
    with_locations = Planner(MockBackend(MockConfig(outputs=(GO,), observation_mode="text")), TASK)
    assert with_locations.user_message(observation).startswith(
        "Visible objects:\nfront: apple (on sofa), sofa, apple (in fridge)\nleft: None\n")
    assert with_locations.constraints(observation).names == ("apple", "sofa")
    plain = Planner(MockBackend(MockConfig(outputs=(GO,), observation_mode="text")), TASK,
                    PlannerConfig(object_locations=False))
    assert plain.user_message(observation).startswith("Visible objects:\nfront: apple, sofa\nleft: None\n")


@pytest.mark.parametrize(("success", "feedback", "repeated"), [
    (True, None, ("Go to, fridge",)),
    (False, "Unable to go to, the target is far away", ("Go to, fridge",)),
    (False, "Unable to go to, the subtask is too difficult to perform", ()),  # E1: a retry may succeed
])
def test_the_previous_subtask_is_offered_again_only_after_an_execution_failure(success: bool, feedback: str | None,
                                                                               repeated: tuple[str, ...]) -> None:
    backend = MockBackend(MockConfig(outputs=(GO,), observation_mode="text"))
    planner = Planner(backend, TASK)
    decision = planner.decide(Observation(visible={"front": ["frl_apartment_refrigerator"]}))
    planner.record_result(decision, success, feedback, [])
    planner.decide(Observation(visible={"front": ["frl_apartment_refrigerator"]}))
    assert backend.requests[-1].constraints.repeated == repeated
    off = Planner(MockBackend(MockConfig(outputs=(GO,), observation_mode="text")), TASK, PlannerConfig(no_repeat=False))
    off.record_result(off.decide(Observation()), True, None, [])
    assert off.constraints(Observation()).repeated == ()


def test_subtasks_refused_without_running_stay_forbidden_until_a_skill_runs() -> None:
    far = "Unable to pick, the target is far away"  # D1: refused by the monitor, nothing moved
    answers = [f"Analysis:\nSubtask: [{subtask}]\nModel: {model}" for subtask, model in (
        ("Go to, fridge", "NoMaD"), ("Pick, sponge", "RT-1-X"), ("Pick, bowl", "RT-1-X"),
        ("Go to, sink", "NoMaD"), ("Pick, bowl", "RT-1-X"), ("Pick, sponge", "RT-1-X"), ("Pick, cup", "RT-1-X"))]
    planner = Planner(MockBackend(MockConfig(outputs=tuple(answers), observation_mode="text")), TASK)
    outcomes = [(True, None), (False, far), (False, far), (True, None), (False, far),
                (False, "Unable to pick, the subtask is too difficult to perform"), (False, far)]
    forbidden = []
    for success, feedback in outcomes:
        planner.record_result(planner.decide(Observation()), success, feedback, [])
        forbidden.append(planner.constraints(Observation()).repeated)
    assert forbidden == [("Go to, fridge",), ("Pick, sponge",), ("Pick, bowl", "Pick, sponge"), ("Go to, sink",),
                         ("Pick, bowl",), (), ("Pick, cup",)]  # a Go to or a skill that ran (E1) clears the list


def test_a_far_target_is_walked_up_to_and_end_waits_for_an_empty_hand_and_no_failed_step() -> None:
    answers = [f"Analysis:\nSubtask: [{subtask}]\nModel: {model}" for subtask, model in (
        ("Pick, sponge", "RT-1-X"), ("Go to, sponge", "PixNav"), ("Pick, sponge", "RT-1-X"), ("Pick, sponge", "RT-1-X"),
        ("Put, sponge, sink", "RT-1-X"), ("Put, sponge, sink", "RT-1-X"))]
    outcomes = [(False, "Unable to pick, the target is far away", []), (True, None, []),
                (False, "Unable to pick, the subtask is too difficult to perform", []), (True, None, ["sponge"]),
                (False, "Unable to put, the target is far away", ["sponge"]), (True, None, [])]
    not_end = ("Go to", "Pick", "Put", "Open", "Close")
    for config, expected in ((PlannerConfig(), [("Go to, sponge",), (), not_end, not_end, ("Go to, sink",), ()]),
                             (PlannerConfig(walk_up=False, end_when_done_trying=False), [()] * 6)):
        planner = Planner(MockBackend(MockConfig(outputs=tuple(answers), observation_mode="text")), TASK, config)
        offered = []
        for success, feedback, inventory in outcomes:
            planner.record_result(planner.decide(Observation()), success, feedback, inventory)
            offered.append(planner.constraints(Observation()).offered)
        assert offered == expected


def test_config_validation() -> None:
    for field, value, message in (("max_samples", 0, "max_samples"), ("history_window", -1, "history_window"),
                                  ("request_variant", "chat", "request_variant"), ("temperature", 3.0, "temperature"),
                                  ("max_new_tokens", 2, "max_new_tokens")):
        with pytest.raises(ValueError, match=message):
            PlannerConfig(**{field: value})
