"""The MUSA backend for Moore Threads GPUs (see backend.py). Importing this package imports no cffi."""

from .backend import MusaBackend

__all__ = ["MusaBackend"]
