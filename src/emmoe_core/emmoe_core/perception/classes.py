"""The label set of the learned detector: class index <-> canonical name (index 0 is the background)."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class DetectorClasses:
    """Ordered class names; `index` maps a name to its position.

    Raises:
        ValueError: an empty set, a first class other than "background", or a repeated name.
    """

    names: tuple[str, ...]
    index: dict[str, int] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if not self.names or self.names[0] != "background":
            raise ValueError(f"the first detector class must be 'background', got {self.names[:1]}")
        if len(set(self.names)) != len(self.names):
            raise ValueError("detector class names repeat")
        object.__setattr__(self, "index", {name: position for position, name in enumerate(self.names)})

    def __len__(self) -> int:
        return len(self.names)
