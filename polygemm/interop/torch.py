"""PyTorch: tensors read from their attributes, their current stream (torch publishes none in
its array interface; its current stream is the one a torch user expects work on), lazy
negations and inference tensors, results allocated by torch, host results as tensors."""

from __future__ import annotations

import re
import sys
from types import ModuleType
from typing import Any, Callable

import numpy as np

from ..errors import ArgumentError, DTypeError

__all__ = ["torch_refusal", "torch_detached", "torch_host_array", "torch_from_host", "torch_stream", "torch_conjugate_memory", "torch_negated", "torch_keyless", "torch_unwritable", "torch_resolved", "torch_copy_note", "torch_written", "torch_view", "torch_views", "torch_host_views",
           "torch_dlpack_only", "torch_allocator", "torch_wrapper", "torch_whole", "dynamo_tracing", "eager"]

_NO_VIEW: tuple[tuple[Any, ...], int, None] = ((), 0, None)  # operand_view(None)

def torch_dlpack_only(obj: Any) -> bool:
    """Whether ``obj`` is a CUDA torch tensor that torch's ``__cuda_array_interface__`` refuses
    (bfloat16): it is read through DLPack instead."""
    torch = sys.modules.get("torch")
    return torch is not None and isinstance(obj, torch.Tensor) and obj.dtype == torch.bfloat16 and obj.is_cuda


def torch_stream(obj: Any) -> int | None:
    """The current stream of a CUDA torch tensor's device (torch's arrays name none)."""
    torch = sys.modules.get("torch")
    if torch is None or not isinstance(obj, torch.Tensor) or not obj.is_cuda:
        return None
    return _torch_current_stream(torch, obj.device.index)


def _torch_current_stream(torch: Any, index: int) -> int:
    """The current stream of CUDA device ``index`` as torch holds it (its raw handle)."""
    raw = getattr(torch._C, "_cuda_getCurrentRawStream", None)  # what torch.cuda.current_stream wraps, minus its Python
    if raw is not None:
        return int(raw(index))
    return int(torch.cuda.current_stream(index).cuda_stream)


_TORCH_TYPESTR: dict[Any, str] = {}


def _torch_one(obj: Any, device: int, stream: int | None) -> tuple[tuple[Any, ...], int, int | None] | None:
    """The view of a CUDA tensor (None for a dtype not read in place)."""
    typestr = _TORCH_TYPESTR.get(obj.dtype)
    if typestr is None:
        typestr = _typestr(obj)
        if typestr is None:
            return None
    ptr = obj.data_ptr()
    # strides in elements (the typestr fixes the element's size): torch.Size is a tuple, stride() makes one
    key = ("cuda", obj.shape, obj.stride(), typestr, False, ptr % 16, type(obj), device)
    return key, ptr, stream


def _is_neg(t: Any) -> bool:
    """``t.is_neg()`` of a tensor (False where torch predates the negative bit, or a stand-in lacks it)."""
    f = getattr(t, "is_neg", None)
    return f is not None and bool(f())


def _is_conj(t: Any) -> bool:
    """``t.is_conj()`` of a tensor (a lazy conjugate, ``z.conj()``; False where torch or a stand-in lacks the bit)."""
    f = getattr(t, "is_conj", None)
    return f is not None and bool(f())


def _is_inference(t: Any) -> bool:
    f = getattr(t, "is_inference", None)
    return f is not None and bool(f())


def torch_negated(obj: Any) -> bool:
    """Whether ``obj`` is a torch tensor with its negative or conjugate bit set (see :func:`torch_resolved`): a bit
    its memory does not carry, so no view of that memory may key a plan."""
    torch = sys.modules.get("torch")
    return torch is not None and isinstance(obj, torch.Tensor) and (_is_neg(obj) or _is_conj(obj))


def torch_keyless(obj: Any) -> bool:
    """Whether no view of ``obj``'s memory may key a plan: a torch tensor with its negative or conjugate bit set
    (:func:`torch_negated`), or any torch tensor while a forward-AD level is open (a dual tensor's tangent is no part
    of its memory: each tensor is then read by the full normalization, which refuses a dual one)."""
    if torch_negated(obj):
        return True
    torch = sys.modules.get("torch")
    return torch is not None and isinstance(obj, torch.Tensor) and _open_level(torch) >= 0


