"""Build script of the homiebot ament_python package."""

from glob import glob

from setuptools import find_packages, setup

PACKAGE = "homiebot"

setup(
    name=PACKAGE,
    version="0.1.0",
    packages=find_packages(exclude=["test"]),
    data_files=[
        ("share/ament_index/resource_index/packages", [f"resource/{PACKAGE}"]),
        (f"share/{PACKAGE}", ["package.xml"]),
        # Launch files live in the repository's top-level launch/ folder; ros2 launch finds them here.
        (f"share/{PACKAGE}/launch", glob("../../launch/*.launch.py")),
        (f"share/{PACKAGE}/config", glob("config/*.yaml") + glob("config/*.xml")),
    ],
    install_requires=["setuptools"],
    zip_safe=True,
    maintainer="HomieBot developers",
    maintainer_email="maintainers@homiebot.dev",
    description="HomieBot bringup: launch files, parameter files, the composed simulation stack and the homiebot command-line tool (doctor, run, up, send-subtask, execute, data, train).",
    license="Apache-2.0",
    entry_points={
        "console_scripts": [
            "homiebot = homiebot.cli:main",
            "sim_stack = homiebot.sim_stack:main",
        ],
    },
)
