"""Drawing of synthetic SOD samples: salient objects on cluttered, desaturated backgrounds.

The demo must be learnable from scratch by a small CNN in minutes, yet not solvable by a centre
prior. So the cues that separate the salient object(s) are consistent: they are large, saturated,
coherently textured and cleanly bounded, while the background is grey-ish clutter (gradients,
smooth noise, stripes, grain) with many small, low-contrast distractor shapes. Position, size,
shape, colour and texture vary widely, and so does the image size.

Every function takes a ``numpy.random.Generator``; a sample depends only on that generator, so a
seeded generator per image makes the dataset deterministic and independent of generation order.
All drawing is float32 RGB in [0, 1]; shapes are polygons filled by OpenCV with anti-aliasing and
sub-pixel precision, so mask edges are slightly soft and exactly aligned with the image.
"""

from __future__ import annotations

import colorsys
import math

import cv2
import numpy as np

Rng = np.random.Generator
_SHIFT = 4  # sub-pixel bits for cv2.fillPoly
SHAPES = ("ellipse", "polygon", "star", "rounded_rect", "blob", "ring", "holed_blob", "frame")


def _hsv(h: float, s: float, v: float) -> np.ndarray:
    return np.array(colorsys.hsv_to_rgb(h % 1.0, s, v), dtype=np.float32)


def _circle_points(n: int, radius: np.ndarray | float) -> np.ndarray:
    t = np.linspace(0.0, 2.0 * math.pi, n, endpoint=False)
    return np.stack([np.cos(t), np.sin(t)], axis=1) * np.asarray(radius).reshape(-1, 1)


def _rounded_rect(half_w: float, half_h: float, corner: float) -> np.ndarray:
    corner = min(corner, half_w, half_h)
    centres = [(half_w - corner, half_h - corner), (-half_w + corner, half_h - corner),
               (-half_w + corner, -half_h + corner), (half_w - corner, -half_h + corner)]
    points = []
    for k, (cx, cy) in enumerate(centres):
        t = np.linspace(k * math.pi / 2, (k + 1) * math.pi / 2, 8)
        points.append(np.stack([cx + corner * np.cos(t), cy + corner * np.sin(t)], axis=1))
    return np.concatenate(points)


def _blob_radius(rng: Rng, n: int) -> np.ndarray:
    t = np.linspace(0.0, 2.0 * math.pi, n, endpoint=False)
    r = np.ones(n)
    for k in range(2, 6):
        r += rng.uniform(0.0, 0.35 / k) * np.cos(k * t + rng.uniform(0, 2 * math.pi))
    return r / r.max()


def unit_shape(rng: Rng, kind: str) -> list[np.ndarray]:
    """Polygons of one shape inside the unit disc: the outline first, then holes (drawn as 0)."""
    if kind == "ellipse":
        return [_circle_points(64, 1.0) * [1.0, rng.uniform(0.45, 1.0)]]
    if kind == "polygon":
        k = int(rng.integers(3, 9))  # vertices spread around the circle: no slivers
        angles = (np.arange(k) + rng.uniform(-0.3, 0.3, k)) * (2 * math.pi / k)
        r = rng.uniform(0.7, 1.0, k)
        return [np.stack([np.cos(angles) * r, np.sin(angles) * r], axis=1)]
    if kind == "star":
        k = int(rng.integers(5, 9))
        radius = np.tile([1.0, rng.uniform(0.4, 0.6)], k)
        return [_circle_points(2 * k, radius)]
    if kind == "rounded_rect":
        return [_rounded_rect(1.0, rng.uniform(0.45, 1.0), rng.uniform(0.1, 0.4))]
    if kind == "blob":
        return [_circle_points(64, _blob_radius(rng, 64))]
    if kind == "ring":
        outer = _circle_points(64, 1.0) * [1.0, rng.uniform(0.6, 1.0)]
        return [outer, outer * rng.uniform(0.4, 0.6)]
    if kind == "holed_blob":
        hole = _circle_points(32, 1.0) * [rng.uniform(0.2, 0.3), rng.uniform(0.15, 0.3)]
        return [_circle_points(64, _blob_radius(rng, 64)), hole]
    if kind == "frame":
        half_h = rng.uniform(0.6, 1.0)
        outer = _rounded_rect(1.0, half_h, rng.uniform(0.05, 0.3))
        inner = _rounded_rect(rng.uniform(0.4, 0.6), half_h * rng.uniform(0.4, 0.6), 0.05)
        return [outer, inner]
    raise ValueError(f"unknown shape {kind!r}")