def torch_unwritable(out: Any) -> bool:
    """Whether ``out`` is a torch inference tensor and inference mode is off: torch allows no update of it then."""
    torch = sys.modules.get("torch")
    return torch is not None and isinstance(out, torch.Tensor) and _is_inference(out) and not torch.is_inference_mode_enabled()


def torch_conjugate_memory(obj: Any, *, writable: bool = False) -> Any:
    """For a CUDA complex torch tensor with its conjugate bit set (a lazy ``z.conj()``) read as an input: the tensor of
    its memory as it is (the same memory, the bit cleared), whose values' conjugates it stands for; None otherwise (an
    out is refused by :func:`torch_resolved`, a CPU tensor resolved there)."""
    torch = sys.modules.get("torch")
    if writable or torch is None or not isinstance(obj, torch.Tensor) or not _is_conj(obj):
        return None
    if not obj.is_cuda or not obj.is_complex():
        return None
    return obj.conj()  # the conjugate of a conjugate view: the memory's own values, no copy


def torch_resolved(name: str, obj: Any, *, writable: bool = False) -> Any:
    """``obj``; for a torch tensor with its negative bit set (a lazy negation, such as ``z.conj().imag``) the
    tensor it stands for, materialized by torch (``resolve_neg``). DLPack and the array interfaces export the memory
    without the bit: such an operand's values would be read with their signs flipped, silently. An ``out`` (writable)
    with the bit, or an inference tensor written outside ``torch.inference_mode`` (torch refuses that update), is refused."""
    torch = sys.modules.get("torch")
    if torch is None or not isinstance(obj, torch.Tensor):
        return obj
    if writable and torch_unwritable(obj):
        raise ArgumentError(f"{name} is an inference tensor (made under torch.inference_mode), which torch lets nobody update "
                            f"outside inference mode; call polygemm inside torch.inference_mode(), or omit {name} to get a new result")
    if _is_conj(obj):  # a complex operand read as torch reads it: its conjugate, materialized (an out is refused)
        if writable:
            raise ArgumentError(f"{name} is a torch tensor with its conjugate bit set (a lazy z.conj()): its memory holds the "
                                f"values' conjugates, and polygemm writes memory as it is; pass a tensor without it "
                                f"({name}.resolve_conj() is a new one), or omit {name} to get a new result")
        obj = obj.resolve_conj()
    if not _is_neg(obj):
        return obj
    if writable:
        raise ArgumentError(f"{name} is a torch tensor with its negative bit set (a lazy negation, such as z.conj().imag): its "
                            f"memory holds the values' negatives, and polygemm writes memory as it is; pass a tensor without "
                            f"it ({name}.resolve_neg() is a new one), or omit {name} to get a new result")
    return obj.resolve_neg()


def torch_copy_note(name: str, obj: Any) -> str:
    """What :func:`torch_resolved` copied of ``obj`` (a tensor with its conjugate or negative bit set), as a plan's
    copies name a copy: the whole tensor, made by torch."""
    # (resolve_conj materializes the values of a tensor with both bits: torch_resolved then has no negation left)
    conj, neg = _is_conj(obj), _is_neg(obj)
    bits = [(f"{name}.resolve_{bit}()", what) for bit, what, is_set in
            (("conj", "a lazy conjugate: its memory holds its values' conjugates", conj),
             ("neg", "a lazy negation: its memory holds its values' negatives", neg and not conj)) if is_set]
    return (f"{name} copied once by torch, {' then '.join(call for call, _ in bits)} "
            f"({'; '.join(what for _, what in bits)})")


