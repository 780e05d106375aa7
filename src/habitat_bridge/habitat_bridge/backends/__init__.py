"""Simulator backends behind one interface (backends.base.SimBackend), chosen by name.

"mujoco" is the embedded default; "habitat" wraps habitat-lab when habitat_sim is installed; "auto" picks habitat
when habitat_sim imports and mujoco otherwise. Backend modules are imported lazily: importing this package does not
import mujoco or habitat.
"""

from __future__ import annotations

import importlib.util
from typing import Any

BACKENDS: tuple[str, ...] = ("auto", "mujoco", "habitat")


def habitat_available() -> bool:
    """Whether habitat_sim and habitat-lab can be imported here."""
    if importlib.util.find_spec("habitat_sim") is None or importlib.util.find_spec("habitat") is None:
        return False
    try:
        import habitat_sim  # noqa: F401
    except Exception:  # a broken install (missing libraries) counts as unavailable
        return False
    return True


def resolve_backend_name(name: str) -> str:
    """"auto" -> "habitat" or "mujoco"; other names are checked and returned.

    Raises:
        ValueError: an unknown backend name.
    """
    if name not in BACKENDS:
        raise ValueError(f"unknown simulator backend {name!r}; expected one of {', '.join(BACKENDS)}")
    if name == "auto":
        return "habitat" if habitat_available() else "mujoco"
    return name


def create_backend(name: str = "auto", **config: Any) -> Any:
    """A new backend; keyword arguments fill that backend's config dataclass.

    Raises:
        ValueError: unknown backend name or config field.
    """
    resolved = resolve_backend_name(name)
    if resolved == "habitat":
        from habitat_bridge.backends.habitat_backend import HabitatBackend, HabitatBackendConfig

        return HabitatBackend(HabitatBackendConfig(**config))
    from habitat_bridge.backends.mujoco_backend import MujocoBackend
    from habitat_bridge.backends.mujoco_config import MujocoBackendConfig

    return MujocoBackend(MujocoBackendConfig(**config))