def shape_patch(rng: Rng, kind: str, radius: float) -> np.ndarray:
    """A float32 alpha patch, side ``2 * ceil(radius) + 4``, with the shape centred, rotated."""
    side = 2 * math.ceil(radius) + 4
    angle = rng.uniform(0, 2 * math.pi)
    rot = np.array([[math.cos(angle), -math.sin(angle)], [math.sin(angle), math.cos(angle)]])
    canvas = np.zeros((side, side), np.uint8)
    for i, poly in enumerate(unit_shape(rng, kind)):
        points = (poly @ rot.T) * radius + side / 2.0
        fixed = np.round(points * (1 << _SHIFT)).astype(np.int32)
        cv2.fillPoly(canvas, [fixed], 255 if i == 0 else 0, cv2.LINE_AA, _SHIFT)
    return canvas.astype(np.float32) / 255.0


Slices = tuple[slice, slice, slice, slice]


def paste(canvas: np.ndarray, patch: np.ndarray, top: int, left: int) -> Slices:
    """Slices of ``canvas`` and ``patch`` where a patch put at (top, left) overlaps the canvas."""
    h, w = canvas.shape[:2]
    ph, pw = patch.shape[:2]
    y0, x0 = max(top, 0), max(left, 0)
    y1, x1 = min(top + ph, h), min(left + pw, w)
    return slice(y0, y1), slice(x0, x1), slice(y0 - top, y1 - top), slice(x0 - left, x1 - left)


def smooth_noise(rng: Rng, h: int, w: int, cell: float) -> np.ndarray:
    """Low-frequency noise in about [0, 1]: random values on a coarse grid, cubic-upsampled."""
    gh, gw = max(2, int(h / cell) + 2), max(2, int(w / cell) + 2)
    return cv2.resize(rng.random((gh, gw), dtype=np.float32), (w, h),
                      interpolation=cv2.INTER_CUBIC)


def _grid(h: int, w: int) -> tuple[np.ndarray, np.ndarray]:
    return np.arange(h, dtype=np.float32)[:, None], np.arange(w, dtype=np.float32)[None, :]


def _ramp(rng: Rng, h: int, w: int) -> np.ndarray:
    """A linear ramp from 0 to 1 in a random direction."""
    angle = rng.uniform(0, 2 * math.pi)
    yy, xx = _grid(h, w)
    t = xx * np.float32(math.cos(angle)) + yy * np.float32(math.sin(angle))
    return (t - t.min()) / max(float(t.max() - t.min()), 1e-6)


def _stripes(rng: Rng, h: int, w: int, period: float) -> np.ndarray:
    angle = rng.uniform(0, math.pi)
    yy, xx = _grid(h, w)
    k = 2 * math.pi / period
    phase = xx * np.float32(math.cos(angle) * k) + yy * np.float32(math.sin(angle) * k)
    return 0.5 + 0.5 * np.sin(phase + np.float32(rng.uniform(0, 2 * math.pi)))


def background(rng: Rng, h: int, w: int) -> np.ndarray:
    """Desaturated clutter: a dull two-colour gradient plus grey noise, stripes and grain."""
    c1 = _hsv(rng.random(), rng.uniform(0.0, 0.2), rng.uniform(0.25, 0.85))
    c2 = _hsv(rng.random(), rng.uniform(0.0, 0.2), rng.uniform(0.25, 0.85))
    t = _ramp(rng, h, w)[..., None]
    img = c1 * (1 - t) + c2 * t
    grey = (smooth_noise(rng, h, w, rng.uniform(15, 60)) - 0.5) * rng.uniform(0.1, 0.35)
    if rng.random() < 0.5:
        grey += (_stripes(rng, h, w, rng.uniform(5, 30)) - 0.5) * rng.uniform(0.04, 0.12)
    img = img + grey[..., None]
    img += rng.standard_normal((h, w, 1), dtype=np.float32) * np.float32(rng.uniform(0.01, 0.04))
    return np.clip(img, 0.0, 1.0)


