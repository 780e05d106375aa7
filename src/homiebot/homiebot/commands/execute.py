"""`homiebot execute`: run subtasks on the simulated robot (homiebot_executor.execute_command)."""

from homiebot_executor.execute_command import HELP, add_arguments, run  # noqa: F401
