"""What the public calls take, as types: operands (NumPy arrays and array-likes, CUDA or DLPack arrays), scalars,
result dtypes and devices."""

from __future__ import annotations

from typing import Any, Protocol, SupportsFloat, Union

import numpy.typing as npt

__all__ = ["CudaArray", "DLPackArray", "ArrayInput", "ScalarInput", "DTypeLike", "DeviceLike"]


class CudaArray(Protocol):
    """A device array exposing the CUDA array interface (CuPy, PyTorch, pycuda, Numba)."""

    @property
    def __cuda_array_interface__(self) -> dict[str, Any]: ...


class DLPackArray(Protocol):
    """An array offering the DLPack protocol (JAX, PyTorch, CuPy, NumPy ...)."""

    def __dlpack__(self, *args: Any, **kwargs: Any) -> Any: ...

    def __dlpack_device__(self) -> tuple[int, int]: ...


#: what ``gemm`` takes as an operand: NumPy arrays and array-likes, CUDA or DLPack arrays
ArrayInput = Union["npt.ArrayLike", CudaArray, DLPackArray]


#: what ``alpha`` and ``beta`` take: a Python or NumPy number, a 0-D array (NumPy's, torch's, JAX's), a Fraction
#: (anything ``float()`` reads; ``parse_scalar`` refuses bools, complex numbers and values no float64 holds)
ScalarInput = SupportsFloat


#: a result dtype: a NumPy dtype or its name, or another library's dtype object (torch.float32)
DTypeLike = Union["npt.DTypeLike", Any]


#: what ``device=`` takes: a backend name ("cpu", "cuda", "cuda:1", "auto"), or the device object
#: of the operands' library (``torch.device``, ``cupy.cuda.Device``), named as it names itself
DeviceLike = Union[str, Any]