def torch_written(out: Any) -> None:
    """Tell torch's autograd that ``out`` (a torch tensor polygemm wrote) changed in place, as its own ``out=`` does:
    a graph that saved it for backward then raises "modified by an inplace operation" instead of computing
    gradients from the new values, silently. Nothing for other arrays."""
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(out, torch.Tensor):
        bump = _bumps.get(torch)
        if bump is not None:
            bump((out,))
            return
        _bumps.clear()
        direct = getattr(torch._C, "_increment_version", None)
        if direct is None:  # a torch with no version counter to bump
            _bumps[torch] = lambda outs: None
            return
        try:  # what torch.autograd.graph.increment_version calls: a tuple of tensors from torch 2.5 on
            direct((out,))
        except (TypeError, RuntimeError):  # before it, one tensor (torch raises RuntimeError for anything else)
            _bumps[torch] = lambda outs: direct(outs[0])
            direct(out)
        else:
            _bumps[torch] = direct


#: how the imported torch bumps a tuple of tensors' version counters (one module: a test may swap it for a stand-in)
_bumps: dict[Any, Callable[[tuple[Any, ...]], None]] = {}


#: torch dtypes polygemm computes (the others, float8 and complex32 among them, are refused naming a cast)
_TORCH_COMPUTED = frozenset(("float16", "bfloat16", "float32", "float64", "complex64", "complex128", "int8", "int16", "int32",
                             "int64", "uint8", "uint16", "uint32", "uint64", "bool"))


def torch_refusal(name: str, obj: Any) -> None:
    """ArgumentError (DTypeError for a dtype) for a torch tensor polygemm cannot read as it is, saying what to pass: a
    MaskedTensor (``.to_tensor(0)``), a nested tensor (``.to_padded_tensor(0)``), a sparse or MKL-DNN layout
    (``.to_dense()``), the meta device, a FakeTensor or a torch.func transform's tensor (no data of their own), a
    dtype polygemm does not compute (``.to(torch.float32)``, ``.dequantize()``). Nothing for other objects and other
    tensors."""
    torch = sys.modules.get("torch")
    if torch is None or not isinstance(obj, torch.Tensor):
        return
    cls = type(obj)
    lazy = getattr(getattr(getattr(torch, "nn", None), "parameter", None), "UninitializedTensorMixin", None)
    if lazy is not None and isinstance(obj, lazy):
        raise ArgumentError(f"{name} is an uninitialized parameter of a lazy module (torch.nn.LazyLinear and kin), which "
                            f"holds no values yet: run the module's forward once first (it materializes its parameters)")
    if cls is not torch.Tensor and cls.__name__ != "MaskedTensor" and _overrides_torch_function(cls, torch) \
            and not _dataless_kind(obj, torch):  # (a FakeTensor or a transform's tensor: said below, as such)
        # its attributes answer through its own __torch_function__, and its memory need not hold the values it stands for
        # (a quantized or packed weight): read as a plain tensor, it would be computed wrongly or refused for the wrong reason
        raise ArgumentError(f"{name} is a {cls.__name__}, a torch.Tensor subclass with its own __torch_function__; polygemm "
                            f"reads a tensor's memory as plain values: pass {name}.as_subclass(torch.Tensor) where its memory "
                            f"holds its values, or compute it with torch.matmul")
    if type(obj).__name__ == "MaskedTensor":
        raise ArgumentError(f"{name} is a torch MaskedTensor; polygemm ignores no mask. Fill it first, e.g. "
                            f"{name}.to_tensor(0), or pass {name}.get_data()")
    if getattr(obj, "is_nested", False):
        raise ArgumentError(f"{name} is a nested torch tensor; polygemm reads dense (strided) tensors: pass "
                            f"{name}.to_padded_tensor(0), or multiply its components one by one ({name}.unbind())")
    layout, strided = getattr(obj, "layout", None), getattr(torch, "strided", None)  # (stand-ins of torch may lack them)
    if layout is not None and strided is not None and layout != strided:
        raise ArgumentError(f"{name} is a torch tensor of layout {layout}; polygemm reads dense (strided) tensors: pass "
                            f"{name}.to_dense()")
    if getattr(getattr(obj, "device", None), "type", None) == "meta":
        raise ArgumentError(f"{name} is a tensor on torch's meta device, which holds no data to compute with; pass a "
                            f"tensor on the CPU or a CUDA device")
    kind = _dataless_kind(obj, torch)
    if kind:  # tensors whose memory DLPack would hand over is none of theirs (a FakeTensor's pointer is 0)
        how = (("pass a tensor of memory of its own (torch's ZeroTensors are immutable), or omit out to get a new result"
                if name == "out" else f"pass {name}.clone(), which holds its zeros in memory") if kind == _ZERO_TENSOR else
               "call it outside the transform or tracing (torch.func.vmap, torch.compile), on the tensors themselves (a "
               "batch as one polygemm.matmul)")
        raise ArgumentError(f"{name} is {kind}, which holds no data of its own to compute with; polygemm computes on "
                            f"concrete tensors: {how}")
    dtype = str(getattr(obj, "dtype", "float32")).rpartition(".")[2]
    if dtype.startswith(("qint", "quint")):  # a quantized tensor: its values are its dequantize()'s
        raise DTypeError(f"{name} is a quantized torch.{dtype} tensor, a dtype polygemm does not compute; pass "
                         f"{name}.dequantize() (float32)")
    if dtype.startswith(("bits", "float4")) or re.fullmatch(r"u?int[1-7]", dtype):  # packed: no cast of torch's reads them
        raise DTypeError(f"{name} is a torch.{dtype} tensor (packed bits), a dtype polygemm does not compute and torch "
                         f"casts to no computed dtype; unpack it into float16, bfloat16, float32 or an integer dtype first")
    if dtype not in _TORCH_COMPUTED:
        wider = "complex64" if dtype.startswith("complex") else "float32"  # (a cast that keeps every value: complex32's)
        raise DTypeError(f"{name} is a torch.{dtype} tensor, a dtype polygemm does not compute; cast it, e.g. "
                         f"{name}.to(torch.{wider}) (float16, bfloat16, float32, float64, complex64, complex128, integers "
                         f"and bool are computed)")


