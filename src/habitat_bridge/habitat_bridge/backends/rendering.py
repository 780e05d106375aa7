"""Offscreen multi-view rendering of a MuJoCo model: RGB, metric depth and geom segmentation.

All requested cameras are drawn side by side into one offscreen framebuffer after a single scene update and read back
with one call, which is what makes four 256x256 views cheap on a software rasteriser. Depth comes from the same pass
as RGB. Segmentation is a second pass with MuJoCo's segmentation colouring.

The GL context is made current only for the duration of a call, so calls may come from different threads (one at a
time; the caller serialises them).
"""

from __future__ import annotations

from dataclasses import dataclass

import mujoco
import numpy as np


class RenderingError(RuntimeError):
    """No headless OpenGL context could be created or used."""


@dataclass(frozen=True)
class ViewImages:
    """Images of one camera.

    Attributes:
        rgb: (H, W, 3) uint8.
        depth: (H, W) float32 metres along the optical axis, or None.
        segmentation: (H, W) int32 geom ids (-1 where no geom), or None.
    """

    rgb: np.ndarray
    depth: np.ndarray | None
    segmentation: np.ndarray | None


def _create_gl_context(width: int, height: int) -> object:
    from mujoco.rendering.classic import gl_context

    if gl_context.GLContext is None:
        raise RenderingError("MuJoCo has no headless OpenGL backend; set MUJOCO_GL=egl or MUJOCO_GL=osmesa")
    try:
        return gl_context.GLContext(width, height)
    except Exception as error:  # the EGL/OSMesa wrappers raise ImportError, RuntimeError or GLError
        raise RenderingError(f"cannot create a headless OpenGL context ({error}); with MUJOCO_GL=egl install "
                             "libegl1 libegl-mesa0 libgl1-mesa-dri, or run with MUJOCO_GL=osmesa "
                             "(libosmesa6)") from None


