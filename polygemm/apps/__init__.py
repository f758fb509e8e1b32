"""The applications above the polygemm library: the ``polygemm`` command line (:mod:`.cli`)
and its commands (``explain``, ``bench``, ``plot``, ``matrix``, ``compile``, ``ceiling``).

They use the library through its public names; nothing in the library imports them.
"""