def _overrides_torch_function(cls: type, torch: Any) -> bool:
    """Whether a torch.Tensor subclass answers torch's functions itself: a ``__torch_function__`` other than torch's own
    and the one subclasses such as Parameter take to keep torch's (``torch._C._disabled_torch_function_impl``)."""
    own = getattr(cls, "__torch_function__", None)
    base = getattr(torch.Tensor, "__torch_function__", None)
    disabled = getattr(getattr(torch, "_C", None), "_disabled_torch_function_impl", None)
    func = getattr(own, "__func__", own)
    return own is not None and func is not getattr(base, "__func__", base) and own is not disabled and func is not disabled


#: what a refusal calls torch's ZeroTensor (``torch._efficientzerotensor``: zeros of no memory, as autograd makes them)
_ZERO_TENSOR = "a ZeroTensor (torch's efficient zeros, as autograd makes for a zero gradient)"


def _dataless_kind(obj: Any, torch: Any) -> str:
    """What kind of data-less tensor ``obj`` is: a FakeTensor (torch.compile's tracing), a tensor wrapped by a
    torch.func transform (vmap's batched tensors, grad's wrappers), or one with no storage at all; "" for a tensor
    with data."""
    fake = sys.modules.get("torch._subclasses.fake_tensor")
    if fake is not None and isinstance(obj, getattr(fake, "FakeTensor", ())):
        return "a FakeTensor (torch.compile's and FakeTensorMode's tracing tensors)"
    functorch = getattr(getattr(torch, "_C", None), "_functorch", None)
    try:
        wrapped = bool(functorch is not None and functorch.is_functorch_wrapped_tensor(obj))
    except Exception:  # noqa: BLE001 - a torch without that query: such tensors fail on reading, said there
        wrapped = False
    if wrapped:
        return "a tensor inside a torch.func transform (vmap, grad, jacrev)"
    try:  # (outside any transform: a ZeroTensor is a gradient's zeros, which clone() puts in memory)
        if obj._is_zerotensor() and obj.numel() > 0:
            return _ZERO_TENSOR
    except Exception:  # noqa: BLE001 - a torch without ZeroTensors, or a subclass that cannot say
        pass
    try:
        no_storage = obj.numel() > 0 and obj.data_ptr() == 0
    except Exception:  # noqa: BLE001 - a tensor subclass that cannot say: read as any other
        no_storage = False
    return "a tensor without storage (its data pointer is 0)" if no_storage else ""


