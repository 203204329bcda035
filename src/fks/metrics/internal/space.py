"""The representation pipeline of ISS and KTS for one layer (spec §7.2-7.6), vectorised.

For the ``n`` main-forward queries of one model and one layer (rows of the hidden store):

1. **transport** (§7.3): ``z = J h`` (or ``z = h`` for Raw-ISS);
2. **residualisation** (§7.4): ``z_bar = z - mu_{r(q)} - mu_{t(q)} + mu`` with the relation
   means, condition-family means and grand mean fitted once over *all* main queries;
3. **whitening** (§7.5): ``z_tilde = W^T z_bar`` from the covariance of ``z_bar`` over all
   main queries (never per family): PCA whitening to ``k = min(pca_max_dim, d)`` components,
   or the shrinkage inverse square root ``((1 - a) Sigma + a tr(Sigma)/d I)^(-1/2)``;
4. **L2 normalisation**: ``z_hat = z_tilde / max(||z_tilde||, eps)``;
5. **family centroids** (§7.6): ``v_{f,t} = Normalize(mean_{q in Q_{f,t}} z_hat_q)``.

Steps 1-3 are linear, so they are composed into one ``(d, k)`` matrix applied to the
residualised *untransported* states: ``z_bar = J h_bar`` (means commute with ``J``), and
``Cov(z_bar) = J Cov(h_bar) J^T``, so ``z_tilde = h_bar (J^T W)``. This never forms the
``(n, d)`` transported array and costs one ``(d, d)`` covariance, two ``d^3`` products and one
``(n, d) x (d, k)`` projection per layer. PCA is exact (LAPACK ``evr``: the top ``k``
eigenpairs of the ``d x d`` covariance), hence deterministic -- the configured seed is
recorded but not needed (a seeded randomized solver was measured slower here: its QR steps
cost more than the tridiagonal reduction at d = 2304). Components whose variance is at most
``EIG_RTOL`` times the largest are dropped (numerically zero: rank-deficient data). The
arithmetic follows the input dtype (float32 in production, float64 in tests).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import scipy.linalg
import scipy.sparse

from fks.configs import WhiteningConfig

__all__ = [
    "EIG_RTOL",
    "Design",
    "Residualizer",
    "Whitening",
    "fit_residualizer",
    "fit_whitening",
    "project_normalize",
    "centroid_matrix",
    "family_centroids",
    "embed",
]

#: eigenvalues at most this fraction of the largest are treated as zero (rank deficiency)
EIG_RTOL = 1e-10
_CHUNK = 4096


@dataclass(frozen=True)
class Design:
    """Model-independent structure of the main queries (from the benchmark and store index).

    Shapes: ``n`` main queries, ``F`` facts, ``R`` relations, ``T`` centroid families.

    Attributes:
        rows: ``(n,)`` store rows of the main queries.
        query_ids: ``(n,)`` their ids.
        fact: ``(n,)`` index into ``fact_ids``.
        relation: ``(n,)`` index into ``relations`` (residualisation).
        family: ``(n,)`` index into ``all_families`` (every main-forward family present;
            residualisation is fitted over all main queries).
        fact_ids: ``(F,)`` fact ids, benchmark order.
        fact_relation: ``(F,)`` index into ``relations``.
        copy: ``(F,)`` ``answer_in_subject_surface``.
        relations, all_families: code tables.
        families: the centroid families (a subset of ``all_families``, canonical order).
    """

    rows: np.ndarray
    query_ids: np.ndarray
    fact: np.ndarray
    relation: np.ndarray
    family: np.ndarray
    fact_ids: np.ndarray
    fact_relation: np.ndarray
    copy: np.ndarray
    relations: tuple[str, ...]
    all_families: tuple[str, ...]
    families: tuple[str, ...]
    counts: np.ndarray = field(init=False, repr=False)

    def __post_init__(self) -> None:
        counts = np.zeros((len(self.fact_ids), len(self.families)), dtype=np.int64)
        in_c, code = self.centroid_codes()
        np.add.at(counts, (self.fact[in_c], code[in_c]), 1)
        object.__setattr__(self, "counts", counts)

    @property
    def n(self) -> int:
        """Main queries."""
        return len(self.rows)

    @property
    def has(self) -> np.ndarray:
        """``(F, T)`` bool: the fact has at least one query of the family (``f in D_t``)."""
        return self.counts > 0

    def centroid_codes(self) -> tuple[np.ndarray, np.ndarray]:
        """Return ``(in_centroid (n,) bool, code (n,) int)``, the centroid family codes.

        ``code`` is the query's index in ``families``, meaningful only where ``in_centroid``.
        """
        lookup = np.array([self.families.index(f) if f in self.families else 0
                           for f in self.all_families], dtype=np.int64)
        member = np.array([f in self.families for f in self.all_families], dtype=bool)
        return member[self.family], lookup[self.family]

    def with_relation(self, relation: np.ndarray) -> Design:
        """Return the same design with other residualisation relation codes.

        §18.4 uses one code for all queries: no relation-mean removal.
        """
        return Design(self.rows, self.query_ids, self.fact, relation, self.family,
                      self.fact_ids, self.fact_relation, self.copy, self.relations,
                      self.all_families, self.families)

    def with_family(self, family: np.ndarray) -> Design:
        """Return the same design with other family codes (the label-shuffle check, §18.3)."""
        return Design(self.rows, self.query_ids, self.fact, self.relation, family,
                      self.fact_ids, self.fact_relation, self.copy, self.relations,
                      self.all_families, self.families)


# --------------------------------------------------------------------- residualisation
@dataclass(frozen=True)
class Residualizer:
    """The fitted main effects of §7.4: ``mu (d,)``, ``mu_rel (R, d)``, ``mu_fam (T_all, d)``."""

    mu: np.ndarray
    mu_rel: np.ndarray
    mu_fam: np.ndarray

    def apply_(self, x: np.ndarray, relation: np.ndarray, family: np.ndarray) -> np.ndarray:
        """Subtract the main effects from ``x (n, d)`` in place: ``x - mu_r - mu_t + mu``."""
        mu = self.mu.astype(x.dtype)
        mu_rel = self.mu_rel.astype(x.dtype)
        mu_fam = self.mu_fam.astype(x.dtype)
        for s in range(0, len(x), _CHUNK):
            e = s + _CHUNK
            x[s:e] -= mu_rel[relation[s:e]] + mu_fam[family[s:e]] - mu
        return x


def _group_means(x: np.ndarray, codes: np.ndarray, n_groups: int) -> np.ndarray:
    """``(n_groups, d)`` float64 means of the rows of ``x`` per code (sparse indicator product)."""
    n = len(codes)
    counts = np.bincount(codes, minlength=n_groups).astype(np.float64)
    weights = 1.0 / np.maximum(counts, 1.0)
    ind = scipy.sparse.csr_matrix((weights[codes], (codes, np.arange(n))), shape=(n_groups, n))
    return np.asarray(ind @ x, dtype=np.float64)


def fit_residualizer(x: np.ndarray, relation: np.ndarray, family: np.ndarray,
                     n_relations: int, n_families: int) -> Residualizer:
    """Fit §7.4's means over all rows of ``x (n, d)`` (query-weighted, as in the spec)."""
    return Residualizer(
        mu=np.asarray(x.mean(axis=0, dtype=np.float64)),
        mu_rel=_group_means(x, relation, n_relations),
        mu_fam=_group_means(x, family, n_families),
    )


