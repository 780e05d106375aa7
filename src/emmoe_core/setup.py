"""Build script of the emmoe_core ament_python package."""

from setuptools import find_packages, setup

PACKAGE = "emmoe_core"

setup(
    name=PACKAGE,
    version="0.1.0",
    packages=find_packages(exclude=["test"]),
    package_data={PACKAGE: ["data/*.txt", "data/*.tsv"]},
    data_files=[
        ("share/ament_index/resource_index/packages", [f"resource/{PACKAGE}"]),
        (f"share/{PACKAGE}", ["package.xml"]),
    ],
    install_requires=["setuptools"],
    zip_safe=True,
    maintainer="HomieBot developers",
    maintainer_email="maintainers@homiebot.dev",
    description="The shared core of HomieBot: the EMMOE protocol vocabulary, names and topics, the robot and privileged-scene interfaces with their value types, the conversions between messages and these types, and the ROS 2 helper layer (loopback guard, parameters, domains, action client).",
    license="Apache-2.0",
)