def torch_detached(name: str, obj: Any) -> Any:
    """``obj`` itself, or for a torch tensor that requires grad: under ``torch.no_grad()`` or
    ``torch.inference_mode()`` its ``detach()`` (the same memory; torch records no graph there either, as its own
    matmul records none), else ArgumentError naming ``name``: polygemm records no autograd graph, so a result of it
    would lose the gradient silently. A dual tensor of forward-mode AD (``fwAD.make_dual``) is refused likewise
    outside ``torch.inference_mode()``, naming its primal."""
    torch = sys.modules.get("torch")
    if torch is None or not isinstance(obj, torch.Tensor):
        return obj
    if _open_level(torch) >= 0:  # (tangents exist only inside fwAD.dual_level: outside it, one attribute read)
        _dual_refusal(name, obj, torch)
    if not obj.requires_grad:
        return obj
    if torch.is_grad_enabled():
        raise ArgumentError(f"{name} requires grad, and polygemm records no autograd graph (its result would have no "
                            f"grad_fn: the gradient lost); call it under torch.no_grad() or torch.inference_mode() for "
                            f"inference, or pass {name}.detach() to compute without gradients")
    return obj.detach()


def _dual_refusal(name: str, obj: Any, torch: Any) -> None:
    """ArgumentError naming ``name`` for a torch tensor that carries a forward-mode AD tangent at the level open now
    (``fwAD.make_dual`` inside ``fwAD.dual_level()``), where torch would carry it into a product (not under
    ``torch.inference_mode()``): polygemm computes the primal's product alone, and its result would have no tangent,
    the derivative lost silently. Nothing for other tensors."""
    if torch.is_inference_mode_enabled():  # (torch's own matmul drops the tangent there too)
        return
    if _forward_ad.unpack_dual(obj).tangent is None:  # (a level is open: _forward_ad is torch's forward-AD module)
        return
    primal = f"pass its primal, torch.autograd.forward_ad.unpack_dual({name}).primal"
    if name == "out":  # written in place, its tangent would go on standing for values it no longer holds
        raise ArgumentError(f"out is a dual tensor of forward-mode AD (it carries a tangent), and polygemm writes no "
                            f"tangent (out's would no longer be the derivative of its values); {primal}, to write the "
                            f"values alone, or omit out to get a new result")
    raise ArgumentError(f"{name} is a dual tensor of forward-mode AD (it carries a tangent), and polygemm computes no "
                        f"tangent (its result would have none: the derivative lost); {primal}, to compute without it, "
                        f"or compute the product with torch.matmul, which carries it")


#: what a call reads of the imported torch, found once for it (``_found_torch``; a test may swap in a stand-in) and
#: kept in globals, the cheapest reads a call can make: its forward-AD module (``torch.autograd.forward_ad``), whose
#: ``_current_level`` is the level open now (-1: none; for a torch without forward AD, such as a stand-in, a module of
#: level -1: Python reads a module's attribute fastest), and whether its tensors carry the negative bit (torch >= 1.10)
_NO_FORWARD_AD: Any = ModuleType("no_forward_ad")
_NO_FORWARD_AD._current_level = -1
_forward_ad: Any = _NO_FORWARD_AD
_neg_bit = False
_found_torch: Any = None
#: torch.Tensor and the subclasses that are its memory as it is (a module's Parameter and Buffer), as read on the host
_plain_types: frozenset[type] = frozenset()
#: whether a torch.func transform (functionalize, vmap, grad) or torch.compile's tracing is running now
_in_transform: Callable[[], bool] = lambda: False


#: polygemm's public functions as torch.compiler.disable makes them (run as they are, Dynamo's frame evaluation off),
#: by function: made once, the first time torch.compile's tracing reaches each
_eager: dict[Any, Any] = {}


#: torch.compiler.is_compiling of the imported torch, found once (None: not looked for yet)
_is_compiling: Any = None


