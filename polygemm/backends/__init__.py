"""Built-in backends, one folder per vendor; each is registered as an entry point.

``polygemm.backends`` is also the public function listing every discovered backend: the
package name and the API name coincide, so this module is callable and
``polygemm.backends()`` is :func:`polygemm.registry.backends`.
"""

from __future__ import annotations

import sys
import types


class _CallablePackage(types.ModuleType):
    def __call__(self):  # type: ignore[no-untyped-def]
        """Every discovered backend, highest priority first (see polygemm.registry.backends)."""
        from ..registry import backends

        return backends()

    def __reduce__(self):  # type: ignore[no-untyped-def]
        # pickled as the module it is, by name (as pickle takes functions): a module object pickles not at all, so
        # ProcessPoolExecutor.submit(polygemm.backends) or dask's client.run(polygemm.backends), the way to ask each
        # worker which backends it sees, failed with "cannot pickle '_CallablePackage' object"
        import importlib

        return importlib.import_module, (self.__name__,)


sys.modules[__name__].__class__ = _CallablePackage
