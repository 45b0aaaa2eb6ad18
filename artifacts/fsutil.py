"""Filesystem helpers of the store: open a root (local path or URI) and write a file atomically.

Atomic here means readers see the old file or the whole new one, never a prefix: the bytes go
to a hidden temp file in the destination folder (same filesystem, so the rename cannot turn into
a copy) and are renamed over the final name.
"""

from __future__ import annotations

import hashlib
import os
import uuid

import fsspec
import pyarrow as pa
import pyarrow.fs as pafs

_CHUNK = 1 << 20  # bytes per write() call of the temp file


def resolve_root(root: str) -> tuple[pafs.FileSystem, str]:
    """(filesystem, path in it) for a local folder or a pyarrow/fsspec URI."""
    if "://" not in root:
        return pafs.LocalFileSystem(), os.path.abspath(os.path.expanduser(root))
    try:
        fs, path = pafs.FileSystem.from_uri(root)
    except (pa.ArrowInvalid, ValueError):
        # A scheme pyarrow has no native driver for (memory://, many fsspec plugins).
        ffs, path = fsspec.core.url_to_fs(root)
        fs = pafs.PyFileSystem(pafs.FSSpecHandler(ffs))
    return fs, path.rstrip("/") or "/"


def sha256_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def atomic_write(fs: pafs.FileSystem, path: str, data: bytes) -> None:
    """Temp file in the same folder, then rename: readers never see a partial file."""
    folder, name = path.rsplit("/", 1)
    tmp = f"{folder}/.{name}.tmp-{uuid.uuid4().hex[:12]}"  # dot: invisible to readers
    if isinstance(fs, pafs.LocalFileSystem):
        os.makedirs(folder, exist_ok=True)
        try:
            with open(tmp, "wb") as f:
                for i in range(0, len(data), _CHUNK):
                    f.write(data[i:i + _CHUNK])
                f.flush()
                os.fsync(f.fileno())  # the rename must not overtake the data on power loss
            os.replace(tmp, path)
        except BaseException:
            if os.path.exists(tmp):
                os.remove(tmp)
            raise
        return
    fs.create_dir(folder, recursive=True)
    try:
        with fs.open_output_stream(tmp) as out:
            out.write(data)
        # On object stores there is no rename: move is copy + delete, but the final key
        # still appears only once complete, which is the property readers rely on.
        fs.move(tmp, path)
    except BaseException:
        if fs.get_file_info(tmp).type == pafs.FileType.File:
            fs.delete_file(tmp)
        raise
