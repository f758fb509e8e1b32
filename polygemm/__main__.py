"""``python -m polygemm`` runs the command-line interface (:mod:`polygemm.apps.cli`): the one
module of the package outside polygemm.apps that imports it, as the entry point."""

from .apps.cli import main

raise SystemExit(main())
