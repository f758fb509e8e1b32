"""polygemm-numpy-blas: an example polygemm plugin (``device="numpy_blas"``).

The package's only public name is the backend class; polygemm finds it through the
``polygemm.backends`` entry point declared in ``pyproject.toml`` and imports it lazily.
"""

from .backend import NumpyBlasBackend

__all__ = ["NumpyBlasBackend"]
