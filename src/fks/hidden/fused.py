"""Extraction fused into generation: the states come from generation's own prefill pass.

``fks generate --with-hidden`` wraps the Hugging Face backend in
:class:`HiddenCapturingBackend`. Each ``generate`` call arms a :class:`QueryEndCapture` on the
backend's model; the hooks read every block's output at the last real prompt token during the
prefill (the first forward call of each ``generate``) and ignore the decoding steps. The
captured rows of the prompts that belong to the hidden store (main-forward queries, plus
reverse/recognition when asked) are written through the resumable
:class:`~fks.hidden.store.HiddenWriter`, batch by batch, before the generation records are
appended.

After generation, :meth:`FusedExtraction.finish` runs :func:`~fks.hidden.extract.extract_hidden`
on the same store: it resumes, computes only rows the fused path did not write (e.g. batches
recorded by an earlier run without ``--with-hidden``), checksums and writes ``meta.json``. Rows
of a fused run are computed in generation's batches (benchmark order, generation's dtype); the
separate pass batches by length. Both use the same prompt ids, left padding and mask-following
positions, so they agree up to floating-point summation order.

Two queries with the same prompt string share one state (same ids, same state).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from fks.data.load import Benchmark
from fks.errors import FksInputError
from fks.generate.prompts import build_prompt
from fks.hidden.capture import QueryEndCapture
from fks.hidden.extract import ExtractionPlan, extract_hidden, open_writer, plan_extraction
from fks.hidden.store import HiddenWriter

__all__ = ["HiddenCapturingBackend", "FusedExtraction"]

log = logging.getLogger(__name__)


class HiddenCapturingBackend:
    """A generation backend that also stores query-end states from its prefill.

    It delegates ``generate`` and ``describe`` to ``backend`` (so the run manifest and the
    generation records are exactly those of a plain run) and writes the states of prompts found
    in ``prompt_rows`` to ``writer``.

    Args:
        backend: an in-process Hugging Face backend (has ``.model``).
        writer: the open store writer, or None when the store is already complete.
        prompt_rows: ``{prompt string: [store rows]}``.
        layers: blocks to capture.
    """

    def __init__(self, backend: Any, writer: HiddenWriter | None,
                 prompt_rows: dict[str, list[int]], layers: Sequence[int]) -> None:
        if getattr(backend, "model", None) is None:
            raise FksInputError(f"--with-hidden needs an in-process model (the hf backend); "
                                f"{getattr(backend, 'name', backend)!r} has none",
                                field="backend")
        self.backend = backend
        self.name = backend.name
        self.writer = writer
        self.prompt_rows = prompt_rows
        self.layers = list(layers)
        self.n_rows_written = 0
        # one batch at a time: the capture's hooks belong to the shared model, so a second
        # worker's prefill would be read as this one's (fks.workers)
        self.workers = 1

    def generate(self, prompts: list[str], *, max_new_tokens: int) -> list[Any]:
        """Generate as the wrapped backend does; store the prefill states of known prompts."""
        if self.writer is None or not any(p in self.prompt_rows for p in prompts):
            return self.backend.generate(prompts, max_new_tokens=max_new_tokens)
        with QueryEndCapture(self.backend.model, self.layers) as capture:
            capture.arm()
            outputs = self.backend.generate(prompts, max_new_tokens=max_new_tokens)
            try:
                states = capture.take()
            except RuntimeError:  # the backend never ran the model (e.g. it failed early)
                log.warning("no prefill states captured for a batch; the extraction pass will "
                            "compute them")
                return outputs
        rows, source = [], []
        for i, prompt in enumerate(prompts):
            for row in self.prompt_rows.get(prompt, ()):
                rows.append(row)
                source.append(i)
        index = np.asarray(source)
        self.writer.write(np.asarray(rows), {
            layer: t.float().cpu().numpy()[index] for layer, t in states.items()
        })
        self.n_rows_written += len(rows)
        return outputs

    def describe(self) -> dict[str, Any]:
        """Return the wrapped backend's identity, unchanged (plain and fused runs resume)."""
        return self.backend.describe()


class FusedExtraction:
    """Set up ``RUN/hidden/`` for a generation run and finish it afterwards.

    Usage::

        fused = FusedExtraction(run_dir, bench, hf_backend, model_name=name)
        generate_run(bench, run_dir, ..., backend=fused.backend)
        fused.finish()          # fills any missing rows, checksums, meta.json, manifest

    Args:
        run_dir: the run directory.
        benchmark: the loaded benchmark.
        backend: the in-process Hugging Face generation backend.
        model_name: recorded in ``meta.json``.
        layers, reverse, recognition, max_prompt_len, overwrite: as in
            :func:`~fks.hidden.extract.extract_hidden`.
    """

    def __init__(
        self,
        run_dir: str | Path,
        benchmark: Benchmark,
        backend: Any,
        *,
        model_name: str,
        layers: Sequence[int] | None = None,
        reverse: bool = False,
        recognition: bool = False,
        max_prompt_len: int = 192,
        overwrite: bool = False,
    ) -> None:
        self.run_dir, self.benchmark, self.model_name = Path(run_dir), benchmark, model_name
        self.options = {"reverse": reverse, "recognition": recognition,
                        "max_prompt_len": max_prompt_len}
        if getattr(backend, "model", None) is None:
            raise FksInputError("--with-hidden needs the hf backend", field="backend")
        self.plan: ExtractionPlan = plan_extraction(
            benchmark, backend.model, backend.tokenizer, model_name=model_name, layers=layers,
            **self.options)
        opened = open_writer(run_dir, self.plan, overwrite=overwrite)
        writer = opened if isinstance(opened, HiddenWriter) else None
        prompt_rows: dict[str, list[int]] = {}
        for row, query in enumerate(self.plan.queries):
            prompt_rows.setdefault(build_prompt(query), []).append(row)
        self.backend = HiddenCapturingBackend(backend, writer, prompt_rows, self.plan.layers)

    def finish(self, *, batch_size: int = 16) -> dict[str, Any]:
        """Compute the rows still missing, then checksum and write ``meta.json`` (see module)."""
        inner = self.backend.backend
        writer = self.backend.writer
        if writer is not None:
            writer.maps.clear()  # flushed after every batch; the extraction pass reopens them
        return extract_hidden(
            self.run_dir, self.benchmark, inner.model, inner.tokenizer,
            model_name=self.model_name, layers=self.plan.layers, batch_size=batch_size,
            model_info=inner.describe(),
            extra_meta={"fused_with_generation": True,
                        "rows_from_generation_prefill": self.backend.n_rows_written},
            **self.options,
        )
