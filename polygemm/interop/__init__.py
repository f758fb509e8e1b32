"""The arrays users hold, one adapter module per kind of array: ``numpy``, ``cupy``, ``torch``,
``dlpack`` (JAX and other array-API libraries), ``cuda_array_interface`` (any device array by its
interface); ``kinds`` says which library an operand belongs to and ``results`` makes a result of
that kind.

* **Kinds.** One call takes one kind: CuPy ``a`` with a torch ``b`` is refused, naming both.
* **DLPack in.** An object that offers only ``__dlpack__``/``__dlpack_device__`` is read
  without a copy. bfloat16 comes this way too: torch's ``__cuda_array_interface__`` refuses
  it, so CUDA torch bfloat16 tensors are read through DLPack.
* **Same kind out.** A result polygemm allocates is of the input's kind.
* **Streams.** torch publishes no stream in its array interface; its current stream is the
  one a torch user expects work on, so that is the stream a call on torch tensors names.
"""

from __future__ import annotations

from .cuda_array_interface import device_index, device_interface, device_pointer
from .cupy import cupy_view, cupy_views
from .dlpack import dlpack_interface
from .kinds import KNOWN_KINDS, common_kind, kind_of
from .numpy import raw_view, result_like
from .results import allocator, host_wrapper, made_whole
from .torch import (torch_dlpack_only, torch_negated, torch_resolved, torch_stream, torch_unwritable, torch_view, torch_views,
                    torch_written)

__all__ = ["kind_of", "torch_negated", "torch_resolved", "torch_unwritable", "torch_written", "common_kind", "dlpack_interface",
           "allocator", "host_wrapper", "result_like", "torch_stream", "torch_view", "torch_views", "cupy_view", "cupy_views",
           "device_index", "torch_dlpack_only", "device_pointer", "raw_view", "made_whole", "device_interface", "KNOWN_KINDS"]
