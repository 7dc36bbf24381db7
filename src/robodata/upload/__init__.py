"""Edge uploader: local first, asynchronous upload, delete only after upstream is verified.

Spool protocol (how a writer hands an episode to the uploader)
---------------------------------------------------------------
An episode is one top-level entry of the spool directory: a file (``ep_0001.mcap``,
a container) or a directory of files (a raw recording). The uploader never touches an
entry that is still being written. Two protocols, chosen by ``UploadConfig.completion``:

* ``rename`` (default): write to ``<name>.partial`` (file or directory) and ``rename`` it
  to ``<name>`` when complete. Entries ending in ``.partial`` are ignored.
* ``marker``: write ``<name>`` in place, then create the empty file ``<name>.done``.
  Entries without their ``.done`` marker are ignored.

Entries whose names start with ``.`` are never episodes (the uploader keeps its journal,
status files and trash in ``<spool>/.robodata-upload/``).

Upstream layout: a file episode becomes ``s3://<bucket>/<site_prefix>/<name>``; a directory
episode becomes ``<site_prefix>/<name>/<relative path>`` per file (its own ``_COMPLETE``
marker, if any, after all the others) plus, written last, the manifest
``<site_prefix>/<name>/_UPLOADED.json`` (files, sizes, sha256). Every object
carries ``x-amz-meta-sha256``. A local copy is deleted only after every object's size, ETag
(recomputed locally from the part MD5s) and sha256 metadata were re-read from the server
and matched, and the local files are unchanged since they were hashed.
"""

from robodata.upload.config import RetryConfig, UploadConfig
from robodata.upload.keys import UnsafeKeyError, episode_key

__all__ = ["RetryConfig", "UploadConfig", "UnsafeKeyError", "Uploader", "episode_key"]


def __getattr__(name: str):  # Uploader pulls in boto3; keep `robodata --help` light
    if name == "Uploader":
        from robodata.upload.uploader import Uploader

        return Uploader
    raise AttributeError(name)