class MultiViewRenderer:
    """Renders several fixed cameras of one model per call.

    Args:
        model: the compiled model (its offscreen buffer must fit `max_views` views side by side).
        width: image width of each view.
        height: image height of each view.
        max_views: most views drawn in one call.
    """

    def __init__(self, model: mujoco.MjModel, width: int, height: int, max_views: int = 4) -> None:
        buffer_width, buffer_height = model.vis.global_.offwidth, model.vis.global_.offheight
        if width * max_views > buffer_width or height > buffer_height:
            raise RenderingError(f"{max_views} views of {width}x{height} do not fit the model's offscreen buffer "
                                 f"{buffer_width}x{buffer_height}")
        self._model = model
        self._width, self._height, self._max_views = width, height, max_views
        self._scene = mujoco.MjvScene(model, maxgeom=max(1000, 2 * model.ngeom))
        self._option = mujoco.MjvOption()
        self._camera = mujoco.MjvCamera()
        self._camera.type = mujoco.mjtCamera.mjCAMERA_FIXED
        self._gl = _create_gl_context(buffer_width, buffer_height)
        self._context: mujoco.MjrContext | None = None
        with self._gl.as_current():  # type: ignore[attr-defined]
            self._context = self._new_context(model)
        extent = model.stat.extent
        self._near = float(model.vis.map.znear * extent)
        self._far = float(model.vis.map.zfar * extent)

    def rebind(self, model: mujoco.MjModel) -> None:
        """Render another model from now on, keeping the GL context (no GL resources leak across scenes)."""
        if self._context is None:
            raise RenderingError("renderer is closed")
        buffer_width, buffer_height = model.vis.global_.offwidth, model.vis.global_.offheight
        if self._width * self._max_views > buffer_width or self._height > buffer_height:
            raise RenderingError(f"{self._max_views} views of {self._width}x{self._height} do not fit the model's "
                                 f"offscreen buffer {buffer_width}x{buffer_height}")
        with self._gl.as_current():  # type: ignore[attr-defined]
            self._context.free()
            self._context = None
            self._context = self._new_context(model)
        self._model = model
        self._scene = mujoco.MjvScene(model, maxgeom=max(1000, 2 * model.ngeom))
        self._near = float(model.vis.map.znear * model.stat.extent)
        self._far = float(model.vis.map.zfar * model.stat.extent)

    @staticmethod
    def _new_context(model: mujoco.MjModel) -> mujoco.MjrContext:
        context = mujoco.MjrContext(model, mujoco.mjtFontScale.mjFONTSCALE_100)
        mujoco.mjr_setBuffer(mujoco.mjtFramebuffer.mjFB_OFFSCREEN, context)
        context.readDepthMap = mujoco.mjtDepthMap.mjDEPTH_ZEROFAR
        return context

    def render(self, data: mujoco.MjData, cameras: list[int], *, depth: bool = False, segmentation: bool = False,
               hidden_groups: tuple[int, ...] = (), skybox: bool = True) -> list[ViewImages]:
        """Draw the given camera ids.

        Args:
            data: simulation state (mj_forward must have run since the last change).
            cameras: camera ids, at most max_views.
            depth: also return metric depth.
            segmentation: also return per-pixel geom ids.
            hidden_groups: geom groups not to draw (besides groups 4 and 5, which are never drawn).
            skybox: draw the skybox (pointless, and a full-screen fill, when walls and ceiling close the view).
        """
        if not 0 < len(cameras) <= self._max_views:
            raise ValueError(f"render between 1 and {self._max_views} cameras, got {len(cameras)}")
        if self._context is None:
            raise RenderingError("renderer is closed")
        for group in range(6):
            self._option.geomgroup[group] = 0 if group in hidden_groups or group >= 4 else 1
        self._scene.flags[mujoco.mjtRndFlag.mjRND_SKYBOX] = int(skybox)
        count, width, height = len(cameras), self._width, self._height
        full = mujoco.MjrRect(0, 0, width * count, height)
        depth_buffer = np.empty((height, width * count), dtype=np.float32) if depth else None
        with self._gl.as_current():  # type: ignore[attr-defined]
            self._camera.fixedcamid = cameras[0]
            mujoco.mjv_updateScene(self._model, data, self._option, None, self._camera, mujoco.mjtCatBit.mjCAT_ALL,
                                   self._scene)
            self._draw(data, cameras)
            rgb_out = np.empty((height, width * count, 3), dtype=np.uint8)
            mujoco.mjr_readPixels(rgb_out, depth_buffer, full, self._context)
            rgb_out = rgb_out[::-1]
            metric = self._metric_depth(depth_buffer[::-1]) if depth_buffer is not None else None
            geoms = self._segment(data, cameras, full) if segmentation else None
        views = []
        for index in range(count):
            columns = slice(index * width, (index + 1) * width)
            views.append(ViewImages(
                np.ascontiguousarray(rgb_out[:, columns]),
                None if metric is None else np.ascontiguousarray(metric[:, columns]),
                None if geoms is None else np.ascontiguousarray(geoms[:, columns])))
        return views

    def _draw(self, data: mujoco.MjData, cameras: list[int]) -> None:
        for index, camera in enumerate(cameras):
            self._camera.fixedcamid = camera
            mujoco.mjv_updateCamera(self._model, data, self._camera, self._scene)
            mujoco.mjr_render(mujoco.MjrRect(index * self._width, 0, self._width, self._height), self._scene,
                              self._context)

    def _metric_depth(self, buffer: np.ndarray) -> np.ndarray:
        """Depth-buffer values (far = 0, near = 1) -> distance along the optical axis in metres."""
        near, far = self._near, self._far
        return (far * near / (buffer.astype(np.float64) * (far - near) + near)).astype(np.float32)

    def _segment(self, data: mujoco.MjData, cameras: list[int], full: mujoco.MjrRect) -> np.ndarray:
        flags = self._scene.flags
        saved = (flags[mujoco.mjtRndFlag.mjRND_SEGMENT], flags[mujoco.mjtRndFlag.mjRND_IDCOLOR])
        flags[mujoco.mjtRndFlag.mjRND_SEGMENT] = 1
        flags[mujoco.mjtRndFlag.mjRND_IDCOLOR] = 1
        try:
            self._draw(data, cameras)
            colors = np.empty((full.height, full.width, 3), dtype=np.uint8)
            mujoco.mjr_readPixels(colors, None, full, self._context)
        finally:
            flags[mujoco.mjtRndFlag.mjRND_SEGMENT], flags[mujoco.mjtRndFlag.mjRND_IDCOLOR] = saved
        colors = colors[::-1].astype(np.int32)
        segment_ids = colors[..., 0] + (colors[..., 1] << 8) + (colors[..., 2] << 16)
        # Segment id k + 1 is scene geom k; keep only model geoms.
        lookup = np.full(self._scene.ngeom + 2, -1, dtype=np.int32)
        geom_type = int(mujoco.mjtObj.mjOBJ_GEOM)
        for index in range(self._scene.ngeom):
            geom = self._scene.geoms[index]
            if geom.objtype == geom_type and geom.segid >= 0:
                lookup[geom.segid + 1] = geom.objid
        segment_ids = np.clip(segment_ids, 0, len(lookup) - 1)
        return lookup[segment_ids]

    def close(self) -> None:
        """Free the GL resources (safe to call twice)."""
        if self._context is not None:
            with self._gl.as_current():  # type: ignore[attr-defined]
                self._context.free()
            self._context = None
        if self._gl is not None:
            self._gl.free()  # type: ignore[attr-defined]
            self._gl = None

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:  # interpreter shutdown: GL libraries may already be gone
            pass
