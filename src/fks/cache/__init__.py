"""What fks keeps under its cache folder, and ``fks cache list``.

The cache is ``$FKS_CACHE``, else ``$XDG_CACHE_HOME/fks`` (``~/.cache/fks``), with one
sub-folder per kind:

* ``gguf/<model>-<sha256>/``: a GGUF dequantized into a safetensors checkpoint
  (:mod:`fks.generate.gguf`);
* ``demo_model/<key>/``: the trained demo model (:mod:`fks.demo.model`);
* ``benchmarks/<repo>/``: a benchmark materialised from the Hugging Face hub
  (:mod:`fks.data.load`);
* ``reference/<model>-<key>/``: a model's reference pool over a parent benchmark, reused by
  later runs with the same key (:mod:`fks.hidden.pool_cache`).

Every folder is written under a temporary ``.tmp-*`` name and renamed when whole; those (and
any other dot-named entry) are not listed.
"""

from fks.cache._list import CacheEntry, format_size, list_cache

__all__ = ["CacheEntry", "list_cache", "format_size"]
