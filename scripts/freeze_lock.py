"""Print a pip lock file for the running interpreter's environment.

`pip freeze` is not usable as is: the ROS 2 wheels also register their Python packages under
names that PyPI does not serve (rclpy, std_msgs, rosidl_*), as `.egg-info` folders. Those are
dropped here; everything else is pinned with its exact installed version.
"""

from __future__ import annotations

import importlib.metadata as metadata
import sys


def main() -> int:
    """Write `name==version` lines, sorted, for every installable distribution."""
    pins: dict[str, str] = {}
    for dist in metadata.distributions():
        location = str(getattr(dist, "_path", ""))
        if location.endswith(".egg-info"):
            continue
        name = dist.metadata["Name"]
        if name.lower() in ("pip", "wheel"):
            continue
        pins[name.lower()] = f"{name}=={dist.version}"
    sys.stdout.write("".join(pins[key] + "\n" for key in sorted(pins)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
