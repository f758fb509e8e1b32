"""The MUSA backend for Moore Threads GPUs (see backend.py). Importing this package imports no cffi."""

from .arrays import MusaArray
from .backend import MusaBackend, PreparedB

__all__ = ["MusaBackend", "MusaArray", "PreparedB"]