def dynamo_tracing() -> bool:
    """Whether torch.compile's tracing (TorchDynamo) is running the caller now: then polygemm's own code, which reads
    arrays through interfaces Dynamo cannot trace (DLPack's, CUDA's), must run as it is (:func:`eager`). Every public
    call asks: without torch imported it costs a dictionary lookup, with it one call of torch's own flag."""
    global _is_compiling
    compiling = _is_compiling
    if compiling is None:
        torch = sys.modules.get("torch")
        if torch is None:
            return False
        found = getattr(getattr(torch, "compiler", None), "is_compiling", None)
        compiling = _is_compiling = found if callable(found) else (lambda: False)  # (a torch before torch.compile)
    return bool(compiling())


def eager(fn: Any) -> Any:
    """``fn`` as torch.compile runs a function it must not trace (``torch.compiler.disable``, recursive): a graph
    break around the call, which runs on the real tensors, then tracing goes on with its result."""
    wrapped = _eager.get(fn)
    if wrapped is None:
        import torch

        wrapped = _eager[fn] = torch.compiler.disable(fn, recursive=True)
    return wrapped


def _open_level(torch: Any) -> int:
    """The forward-AD level open now: ``fwAD.dual_level()``'s, -1 outside it (or for a torch without forward AD),
    read from torch's own record of it, a module attribute (tangents exist only while a level is open)."""
    if _found_torch is not torch:
        _find(torch)
    return int(_forward_ad._current_level)


def _find(torch: Any) -> None:
    """Read what a call needs of the imported torch (see ``_found_torch``), for the calls after this one."""
    global _forward_ad, _neg_bit, _found_torch, _plain_types, _in_transform
    forward_ad = getattr(getattr(torch, "autograd", None), "forward_ad", None)
    _forward_ad = forward_ad if isinstance(getattr(forward_ad, "_current_level", None), int) else _NO_FORWARD_AD
    _neg_bit = hasattr(torch.Tensor, "is_neg")
    nn = getattr(torch, "nn", None)
    _plain_types = frozenset(t for t in (torch.Tensor, getattr(nn, "Parameter", None), getattr(nn, "Buffer", None))
                             if isinstance(t, type))
    transforms = getattr(getattr(torch, "_C", None), "_are_functorch_transforms_active", None)
    compiling = getattr(getattr(torch, "compiler", None), "is_compiling", None)
    if callable(transforms) and callable(compiling):
        _in_transform = lambda: transforms() or compiling()  # noqa: E731
    else:  # (an old torch, or a stand-in: such tensors are left to the full reading, which refuses what it must)
        _in_transform = lambda: True  # noqa: E731
    _found_torch = torch  # (last: a thread that sees this torch reads what was found for it)


def _grad_kept(obj: Any, torch: Any) -> bool:
    """Whether a tensor's autograd stands in the way of reading it: it requires grad and grad mode is on (under
    no_grad it is read as its detach() is, the same memory)."""
    return bool(obj.requires_grad) and bool(torch.is_grad_enabled())


def torch_view(obj: Any) -> tuple[tuple[Any, ...], int, int | None] | None:
    """``operand_view`` of a CUDA torch tensor from its attributes (its ``__cuda_array_interface__``
    is Python-heavy): the same key fields, pointer and stream; None for anything else, or a
    tensor the full normalization must see (one that requires grad, with grad mode on, is refused there; any, while a
    forward-AD level is open)."""
    torch = sys.modules.get("torch")
    if torch is None or type(obj) is not torch.Tensor or not obj.is_cuda or (obj.requires_grad and _grad_kept(obj, torch)) \
            or _is_neg(obj) or _is_conj(obj) or _open_level(torch) >= 0:
        return None  # (inside fwAD.dual_level the full normalization reads each tensor, and refuses a dual one)
    return _torch_one(obj, obj.device.index, torch_stream(obj))


#: torch dtypes a CPU tensor's ``numpy()`` views as they are (bfloat16, which NumPy has no dtype for, is not among them)
_HOST_VIEWED = frozenset({"torch.float16", "torch.float32", "torch.float64", "torch.complex64", "torch.complex128",
                          "torch.int8", "torch.uint8", "torch.int16", "torch.int32", "torch.int64", "torch.bool"})


