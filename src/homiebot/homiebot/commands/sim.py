"""`homiebot sim`: look at simulator scenes (a thin wrapper over habitat_bridge.tools).

    homiebot sim render (--scene SPEC | --task ID | --seed N) --out DIR [--third-person]
        writes front.png left.png back.png right.png (256x256 head views of the robot's start pose)
    homiebot sim view (--scene SPEC | --task ID | --seed N) [--out map.png] [--no-labels]
        writes a top-down map of the scene with object labels
"""

from __future__ import annotations

import argparse

HELP = "render a scene's four head-camera views or draw its top-down map"


def _scene_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--scene", default="", metavar="SPEC",
                        help="scene file: habitat_bridge scene spec (JSON/YAML) or an official EMMOE scene.json")
    parser.add_argument("--task", type=int, default=None, metavar="ID",
                        help="EMMOE task id: the apartment seeded by the id with the objects its instruction names")
    parser.add_argument("--seed", type=int, default=None, help="apartment seed (without --scene/--task: seed 0)")
    parser.add_argument("--tasks-file", default="", metavar="TSV",
                        help="EMMOE task list (id<TAB>instruction); default: $HOMIEBOT_DATA/emmoe100_tasks.tsv or "
                             "the shared data folder")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Sub-commands `render` and `view`."""
    actions = parser.add_subparsers(dest="sim_command", metavar="ACTION", required=True)
    render = actions.add_parser("render", help="write front/left/back/right.png of a scene",
                                description="Render the four 256x256 head-camera views of the robot's start pose.")
    _scene_options(render)
    render.add_argument("--out", required=True, metavar="DIR", help="output directory")
    render.add_argument("--third-person", action="store_true",
                        help="also write third_front/left/back/right.png looking at the robot")
    render.add_argument("--size", type=int, default=256, help="image width and height in pixels (default 256)")
    view = actions.add_parser("view", help="draw a top-down map of a scene with object labels",
                              description="Draw a top-down map of a scene: rooms, walls, furniture, labelled "
                                          "objects and the robot's start pose.")
    _scene_options(view)
    view.add_argument("--out", default="topdown.png", metavar="PNG", help="output image (default topdown.png)")
    view.add_argument("--no-labels", action="store_true", help="draw without names")


def run(args: argparse.Namespace) -> int:
    """Run `sim render` or `sim view`."""
    from habitat_bridge import tools

    from homiebot.cli import UsageError

    if args.sim_command == "render" and not 16 <= args.size <= 1024:
        raise UsageError(f"--size must be within 16..1024, got {args.size}")
    choice = tools.SceneChoice(scene_path=args.scene, task_id=args.task, seed=args.seed, tasks_file=args.tasks_file)
    try:
        scene = tools.choose_scene(choice)
        if args.sim_command == "render":
            for path in tools.render_views(scene, args.out, third_person=args.third_person, size=args.size):
                print(path)
        else:
            print(tools.draw_map(scene, args.out, labels=not args.no_labels))
    except tools.ToolError as error:
        raise UsageError(str(error)) from None
    return 0
