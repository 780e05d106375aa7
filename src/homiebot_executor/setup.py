"""Build script of the homiebot_executor ament_python package."""

from setuptools import find_packages, setup

PACKAGE = "homiebot_executor"

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
    description="HomieBot low-level execution: name mapping, error detection, skill policies, the /subtask executor and skill action servers.",
    license="Apache-2.0",
    entry_points={
        "console_scripts": [
            "executor_node = homiebot_executor.executor_node:main",
            "monitor_node = homiebot_executor.monitor_node:main",
            "reference_policy_server = homiebot_executor.remote.server:main",
        ],
    },
)
