"""``polygemm bench --shapes real``: the GEMMs of current models at the token counts people run,
with the operand layouts their frameworks use (:func:`real_workloads` says which and why).

It is a GPU preset: about 100 products, most of them GFLOPs to TFLOPs each, which a GPU times
in a few minutes per dtype and the cpu backend would take hours over (bench refuses it on a
host backend: :func:`.bench_shapes.parse_shapes`).
"""

from __future__ import annotations

from .bench_layout import Shape

__all__ = ["TOKENS", "MAX_OUTPUT_ELEMENTS", "real_workloads", "REAL_WORKLOADS", "real_shapes"]

#: token counts T of a transformer's projections (M = T): a decode step, small and large decode
#: batches, a prompt, a long prompt or a training micro-batch, a long-context prefill
TOKENS: tuple[int, ...] = (1, 16, 128, 1024, 4096, 16384)

#: no product whose output M×N is over this many elements: 1 GiB of float16 (2 GiB in float32)
MAX_OUTPUT_ELEMENTS = 2**29


def _projections(model: str, dims: dict[str, tuple[int, int]], tokens: dict[str, tuple[int, ...]],
                 layout: str = "nt") -> list[tuple[str, Shape]]:
    """(label, shape) of each projection ``name`` -> (N, K) of ``dims`` at each of its ``tokens``."""
    return [(f"{model} {name} T={t}", Shape(t, n, k, layout)) for name, (n, k) in dims.items() for t in tokens[name]]