def torch_host_views(a: Any, b: Any, c: Any, out: Any) -> tuple[Any, Any, Any, Any] | None:
    """NumPy views of ``a``, ``b``, ``c`` and ``out`` (the same memory) when all are plain CPU tensors whose values their
    memory holds as NumPy reads it: a dtype NumPy has, no lazy negation or conjugation, none needing autograd (grad mode
    off, or none requiring grad; no forward-AD level open), ``out`` no inference tensor outside inference mode; None
    otherwise. A NumPy call on them is planned once and cached, as the full reading of the tensors is not; the caller
    hands its result back as a tensor."""
    torch = sys.modules.get("torch")
    if torch is None:
        return None
    if _found_torch is not torch:
        _find(torch)
    plain = _plain_types
    if type(a) not in plain or a.is_cuda:  # (a CUDA call pays these reads: its own path follows)
        return None
    if type(b) not in plain or (c is not None and type(c) not in plain) or (out is not None and type(out) is not torch.Tensor):
        return None
    if _open_level(torch) >= 0 or _in_transform() or (out is not None and out.is_inference() and not torch.is_inference_mode_enabled()):
        return None  # (inside torch.func's transforms or torch.compile's tracing, numpy() may view a wrapper's own memory)
    grad, strided = torch.is_grad_enabled(), torch.strided
    views = []
    for x in (a, b, c, out):
        if x is None:
            views.append(None)
            continue
        if x.device.type != "cpu" or x.layout is not strided or str(x.dtype) not in _HOST_VIEWED or (grad and x.requires_grad) \
                or _is_neg(x) or _is_conj(x):
            return None
        try:
            views.append(x.detach().numpy())
        except Exception:  # (a tensor of no storage of its own, inside a torch.func transform: the full reading refuses it)
            return None
    return views[0], views[1], views[2], views[3]


def torch_views(a: Any, b: Any, c: Any, out: Any) -> tuple[Any, Any, Any, Any] | None:
    """``torch_view`` of ``a``, ``b``, ``c`` and ``out`` at once when all are CUDA tensors (c and
    out may be None) on one GPU, none requiring grad with grad mode on, ``out`` no inference tensor outside
    inference mode and no forward-AD level open: the device's current stream read once for all; None otherwise (each
    operand is then viewed on its own, or refused). Each tensor's attributes are read once, in one pass: a torch attribute costs 0.1-0.2 µs, and this
    runs on every call."""
    torch = sys.modules.get("torch")
    if torch is None:
        return None
    tensor = torch.Tensor
    if type(a) is not tensor or type(b) is not tensor or (c is not None and type(c) is not tensor) \
            or (out is not None and type(out) is not tensor):
        return None
    device = a.get_device()  # -1 on the CPU; an index on any other device (mps:0, xpu:0), not only CUDA
    if device < 0:
        return None
    if _found_torch is not torch:  # (once per imported torch)
        _find(torch)
    # a torch < 1.10 has no negative bit: each operand viewed on its own; inside fwAD.dual_level a dual tensor's tangent
    # is no part of its memory: each is read by the full normalization, which refuses a dual one
    if not _neg_bit or _forward_ad._current_level >= 0:
        return None
    if out is not None and out.is_inference() and not torch.is_inference_mode_enabled():
        return None  # torch allows no update of it: refused by the full normalization
    stream = _torch_current_stream(torch, device)
    va = _torch_fast(a, a, device, stream, torch, tensor)
    if va is None:
        return None
    vb = _torch_fast(b, a, device, stream, torch, tensor)
    if vb is None:
        return None
    vc = _NO_VIEW if c is None else _torch_fast(c, a, device, stream, torch, tensor)
    vo = _NO_VIEW if out is None else _torch_fast(out, a, device, stream, torch, tensor)
    if vc is None or vo is None:
        return None
    return va, vb, vc, vo


