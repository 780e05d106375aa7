"""The task fuzzer's generation and report (homiebot.task_fuzz), without MuJoCo."""

from __future__ import annotations

import pytest
from emmoe_core.robot.layout import PUT_HEADROOM
from habitat_bridge import catalog

from homiebot.benchmark_tasks import expert_reaches_the_goal, scene_for
from homiebot.expert_check import misplaced_objects
from homiebot.task_fuzz import (
    KINDS,
    StepKey,
    StepOutcome,
    TaskOutcome,
    cause_of,
    combinations,
    destinations,
    generate,
    generate_task,
    start_places,
    summarize,
    summary_lines,
)


def test_one_seed_generates_the_same_tasks_and_another_seed_others():
    first, again, other = generate(12, 5), generate(12, 5), generate(12, 6)
    assert [task.mapping for task in first] == [task.mapping for task in again]
    assert [task.mapping for task in first] != [task.mapping for task in other]
    assert generate_task(5, 9).mapping == first[9].mapping  # an index reproduces its task alone


def test_the_combinations_are_every_kind_in_every_place_it_fits():
    combos = combinations()
    assert all(place.fits(canonical) for canonical, place in combos)
    pairs = {(canonical, place.receptacle, place.region) for canonical, place in combos}
    assert ("013_apple", "fridge", "shelf_0") in pairs and ("026_sponge", "kitchen_counter", "drawer_2") in pairs
    # A cleanser (0.25 m) goes into a kitchen drawer only as a deep pot drawer (0.29 m; the shallow ones take 0.13 m).
    drawer = next(place for _, place in combos if place.region == "drawer_0")
    assert ("021_bleach_cleanser", "kitchen_counter", "drawer_0") in pairs
    assert drawer.needs_deep("021_bleach_cleanser") and not drawer.needs_deep("026_sponge")
    # ... and the mustard bottle, which the alias table cannot name, is left out.
    assert not any(canonical == "006_mustard_bottle" for canonical, _ in combos)
    assert {place.name for place in destinations(start_places())} >= {"fridge", "drawer", "chair", "brown_table"}


def test_a_large_draw_covers_every_combination_and_kind():
    tasks = generate(len(combinations()), 2)
    firsts = {(item["canonical"], item["receptacle"], item["region"]) for task in tasks
              for item in task.mapping["objects"][:1]}
    assert len(firsts) == len(combinations())
    assert {task.kind for task in tasks} == set(KINDS)


@pytest.mark.parametrize("index", range(30))
def test_every_task_is_a_valid_definition_whose_expert_completes_it(index):
    task = generate_task(3, index)
    definition = task.definition
    assert expert_reaches_the_goal(definition) and len(task.keys) == len(definition.expert)
    actions = [step.subtask.action for step in definition.expert]
    assert actions[-1] == "End" and actions.count("Pick") == actions.count("Put")
    assert actions.count("Open") == actions.count("Close")
    if task.kind == "container":
        assert "Open" in actions and "Close" in actions
    if task.kind == "two_objects":
        assert actions.count("Pick") == 2
    for step, key in zip(definition.expert, task.keys):
        assert key.action == step.subtask.action
    heights = {item.canonical: catalog.OBJECT_KINDS[item.canonical].size[2] for item in definition.objects}
    if any(item.region.startswith("drawer") and heights[item.canonical] > 0.13 for item in definition.objects):
        assert definition.deep_drawers


def test_a_task_into_the_drawer_starts_with_every_kitchen_drawer_shut():
    """The destination "drawer" is any kitchen drawer: the plan opens one, so none may start open (an Open of one
    already open has nothing to pull)."""
    tasks = [task for task in generate(200, 1) if task.mapping["instruction"].endswith("in the drawer")]
    assert len(tasks) > 10
    for task in tasks:
        assert not [name for name in task.mapping["open"] if name.startswith("kitchen_drawer")], task.mapping


def test_a_can_put_into_the_drawer_gets_deep_drawers_for_the_puts_headroom():
    """Seed 1 task 1 puts a 0.10 m can into "the drawer": with the put's 0.03 m above it a 0.13 m drawer is too
    shallow, so the task asks for the deep pot drawers (and builds)."""
    task = generate_task(1, 1)
    can = catalog.OBJECT_KINDS["005_tomato_soup_can"].size[2]
    assert task.mapping["instruction"] == "put the tomato_soup_can in the drawer"
    assert can <= 0.13 < can + PUT_HEADROOM
    assert task.definition.deep_drawers and scene_for(task.definition)


@pytest.mark.parametrize("index", range(6))
def test_the_scene_holds_every_object_where_the_task_asks(index):
    task = generate_task(1, index)
    assert misplaced_objects(task.definition, scene_for(task.definition)) == []


def test_causes_come_from_the_skills_words_and_group_alike_failures():
    assert cause_of("E1", "3 attempts failed; last: grasp_failed: nothing within 0.08 m of the grasp point") \
        == "E1: grasp_failed: nothing within N m of the grasp point"
    assert cause_of("D1", "gelatin_box_0 is 2.55 m away (limit 2 m)") == "D1: gelatin_box is N m away (limit N m)"
    assert cause_of("", "") == "differs"


def test_the_report_counts_steps_reached_per_action_key_and_cause():
    pick = StepKey("Pick", "apple", "fridge", "shelf_0")
    go = StepKey("Go to", "apple", "fridge", "shelf_0")
    failed = StepOutcome(pick, False, "E1", "3 attempts failed; last: grasp_failed: nothing within 0.08 m")
    outcomes = [TaskOutcome(4, 1, "fetch", (StepOutcome(go, True), failed)),
                TaskOutcome(4, 0, "container", (StepOutcome(go, True), StepOutcome(pick, True))),
                TaskOutcome(4, 2, "fetch", (), "misplaced: apple wanted on fridge")]
    report = summarize(outcomes)
    assert report["tasks"] == 3 and report["as_designed"] == 1
    assert report["per_action"]["Pick"] == {"failed": 1, "total": 2, "rate": 0.5}
    assert report["per_step"]["Pick apple fridge/shelf_0"]["failed"] == 1
    cause = report["causes"]["E1: grasp_failed: nothing within N m"]
    assert [(case["seed"], case["index"]) for case in cause] == [(4, 1)]
    assert report["causes"]["setup misplaced: apple wanted on fridge"][0]["index"] == 2
    assert report["per_kind"]["fetch"] == {"failed": 2, "total": 2, "rate": 1.0}
    text = "\n".join(summary_lines(report))
    assert "1 of 3 fuzzed tasks as designed" in text and "Pick    50.0 % (1/2)" in text and "[4:1]" in text