def real_workloads() -> list[tuple[str, Shape]]:
    """The ``real`` preset, each product with a label saying whose GEMM it is.

    Transformer projections, ``x @ W.T`` with the weight an ``nn.Linear``'s (stored [N, K],
    layout ``nt``, as Hugging Face, vLLM and PyTorch run them), M = T tokens:

    * **Llama-3 8B** (hidden 4096) at every T of :data:`TOKENS`: fused QKV (N 6144), O (4096),
      fused gate+up (28672), down (N 4096, K 14336); the LM head (N 128256) at T ≤ 1024 (the
      heads are sampled at decode and short-prompt token counts). 28 products, each projection kind at every T.
    * **Llama-3 70B** (hidden 8192): QKV (N 10240), O (8192) and down (N 8192, K 28672) at
      T ∈ {1, 16, 1024, 16384}; gate+up (N 57344) at T ∈ {1, 16, 1024, 4096} (16384 tokens
      would be a 1.75 GiB output, over the cap). 16 products.
    * **Mixtral 8x7B**: one expert's w1 (= w3, N 14336, K 4096) at T·2/8 tokens (top-2 of 8
      experts; a decode step's token reaches 2 experts, 1 each) for every T; w2 (N 4096,
      K 14336) at T ∈ {16, 128, 1024}, its other token counts being Llama-3 8B's down; the
      router (N 8, K 4096) at T ∈ {16, 1024, 16384}. 12 products.
    * **Qwen2.5-7B** (hidden 3584, not a multiple of 512): QKV (N 4608), gate+up (37888) and
      down (N 3584, K 18944) at T ∈ {1, 128, 4096}; the LM head (N 152064) at T ∈ {1, 16, 1024}.
      12 products.
    * **Llama-3 8B training**, the backward pass of a 4096-token micro-batch for QKV, gate+up
      and down: the data gradient ``dY @ W`` (W as stored: ``nn``) and the weight gradient
      ``dY.T @ X`` (``tn``, K = 4096 tokens). 6 products.

    Other workloads:

    * **BERT-base** at 8×128 and 32×512 tokens: QKV (N 2304, K 768), FFN1 (3072, 768), FFN2
      (768, 3072), with the weights as TensorFlow, Keras and Flax store them ([K, N]: ``nn``).
      6 products.
    * **ResNet-50** convolutions as implicit GEMM at batch 32 (M = 32·H·W output pixels,
      N = output channels, K = Cin·kh·kw; NHWC activations, the OIHW filter read as [N, K]:
      ``nt``): conv1 (401408×64×147), a 3×3 of each stage (100352×64×576, 25088×128×1152,
      6272×256×2304, 1568×512×4608), 1×1s (100352×256×64, 100352×64×256, 25088×512×128,
      6272×1024×256, 1568×2048×512) and the fc (32×1000×2048). 11 products.
    * **Unaligned and prime** sizes: leading dimensions not a multiple of 8 (512×1500×2816,
      DeepSpeech's 35×8457×1760, 700³), primes (997×1009×1013, 4093×4099×4091, a transposed A),
      and long K with a tiny output, the reductions over samples of ``X.T @ y`` (``tn``:
      512×2×500000, 512×16×500000, a Gram matrix 64×64×65536). 8 products.

    No product's output is over :data:`MAX_OUTPUT_ELEMENTS` (1 GiB of float16).
    """
    llama8 = {"QKV": (6144, 4096), "O": (4096, 4096), "gate+up": (28672, 4096), "down": (4096, 14336),
              "LM head": (128256, 4096)}
    out = _projections("Llama-3 8B", llama8, {**{p: TOKENS for p in llama8}, "LM head": (1, 16, 128, 1024)})
    llama70 = {"QKV": (10240, 8192), "O": (8192, 8192), "gate+up": (57344, 8192), "down": (8192, 28672)}
    wide = (1, 16, 1024, 16384)
    out += _projections("Llama-3 70B", llama70, {"QKV": wide, "O": wide, "down": wide, "gate+up": (1, 16, 1024, 4096)})
    out += [(f"Mixtral 8x7B expert w1/w3 T={t}", Shape(max(1, t * 2 // 8), 14336, 4096, "nt")) for t in TOKENS]
    out += [(f"Mixtral 8x7B expert w2 T={t}", Shape(t * 2 // 8, 4096, 14336, "nt")) for t in (16, 128, 1024)]
    out += [(f"Mixtral 8x7B router T={t}", Shape(t, 8, 4096, "nt")) for t in (16, 1024, 16384)]
    qwen = {"QKV": (4608, 3584), "gate+up": (37888, 3584), "down": (3584, 18944), "LM head": (152064, 3584)}
    few = (1, 128, 4096)
    out += _projections("Qwen2.5-7B", qwen, {"QKV": few, "gate+up": few, "down": few, "LM head": (1, 16, 1024)})
    t = 4096
    for name, (n, k) in {"QKV": (6144, 4096), "gate+up": (28672, 4096), "down": (4096, 14336)}.items():
        out.append((f"Llama-3 8B {name} data gradient dY @ W T={t}", Shape(t, k, n, "nn")))
        out.append((f"Llama-3 8B {name} weight gradient dY.T @ X T={t}", Shape(n, k, t, "tn")))
    for batch, seq in ((8, 128), (32, 512)):
        for name, (n, k) in {"QKV": (2304, 768), "FFN1": (3072, 768), "FFN2": (768, 3072)}.items():
            out.append((f"BERT-base {name} {batch}x{seq} tokens", Shape(batch * seq, n, k, "nn")))
    resnet = [("conv1 7x7", 401408, 64, 147), ("stage 1 3x3", 100352, 64, 576), ("stage 2 3x3", 25088, 128, 1152),
              ("stage 3 3x3", 6272, 256, 2304), ("stage 4 3x3", 1568, 512, 4608), ("stage 1 1x1 expand", 100352, 256, 64),
              ("stage 1 1x1 reduce", 100352, 64, 256), ("stage 2 1x1 expand", 25088, 512, 128),
              ("stage 3 1x1 expand", 6272, 1024, 256), ("stage 4 1x1 expand", 1568, 2048, 512), ("fc", 32, 1000, 2048)]
    out += [(f"ResNet-50 {name} batch 32", Shape(m, n, k, "nt")) for name, m, n, k in resnet]
    out += [("unaligned 512x1500x2816", Shape(512, 1500, 2816, "nn")),
            ("DeepSpeech output layer 35x8457x1760", Shape(35, 8457, 1760, "nt")),
            ("unaligned 700 cube", Shape(700, 700, 700, "nn")),
            ("primes 997x1009x1013", Shape(997, 1009, 1013, "nn")),
            ("primes 4093x4099x4091, A transposed", Shape(4093, 4099, 4091, "tn")),
            ("long K X.T @ y, 2 targets", Shape(512, 2, 500000, "tn")),
            ("long K X.T @ y, 16 targets", Shape(512, 16, 500000, "tn")),
            ("long K Gram matrix X.T @ X", Shape(64, 64, 65536, "tn"))]
    return out


#: the ``real`` preset with its labels, in the order bench times it
REAL_WORKLOADS: list[tuple[str, Shape]] = real_workloads()


def real_shapes() -> list[Shape]:
    """The ``real`` preset's shapes, each once (Mixtral's and Llama's may coincide)."""
    return list(dict.fromkeys(shape for _, shape in REAL_WORKLOADS))
