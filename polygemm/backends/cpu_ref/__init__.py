"""The NumPy reference backend: float64 products rounded once to the output dtype."""

from .backend import CpuReferenceBackend, reference

__all__ = ["CpuReferenceBackend", "reference"]
