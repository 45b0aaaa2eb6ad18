"""The judge's temporary folders are process-owned (:func:`owned_tempdir`): defined in
``tempdirs``, which every layer shares, and re-exported here."""

from tempdirs import alive, owned_tempdir, remove_orphans

__all__ = ["alive", "owned_tempdir", "remove_orphans"]