# --------------------------------------------------------------------------- whitening
@dataclass(frozen=True)
class Whitening:
    """A fitted transport-and-whitening map: ``z_tilde = h_bar @ matrix``.

    Attributes:
        matrix: ``(d, k)`` in the data dtype (``J^T W``; ``W`` alone for Raw).
        method: ``pca`` or ``shrinkage``.
        eigenvalues: ``(k,)`` variances of the kept components (PCA) or of the shrunk
            covariance (shrinkage), descending.
        n_dropped: components dropped as numerically zero.
    """

    matrix: np.ndarray
    method: str
    eigenvalues: np.ndarray
    n_dropped: int

    @property
    def k(self) -> int:
        """Output dimension."""
        return int(self.matrix.shape[1])


def _covariance(xbar: np.ndarray, J: np.ndarray | None) -> np.ndarray:
    """``Cov(J h_bar) = J (h_bar^T h_bar / n) J^T`` as float64 ``(d, d)`` (``h_bar`` has mean 0)."""
    cov = (xbar.T @ xbar) / len(xbar)
    if J is not None:
        Jx = np.asarray(J, dtype=xbar.dtype)
        cov = Jx @ cov @ Jx.T
    cov = cov.astype(np.float64)
    return 0.5 * (cov + cov.T)


def fit_whitening(xbar: np.ndarray, J: np.ndarray | None, cfg: WhiteningConfig) -> Whitening:
    """Fit §7.5 on residualised states ``xbar (n, d)`` (mean 0), transported by ``J (d, d)``.

    PCA: top ``k = min(cfg.pca_max_dim, d)`` eigenpairs ``(lambda_i, u_i)`` of ``Cov(z_bar)``,
    ``W = U diag(lambda^-1/2)`` (``d x k``). Shrinkage (``a = cfg.shrinkage_lambda``):
    ``W = S^-1/2``, ``S = (1 - a) Cov + a tr(Cov)/d I`` (``d x d``, symmetric).
    """
    d = xbar.shape[1]
    cov = _covariance(xbar, J)
    if cfg.method == "pca":
        k = min(cfg.pca_max_dim, d)
        w, U = scipy.linalg.eigh(cov, subset_by_index=[d - k, d - 1], driver="evr")
    else:
        a = cfg.shrinkage_lambda
        cov = (1.0 - a) * cov + a * np.trace(cov) / d * np.eye(d)
        w, U = scipy.linalg.eigh(cov)
    w, U = w[::-1], U[:, ::-1]
    keep = w > EIG_RTOL * max(float(w[0]), 0.0) if len(w) else np.zeros(0, bool)
    w, U = w[keep], U[:, keep]
    W = U / np.sqrt(w)
    if cfg.method == "shrinkage":
        W = W @ U.T
    if J is not None:
        W = np.asarray(J, dtype=np.float64).T @ W
    return Whitening(matrix=W.astype(xbar.dtype), method=cfg.method, eigenvalues=w,
                     n_dropped=int((~keep).sum()))


