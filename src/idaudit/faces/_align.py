"""Five-point face alignment: least-squares similarity transforms and an exact bilinear warp.

A face is aligned by the similarity transform (rotation, uniform scale, shift) that carries
its five landmarks closest, in least squares, onto a fixed template, followed by a bilinear
warp of the photo through that transform. The template is the ArcFace 112×112 one used by
InsightFace, ArcFace, AdaFace and most current recognisers.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal, overload

import numpy as np
import numpy.typing as npt

from idaudit._validation import check_in_range, check_integer
from idaudit.exceptions import InvalidInputError
from idaudit.faces._io import to_rgb_uint8

__all__ = [
    "ARCFACE_TEMPLATE",
    "SimilarityTransform",
    "align",
    "arcface_template",
    "estimate_similarity",
    "warp_affine",
]

#: The ArcFace reference landmarks on a 112×112 crop, ``(x, y)`` pixel coordinates of the left
#: eye, right eye, nose tip, left and right mouth corners ("left" = smaller x).
ARCFACE_TEMPLATE: npt.NDArray[np.float64] = np.array(
    [
        [38.2946, 51.6963],
        [73.5318, 51.5014],
        [56.0252, 71.7366],
        [41.5493, 92.3655],
        [70.7299, 92.2041],
    ]
)
ARCFACE_TEMPLATE.setflags(write=False)


def arcface_template(size: int = 112, margin: float = 0.0) -> npt.NDArray[np.float64]:
    """Return the ArcFace landmark template for a ``size × size`` crop.

    Parameters
    ----------
    size : int, default 112
        Side of the output crop in pixels.
    margin : float, default 0.0
        Border in output pixels added on every side: the 112-pixel template is scaled into the
        central ``size - 2·margin`` pixels.

    Returns
    -------
    numpy.ndarray of float64, shape (5, 2)

    Notes
    -----
    ``T_size = T_112 · (size − 2·margin) / 112 + margin``. With the default ``margin=0`` a
    160-pixel crop (``size=160``, the FaceNet / InceptionResnetV1 input size) frames exactly the
    same part of the face as the 112-pixel ArcFace crop, at 160/112 times the resolution. The
    original FaceNet pipeline cut unaligned MTCNN boxes with a 32-pixel margin, a looser framing;
    ``margin`` (e.g. ``arcface_template(160, margin=16)``) moves towards it.

    Examples
    --------
    >>> from idaudit.faces import arcface_template
    >>> arcface_template(224)[0].tolist()
    [76.5892, 103.3926]
    """
    size = check_integer(size, "size", minimum=8)
    margin = check_in_range(margin, "margin", 0.0, size / 2.0, closed="left")
    return ARCFACE_TEMPLATE * ((size - 2.0 * margin) / 112.0) + margin


@dataclass(frozen=True)
class SimilarityTransform:
    """A 2-D similarity ``p ↦ s · R(θ) · p + t`` in image pixel coordinates.

    Attributes
    ----------
    scale : float
        ``s > 0``.
    rotation : float
        ``θ`` in radians, ``R(θ) = [[cos θ, −sin θ], [sin θ, cos θ]]`` acting on ``(x, y)``
        column vectors (with y pointing down, positive ``θ`` turns clockwise on screen).
    translation : numpy.ndarray of float64, shape (2,)
        ``t = (t_x, t_y)``.
    rms_error : float
        Root-mean-square distance between the mapped source points and the targets it was
        fitted to (0 for :meth:`from_params`).
    """

    scale: float
    rotation: float
    translation: npt.NDArray[np.float64] = field(repr=False)
    rms_error: float = 0.0

    @classmethod
    def from_params(
        cls, scale: float, rotation: float, translation: npt.ArrayLike
    ) -> SimilarityTransform:
        """Build a transform from its scale, rotation (radians) and translation."""
        t = np.asarray(translation, dtype=np.float64).reshape(2)
        return cls(float(scale), float(rotation), t)

    @property
    def matrix(self) -> npt.NDArray[np.float64]:
        """The ``(2, 3)`` affine matrix ``[s·R | t]`` (OpenCV's ``warpAffine`` convention)."""
        c, s = np.cos(self.rotation), np.sin(self.rotation)
        linear = self.scale * np.array([[c, -s], [s, c]])
        return np.hstack([linear, self.translation[:, None]])

    def apply(self, points: npt.ArrayLike) -> npt.NDArray[np.float64]:
        """Map ``(n, 2)`` points ``(x, y)``."""
        p = np.asarray(points, dtype=np.float64)
        m = self.matrix
        return p @ m[:, :2].T + m[:, 2]  # (n, 2)

    def inverse(self) -> SimilarityTransform:
        """Return the inverse transform ``p ↦ R(−θ) · (p − t) / s``."""
        c, s = np.cos(-self.rotation), np.sin(-self.rotation)
        t = -(np.array([[c, -s], [s, c]]) @ self.translation) / self.scale
        return SimilarityTransform(1.0 / self.scale, -self.rotation, t, self.rms_error)


def _check_points(x: Any, name: str) -> npt.NDArray[np.float64]:
    try:
        arr = np.asarray(x, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise TypeError(f"`{name}` must be a numeric array of shape (n, 2).") from exc
    if arr.ndim != 2 or arr.shape[1] != 2:
        raise InvalidInputError(f"`{name}` must have shape (n, 2); got {arr.shape}.")
    if not np.isfinite(arr).all():
        raise InvalidInputError(f"`{name}` must be finite; got NaN or inf.")
    return arr


def estimate_similarity(src: npt.ArrayLike, dst: npt.ArrayLike) -> SimilarityTransform:
    """Least-squares similarity transform carrying ``src`` onto ``dst`` (Umeyama, 1991).

    Parameters
    ----------
    src, dst : array_like, shape (n, 2)
        Corresponding points ``(x, y)``, ``n >= 2``, ``src`` not all equal.

    Returns
    -------
    SimilarityTransform
        The minimiser of ``Σ_i ‖dst_i − (s R src_i + t)‖²`` over scales ``s > 0``, proper
        rotations ``R`` and shifts ``t``; its ``rms_error`` is the residual.

    Raises
    ------
    InvalidInputError
        On mismatched or malformed shapes, fewer than two points, non-finite values, or
        coincident ``src`` points.

    Notes
    -----
    With means ``μ_s, μ_d``, centred points ``x_i = src_i − μ_s``, ``y_i = dst_i − μ_d``,
    ``σ² = (1/n) Σ ‖x_i‖²`` and the cross-covariance ``Σ = (1/n) Σ y_i x_iᵀ = U D Vᵀ`` (SVD),
    Umeyama's closed form is ``R = U S Vᵀ``, ``s = tr(D S) / σ²``, ``t = μ_d − s R μ_s`` with
    ``S = diag(1, det(U)·det(V))``, which keeps ``R`` a rotation (never a reflection)
    (Umeyama 1991, Eqs. 40–42).

    References
    ----------
    S. Umeyama, "Least-squares estimation of transformation parameters between two point
    patterns", IEEE TPAMI 13(4):376–380, 1991.

    Examples
    --------
    >>> from idaudit.faces import SimilarityTransform, arcface_template, estimate_similarity
    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> src = rng.uniform(0, 100, (5, 2))
    >>> true = SimilarityTransform.from_params(1.5, 0.3, [10.0, -4.0])
    >>> fit = estimate_similarity(src, true.apply(src))
    >>> round(fit.scale, 6), round(fit.rotation, 6)
    (1.5, 0.3)
    """
    s = _check_points(src, "src")
    d = _check_points(dst, "dst")
    if s.shape != d.shape:
        raise InvalidInputError(
            f"`src` and `dst` must have the same shape; got {s.shape} vs {d.shape}."
        )
    n = s.shape[0]
    if n < 2:
        raise InvalidInputError(f"`src` must hold at least 2 points; got {n}.")
    mu_s, mu_d = s.mean(axis=0), d.mean(axis=0)
    xs, yd = s - mu_s, d - mu_d  # (n, 2) each
    var_s = float((xs**2).sum() / n)
    if var_s <= 1e-24:
        raise InvalidInputError("`src` points must not all coincide.")
    cov = yd.T @ xs / n  # (2, 2)
    u, sing, vt = np.linalg.svd(cov)
    sign = np.ones(2)
    if np.linalg.det(u) * np.linalg.det(vt) < 0:
        sign[1] = -1.0
    rot = u @ np.diag(sign) @ vt
    scale = float((sing * sign).sum() / var_s)
    trans = mu_d - scale * rot @ mu_s
    angle = float(np.arctan2(rot[1, 0], rot[0, 0]))
    fitted = SimilarityTransform(scale, angle, trans)
    resid = fitted.apply(s) - d
    rms = float(np.sqrt((resid**2).sum(axis=1).mean()))
    return SimilarityTransform(scale, angle, trans, rms)


def warp_affine(
    image: npt.NDArray[np.uint8], matrix: npt.ArrayLike, size: tuple[int, int]
) -> npt.NDArray[np.uint8]:
    """Warp ``image`` through an affine map with bilinear sampling and black borders.

    Parameters
    ----------
    image : numpy.ndarray of uint8, shape (H, W, C)
        Source image.
    matrix : array_like, shape (2, 3)
        Forward map from source to output pixel coordinates, ``[A | b]``.
    size : tuple of int
        Output ``(width, height)``.

    Returns
    -------
    numpy.ndarray of uint8, shape (height, width, C)

    Notes
    -----
    Output pixel ``(u, v)`` takes the bilinear interpolation of the source at
    ``A⁻¹ · ((u, v) − b)``; pixel centres sit at integer coordinates and samples outside the
    source count as 0 — the conventions of OpenCV's ``warpAffine`` with ``INTER_LINEAR`` and a
    zero constant border, computed here in float64 (OpenCV rounds the weights to 1/32).
    """
    m = np.asarray(matrix, dtype=np.float64).reshape(2, 3)
    width, height = size
    inv = np.linalg.inv(np.vstack([m, [0.0, 0.0, 1.0]]))[:2]  # (2, 3)
    v, u = np.mgrid[0:height, 0:width].astype(np.float64)  # (h, w) each
    sx = inv[0, 0] * u + inv[0, 1] * v + inv[0, 2]  # (h, w)
    sy = inv[1, 0] * u + inv[1, 1] * v + inv[1, 2]
    x0, y0 = np.floor(sx), np.floor(sy)
    fx, fy = (sx - x0)[..., None], (sy - y0)[..., None]  # (h, w, 1)
    x0i, y0i = x0.astype(np.int64), y0.astype(np.int64)
    src_h, src_w = image.shape[:2]
    img = image.astype(np.float64)

    def tap(dy: int, dx: int) -> npt.NDArray[np.float64]:
        yy, xx = y0i + dy, x0i + dx
        inside = (yy >= 0) & (yy < src_h) & (xx >= 0) & (xx < src_w)
        vals = img[np.clip(yy, 0, src_h - 1), np.clip(xx, 0, src_w - 1)]  # (h, w, C)
        return np.where(inside[..., None], vals, 0.0)

    out = (
        tap(0, 0) * (1 - fx) * (1 - fy)
        + tap(0, 1) * fx * (1 - fy)
        + tap(1, 0) * (1 - fx) * fy
        + tap(1, 1) * fx * fy
    )
    result: npt.NDArray[np.uint8] = np.clip(np.rint(out), 0, 255).astype(np.uint8)
    return result


@overload
def align(
    image: npt.NDArray[Any],
    landmarks: npt.ArrayLike,
    size: int = ...,
    template: npt.ArrayLike | None = ...,
    *,
    return_transform: Literal[False] = ...,
) -> npt.NDArray[np.uint8]: ...


@overload
def align(
    image: npt.NDArray[Any],
    landmarks: npt.ArrayLike,
    size: int = ...,
    template: npt.ArrayLike | None = ...,
    *,
    return_transform: Literal[True],
) -> tuple[npt.NDArray[np.uint8], SimilarityTransform]: ...


def align(
    image: npt.NDArray[Any],
    landmarks: npt.ArrayLike,
    size: int = 112,
    template: npt.ArrayLike | None = None,
    *,
    return_transform: bool = False,
) -> npt.NDArray[np.uint8] | tuple[npt.NDArray[np.uint8], SimilarityTransform]:
    """Align a face onto a five-point template and cut the ``size × size`` crop.

    Parameters
    ----------
    image : numpy.ndarray, shape (H, W, 3)
        RGB photo (grey, RGBA, uint16 and [0, 1] float images are converted as
        :func:`idaudit.faces.load_image` describes).
    landmarks : array_like, shape (5, 2)
        ``(x, y)`` of left eye, right eye, nose tip, left and right mouth corners, in pixels
        (e.g. :attr:`Face.landmarks`).
    size : int, default 112
        Side of the output crop. 112 is the ArcFace crop; 160 the FaceNet / InceptionResnetV1
        input, same framing (see :func:`arcface_template`).
    template : array_like, shape (5, 2), optional
        Target landmark positions in output pixels; default ``arcface_template(size)``.
    return_transform : bool, default False
        Also return the fitted :class:`SimilarityTransform` (source → crop pixels).

    Returns
    -------
    crop : numpy.ndarray of uint8, shape (size, size, 3)
    transform : SimilarityTransform
        Only with ``return_transform=True``.

    Notes
    -----
    The transform is :func:`estimate_similarity` (Umeyama) from ``landmarks`` to the template;
    the crop is :func:`warp_affine` of the photo through it (bilinear, black outside the photo).

    Examples
    --------
    >>> from idaudit.faces import align, arcface_template, estimate_similarity
    >>> import numpy as np
    >>> img = np.zeros((200, 200, 3), np.uint8)
    >>> crop, tf = align(img, arcface_template(112) + 40.0, return_transform=True)
    >>> crop.shape, round(tf.scale, 6), tf.translation.round(6).tolist()
    ((112, 112, 3), 1.0, [-40.0, -40.0])
    """
    size = check_integer(size, "size", minimum=8)
    rgb = to_rgb_uint8(image)
    src = _check_points(landmarks, "landmarks")
    if src.shape != (5, 2):
        raise InvalidInputError(f"`landmarks` must have shape (5, 2); got {src.shape}.")
    dst = arcface_template(size) if template is None else _check_points(template, "template")
    if dst.shape != (5, 2):
        raise InvalidInputError(f"`template` must have shape (5, 2); got {dst.shape}.")
    transform = estimate_similarity(src, dst)
    crop = warp_affine(rgb, transform.matrix, (size, size))
    return (crop, transform) if return_transform else crop
