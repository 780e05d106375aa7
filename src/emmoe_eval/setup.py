"""Build script of the emmoe_eval ament_python package."""

from setuptools import find_packages, setup

PACKAGE = "emmoe_eval"

setup(
    name=PACKAGE,
    version="0.1.0",
    packages=find_packages(exclude=["test"]),
    package_data={PACKAGE: ["data/*.json"]},
    data_files=[
        ("share/ament_index/resource_index/packages", [f"resource/{PACKAGE}"]),
        (f"share/{PACKAGE}", ["package.xml"]),
    ],
    install_requires=["setuptools"],
    zip_safe=True,
    maintainer="HomieBot developers",
    maintainer_email="maintainers@homiebot.dev",
    description="EMMOE evaluation: dataset and run I/O, the EMMOE metrics, reports, rosbag replay scoring and the evaluator node.",
    license="Apache-2.0",
    entry_points={
        "console_scripts": [
            "emmoe-eval = emmoe_eval.cli:main",
            "evaluator_node = emmoe_eval.evaluator_node:main",
        ],
    },
)
