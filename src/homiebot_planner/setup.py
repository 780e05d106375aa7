"""Build script of the homiebot_planner ament_python package."""

from setuptools import find_packages, setup

PACKAGE = "homiebot_planner"

setup(
    name=PACKAGE,
    version="0.1.0",
    packages=find_packages(exclude=["test"]),
    data_files=[
        ("share/ament_index/resource_index/packages", [f"resource/{PACKAGE}"]),
        (f"share/{PACKAGE}", ["package.xml"]),
    ],
    install_requires=["setuptools"],
    zip_safe=True,
    maintainer="HomieBot developers",
    maintainer_email="maintainers@homiebot.dev",
    description="HomieBot high-level planner: EMMOE prompts, output parsing, memory, LMM backends and the planner node.",
    license="Apache-2.0",
    entry_points={
        "console_scripts": [
            "planner_node = homiebot_planner.planner_node:main",
        ],
    },
)
