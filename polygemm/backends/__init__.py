"""Built-in backends, one folder per vendor; each is registered as an entry point.

``polygemm.backends`` is also the public function listing every discovered backend: the
package name and the API name coincide, so this module is callable and
``polygemm.backends()`` is :func:`polygemm.registry.backends`.
"""

from __future__ import annotations

import sys
import types


class _CallablePackage(types.ModuleType):
    def __call__(self, wait=None):  # type: ignore[no-untyped-def]
        """Every discovered backend, highest priority first (see polygemm.registry.backends, whose ``wait`` it takes)."""
        from ..registry import backends

        return backends(wait)

    def __reduce__(self):  # type: ignore[no-untyped-def]
        # pickled as the module it is, by name (as pickle takes functions), since a module object does not pickle:
        # ProcessPoolExecutor.submit(polygemm.backends) or dask's client.run(polygemm.backends) is how one asks each
        # worker which backends it sees
        import importlib

        return importlib.import_module, (self.__name__,)


sys.modules[__name__].__class__ = _CallablePackage