def _torch_fast(x: Any, a: Any, device: int, stream: int, torch: Any, tensor: type) -> tuple[tuple[Any, ...], int, int] | None:
    """:func:`torch_views`' view of one tensor (None: one the full normalization must see)."""
    if (x.requires_grad and torch.is_grad_enabled()) or not x.is_cuda or (x is not a and x.get_device() != device) or x.is_neg():
        return None  # (a lazy negation or conjugate is resolved, or refused as out, by the full normalization)
    view = _torch_one(x, device, stream)
    if view is None or (view[0][3][1:2] == "c" and x.is_conj()):  # (only a complex tensor carries the conjugate bit)
        return None
    return view  # type: ignore[return-value]


#: the array-interface typestr of each torch dtype polygemm reads in place ("bfloat16" for bfloat16, which the interface
#: refuses), written out: the interface itself raises for a tensor that requires grad (read under no_grad) and for
#: dtypes it has no typestr for (complex32, float8)
_TYPESTRS = {"float16": "<f2", "bfloat16": "bfloat16", "float32": "<f4", "float64": "<f8", "complex64": "<c8",
             "complex128": "<c16", "int8": "|i1", "uint8": "|u1", "int16": "<i2", "uint16": "<u2", "int32": "<i4",
             "uint32": "<u4", "int64": "<i8", "uint64": "<u8", "bool": "|b1"}


def _typestr(x: Any) -> str | None:
    """The array-interface typestr of a torch tensor's dtype, kept per dtype; None for a dtype polygemm does not read in
    place (the full normalization refuses it, naming a cast)."""
    typestr = _TYPESTRS.get(str(x.dtype).removeprefix("torch."))
    if typestr is not None:
        _TORCH_TYPESTR[x.dtype] = typestr
    return typestr


def torch_allocator(dev: Any) -> Callable[[tuple[int, ...], np.dtype], Any]:
    """``alloc(shape, dtype)``: a C-ordered tensor on torch device ``dev``."""
    import torch

    dtypes: dict[np.dtype, Any] = {}

    def torch_alloc(shape: tuple[int, ...], dtype: np.dtype) -> Any:
        tdt = dtypes.get(dtype)
        if tdt is None:
            tdt = dtypes.setdefault(dtype, getattr(torch, dtype.name))  # torch has bfloat16 too
        if shape:  # the sizes as arguments: torch parses them faster than one tuple
            return torch.empty(*shape, dtype=tdt, device=dev)
        return torch.empty((), dtype=tdt, device=dev)

    return torch_alloc


def torch_host_array(t: Any) -> np.ndarray:
    """A torch tensor's values as a NumPy array (a device tensor's copied to the host, a CPU tensor's memory shared):
    bfloat16 as ``ml_dtypes.bfloat16`` through its bits, which NumPy cannot read from a tensor itself."""
    import torch

    t = t.detach().cpu()
    if t.dtype == torch.bfloat16:
        from ..core.dtypes import bfloat16

        return t.view(torch.int16).numpy().view(bfloat16())  # type: ignore[no-any-return]
    return t.numpy()  # type: ignore[no-any-return]


def torch_from_host(arr: np.ndarray) -> Any:
    """A CPU tensor of NumPy array ``arr``'s memory (bfloat16, which no DLPack export of NumPy's carries, as its bits)."""
    import torch

    if arr.dtype.name == "bfloat16":
        return torch.from_numpy(arr.view(np.int16)).view(torch.bfloat16)
    return torch.from_numpy(arr)


def torch_wrapper(xp: Any) -> Callable[[np.ndarray], Any]:
    """A NumPy result as a CPU tensor of the same memory (``from_dlpack``; bfloat16, which NumPy
    exports through no DLPack, as the same bits viewed as int16)."""

    def to_torch(res: np.ndarray) -> Any:
        return torch_from_host(res) if res.dtype.name == "bfloat16" else xp.from_dlpack(res)

    return to_torch


def torch_whole(x: Any, shape: tuple[int, ...] | None) -> Any:
    """``x`` expanded to ``shape`` (when set) and made contiguous by torch, on its current stream."""
    return (x if shape is None else x.expand(*shape)).contiguous()