def project_normalize(xbar: np.ndarray, whitening: Whitening, eps: float) -> np.ndarray:
    """``z_hat = Normalize(h_bar @ matrix)`` row-wise: ``(n, d) -> (n, k)``, unit rows."""
    q = xbar @ whitening.matrix
    norms = np.sqrt(np.einsum("ij,ij->i", q, q, dtype=np.float64))
    q /= np.maximum(norms, eps).astype(q.dtype)[:, None]
    return q


# --------------------------------------------------------------------------- centroids
def centroid_matrix(design: Design) -> scipy.sparse.csr_matrix:
    """Build the ``(F*T, n)`` sparse averaging matrix of the centroids.

    Row ``f*T + t`` holds ``1/|Q_{f,t}|`` on the queries of fact ``f`` in centroid family
    ``t`` (and nothing for other queries).
    """
    in_c, code = design.centroid_codes()
    T = len(design.families)
    group = design.fact[in_c] * T + code[in_c]
    cols = np.flatnonzero(in_c)
    counts = design.counts.reshape(-1)
    return scipy.sparse.csr_matrix(
        (1.0 / counts[group], (group, cols)), shape=(len(design.fact_ids) * T, design.n))


def family_centroids(q: np.ndarray, design: Design, eps: float,
                     averaging: scipy.sparse.csr_matrix | None = None) -> np.ndarray:
    """Compute the ``(F, T, k)`` unit centroids ``v_{f,t}`` of unit rows ``q (n, k)``.

    Averaged and normalised in float64, returned in ``q``'s dtype (float32 in production:
    the states' own precision; the scores downstream follow that dtype). Rows of absent
    (fact, family) cells are zero (mask them with ``design.has``).
    """
    A = centroid_matrix(design) if averaging is None else averaging
    C = np.asarray(A @ q, dtype=np.float64)  # averaged in float64
    norms = np.linalg.norm(C, axis=1)
    C /= np.maximum(norms, eps)[:, None]
    C[~design.has.reshape(-1)] = 0.0
    return C.reshape(len(design.fact_ids), len(design.families), -1).astype(q.dtype, copy=False)


def embed(x: np.ndarray, design: Design, J: np.ndarray | None, cfg: WhiteningConfig,
          eps: float) -> tuple[np.ndarray, Residualizer, Whitening]:
    """Run steps 1-4 for one layer: raw states ``x (n, d)`` -> unit rows ``(n, k)``.

    ``x`` is residualised **in place** (pass a copy to keep it).
    """
    res = fit_residualizer(x, design.relation, design.family, len(design.relations),
                           len(design.all_families))
    res.apply_(x, design.relation, design.family)
    wh = fit_whitening(x, J, cfg)
    return project_normalize(x, wh, eps), res, wh


def pairs_of(families: Sequence[str]) -> list[tuple[int, int]]:
    """Index pairs ``(i, j)``, ``i < j``, of ``families`` (canonical order)."""
    return [(i, j) for i in range(len(families)) for j in range(i + 1, len(families))]
