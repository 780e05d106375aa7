"""The learned detector's network: a small U-Net that labels every pixel of a head view with a class.

Input: RGB-D at the camera's resolution (RGB scaled to [-0.5, 0.5], depth in metres / 5, clipped to [0, 1]).
Output: class logits at half the resolution (a 3x3 stride-2 stem, three more halvings to 1/16, and a decoder back up
to 1/2 with skip connections). Half resolution keeps the four views under the inference budget, and the stem sees
every pixel, so an object 3 px wide at 1/2 resolution is still found; masks are brought back to full resolution by
the detector. Built from `torch.nn` layers; weights load from a local safetensors file, never from a hub.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import torch
from torch import nn
from torch.nn import functional

DEPTH_SCALE = 5.0  # metres that map to 1.0


@dataclass(frozen=True)
class NetworkConfig:
    """Shape of the network and what it labels.

    Attributes:
        classes: class names, "background" first (the label set it was trained on).
        objects: the classes that are small objects (the rest are furniture).
        sizes: each object class's bounding box (x, y, z) in metres, in the order of `objects` (the catalog's
            dimensions, known when the network is trained; empty: unknown, no region is judged by its size).
        widths: channels at 1/2, 1/4, 1/8 and 1/16 resolution.
        decoder_width: channels of the last decoder stage (1/2 resolution).
    """

    classes: tuple[str, ...]
    objects: tuple[str, ...] = ()
    sizes: tuple[tuple[float, float, float], ...] = ()
    widths: tuple[int, int, int, int] = (16, 32, 64, 96)
    decoder_width: int = 24

    def __post_init__(self) -> None:
        if self.sizes and len(self.sizes) != len(self.objects):
            raise ValueError(f"NetworkConfig.sizes: expected one size per object class ({len(self.objects)}), "
                             f"got {len(self.sizes)}")


def _conv(inputs: int, outputs: int, stride: int = 1, kernel: int = 3) -> nn.Sequential:
    return nn.Sequential(nn.Conv2d(inputs, outputs, kernel, stride, kernel // 2), nn.ReLU(inplace=True))


class SegmentationNet(nn.Module):
    """The U-Net of the module docstring."""

    def __init__(self, config: NetworkConfig) -> None:
        super().__init__()
        self.config = config
        a, b, c, d = config.widths
        self.stem = _conv(4, a, 2)
        self.down2 = nn.Sequential(_conv(a, b, 2), _conv(b, b))
        self.down3 = nn.Sequential(_conv(b, c, 2), _conv(c, c))
        self.down4 = nn.Sequential(_conv(c, d, 2), _conv(d, d))
        self.up3 = nn.Sequential(_conv(d + c, c, kernel=1), _conv(c, c))
        self.up2 = nn.Sequential(_conv(c + b, b, kernel=1), _conv(b, b))
        self.up1 = _conv(b + a, config.decoder_width, kernel=1)
        self.head = nn.Conv2d(config.decoder_width, len(config.classes), 1)

    def forward(self, inputs: torch.Tensor) -> torch.Tensor:
        """(N, 4, H, W) normalised RGB-D -> (N, classes, H/2, W/2) logits (H and W multiples of 16)."""
        half = self.stem(inputs)
        quarter = self.down2(half)
        eighth = self.down3(quarter)
        sixteenth = self.down4(eighth)
        x = self.up3(torch.cat([_upsample(sixteenth, eighth), eighth], 1))
        x = self.up2(torch.cat([_upsample(x, quarter), quarter], 1))
        x = self.up1(torch.cat([_upsample(x, half), half], 1))
        logits: torch.Tensor = self.head(x)
        return logits


def _upsample(features: torch.Tensor, like: torch.Tensor) -> torch.Tensor:
    return functional.interpolate(features, size=like.shape[-2:], mode="nearest")


def network_input(rgb: np.ndarray, depth: np.ndarray) -> torch.Tensor:
    """(N, H, W, 3) uint8 RGB and (N, H, W) depth in metres (NaN or inf: unknown, read as 0) -> (N, 4, H, W)."""
    colour = torch.from_numpy(np.ascontiguousarray(rgb)).permute(0, 3, 1, 2).float() / 255.0 - 0.5
    metres = np.nan_to_num(np.asarray(depth, dtype=np.float32), nan=0.0, posinf=0.0, neginf=0.0)
    scaled = torch.from_numpy(np.clip(metres / DEPTH_SCALE, 0.0, 1.0)).unsqueeze(1)
    return torch.cat([colour, scaled], 1)


def save_network(network: SegmentationNet, folder: Path, card: dict[str, object] | None = None) -> None:
    """Write `<folder>/model.safetensors` (float16) and `<folder>/config.json` (the shape, the class names, `card`)."""
    from safetensors.torch import save_file

    folder.mkdir(parents=True, exist_ok=True)
    state = {name: tensor.detach().to(torch.float16).contiguous() for name, tensor in network.state_dict().items()}
    save_file(state, str(folder / "model.safetensors"))
    (folder / "config.json").write_text(json.dumps({**asdict(network.config), "card": card or {}}, indent=2) + "\n")


class NetworkLoadError(RuntimeError):
    """The detector's weights folder is missing, incomplete or does not match its config."""


def load_network(folder: Path) -> SegmentationNet:
    """The network saved in `folder` by save_network, in float32 and eval mode.

    Raises:
        NetworkLoadError: a missing file or weights of another shape.
    """
    from safetensors.torch import load_file

    config_path, weights_path = folder / "config.json", folder / "model.safetensors"
    if not (config_path.is_file() and weights_path.is_file()):
        raise NetworkLoadError(f"no learned detector in {folder}: config.json and model.safetensors are needed "
                               "(train one with `homiebot detector train`)")
    fields = json.loads(config_path.read_text())
    config = NetworkConfig(tuple(fields["classes"]), tuple(fields.get("objects", ())),
                           tuple((float(x), float(y), float(z)) for x, y, z in fields.get("sizes", ())),
                           tuple(fields["widths"]), int(fields["decoder_width"]))
    network = SegmentationNet(config)
    try:
        network.load_state_dict({name: tensor.float() for name, tensor in load_file(str(weights_path)).items()})
    except RuntimeError as error:
        raise NetworkLoadError(f"the weights in {weights_path} do not fit {config_path}: {error}") from None
    return network.eval()
