"""The PyCUDA backend for NVIDIA GPUs (see backend.py). Importing this package imports no pycuda."""

from .backend import CudaBackend

__all__ = ["CudaBackend"]
