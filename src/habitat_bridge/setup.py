"""Build script of the habitat_bridge ament_python package."""

from setuptools import find_packages, setup

PACKAGE = "habitat_bridge"

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
    description="Simulator bridge: scene specs, the embedded MuJoCo apartment with a Fetch robot, optional Habitat and real-Fetch backends, and the bridge node.",
    license="Apache-2.0",
    entry_points={
        "console_scripts": [
            "bridge_node = habitat_bridge.bridge_node:main",
            "fake_fetch_node = habitat_bridge.fetch.fake_fetch_node:main",
        ],
    },
)