def add_distractors(rng: Rng, img: np.ndarray) -> None:
    """Many small, low-contrast, low-saturation shapes: clutter the network must learn to ignore."""
    h, w = img.shape[:2]
    side = min(h, w)
    for _ in range(int(rng.integers(8, 32))):
        radius = rng.uniform(0.02, 0.07) * side
        patch = shape_patch(rng, str(rng.choice(SHAPES[:5])), radius)
        top = int(rng.integers(-patch.shape[0] // 2, h - patch.shape[0] // 2))
        left = int(rng.integers(-patch.shape[1] // 2, w - patch.shape[1] // 2))
        cy, cx, py, px = paste(img, patch, top, left)
        region = img[cy, cx]
        if region.size == 0:
            continue
        value = float(region.mean()) + rng.uniform(-0.2, 0.2)
        colour = _hsv(rng.random(), rng.uniform(0.0, 0.3), float(np.clip(value, 0.05, 0.95)))
        a = patch[py, px, None]
        img[cy, cx] = region * (1 - a) + colour * a


def object_texture(rng: Rng, h: int, w: int) -> np.ndarray:
    """A coherent, saturated texture (flat, gradient, stripes, spots or mottled), shaded."""
    hue = rng.random()
    c1 = _hsv(hue, rng.uniform(0.6, 1.0), rng.uniform(0.55, 1.0))
    c2 = _hsv(hue + rng.uniform(0.08, 0.5) * rng.choice([-1, 1]), rng.uniform(0.6, 1.0),
              rng.uniform(0.5, 1.0))
    kind = rng.choice(["flat", "gradient", "stripes", "spots", "mottled"])
    if kind == "flat":
        t = np.zeros((h, w), np.float32)
    elif kind == "gradient":
        t = _ramp(rng, h, w)
    elif kind == "stripes":
        t = np.clip((_stripes(rng, h, w, rng.uniform(6, 24)) - 0.5) * 3 + 0.5, 0, 1)
    elif kind == "spots":
        t = (smooth_noise(rng, h, w, rng.uniform(4, 10)) > 0.65).astype(np.float32)
    else:
        t = smooth_noise(rng, h, w, rng.uniform(6, 20))
    tex = c1 * (1 - t[..., None]) + c2 * t[..., None]
    shade = 1.0 - rng.uniform(0.0, 0.3) * _ramp(rng, h, w)
    return np.clip(tex * shade[..., None], 0.0, 1.0)


def _place(rng: Rng, h: int, w: int, radius: float, taken: list[tuple[float, float, float]]
           ) -> tuple[float, float]:
    """A centre for an object: anywhere (slightly past the border allowed), apart from others."""
    best = (h / 2, w / 2)
    for _ in range(20):
        cy = rng.uniform(0.8 * radius, max(h - 0.8 * radius, 0.8 * radius + 1))
        cx = rng.uniform(0.8 * radius, max(w - 0.8 * radius, 0.8 * radius + 1))
        best = (cy, cx)
        if all(math.hypot(cy - y, cx - x) > 0.9 * (radius + r) for y, x, r in taken):
            break
    return best


def add_objects(rng: Rng, img: np.ndarray) -> np.ndarray:
    """Composite one or two salient objects onto ``img`` in place; returns their float alpha."""
    h, w = img.shape[:2]
    side = min(h, w)
    alpha = np.zeros((h, w), np.float32)
    count = 1 if rng.random() < 0.7 else 2
    taken: list[tuple[float, float, float]] = []
    for _ in range(count):
        radius = rng.uniform(0.15, 0.45) * side if count == 1 else rng.uniform(0.12, 0.3) * side
        patch = shape_patch(rng, str(rng.choice(SHAPES)), radius)
        cy, cx = _place(rng, h, w, radius, taken)
        taken.append((cy, cx, radius))
        top, left = int(round(cy - patch.shape[0] / 2)), int(round(cx - patch.shape[1] / 2))
        sy, sx, py, px = paste(img, patch, top, left)
        a = patch[py, px]
        tex = object_texture(rng, a.shape[0], a.shape[1])
        img[sy, sx] = img[sy, sx] * (1 - a[..., None]) + tex * a[..., None]
        alpha[sy, sx] = np.maximum(alpha[sy, sx], a)
    return alpha


def render_sample(rng: Rng, min_side: int = 160, max_side: int = 320
                  ) -> tuple[np.ndarray, np.ndarray]:
    """One sample: uint8 RGB image (H, W, 3) and uint8 mask (H, W) with soft anti-aliased edges."""
    h, w = (int(v) for v in rng.integers(min_side, max_side + 1, size=2))
    img = background(rng, h, w)
    add_distractors(rng, img)
    alpha = add_objects(rng, img)
    sigma = rng.uniform(0.0, 0.8)
    if sigma > 0.3:
        img = cv2.GaussianBlur(img, (0, 0), sigma)
    img += rng.standard_normal(img.shape, dtype=np.float32) * np.float32(0.01)
    image = np.clip(np.rint(img * 255.0), 0, 255).astype(np.uint8)
    mask = np.clip(np.rint(alpha * 255.0), 0, 255).astype(np.uint8)
    return image, mask
