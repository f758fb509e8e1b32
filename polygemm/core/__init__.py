"""The library's core: what every call is made of, below the backends and the public API.

Modules by purpose (each imports only modules listed before it, and ``polygemm.errors`` and
``polygemm.interop``): ``text`` (quoting values in messages), ``dtypes`` (the dtype catalogue),
``env`` (on/off environment variables), ``scalars`` (alpha and beta), ``hints`` (how to cast),
``layout`` (memory order of matrices), ``hostcopy`` (host conversions), ``operand`` (one
operand and its memory), ``problem`` (GemmProblem and Call), ``read`` (user objects into
operands), ``normalize`` (gemm's arguments into one problem), ``views`` (what a repeated call
reads), ``vectors`` (matmul's vectors), ``arguments`` (other libraries' spellings).
This package imports none of them itself, so that importing one costs only its own imports.
"""
