"""Query-end hidden states and the J-Lens transport (spec §2.4, §7.2-7.3, §15, §18.5).

* :mod:`fks.hidden.capture` -- hooks reading block outputs at the last real prompt token
  (layer ``l`` = output of decoder block ``l``; the last block raw, before the final norm).
* :mod:`fks.hidden.extract` -- ``fks extract``: resumable extraction into ``RUN/hidden/``.
* :mod:`fks.hidden.store` -- :class:`HiddenStore` (reader, memory-mapped) and the writer.
* :mod:`fks.hidden.jlens` -- :func:`fit_jlens`, :func:`transport`, :func:`load_jlens`,
  :func:`assert_nontrivial_transport`; ``fks jlens``.

torch is imported only inside the functions that need it.
"""

from fks.hidden.jlens import assert_nontrivial_transport, fit_jlens, load_jlens, transport
from fks.hidden.store import HiddenStore

__all__ = ["HiddenStore", "fit_jlens", "load_jlens", "transport", "assert_nontrivial_transport"]
