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
cost more than the tridiagonal reduction at d = 2304). The arithmetic follows the input dtype
(float32 in production, float64 in tests).

**Numerical rank of the PCA whitening** (:func:`fit_whitening`). Whitening scales every kept
component to unit variance, so a component that holds only rounding becomes as large as a real
one. Two rules bound what is kept (``Whitening`` records both counts):

* *rank bound* (exact algebra): ``z_bar = L z`` with ``L = I - P_r - P_t + P_1`` (``P`` the
  projections on the relation, family and constant indicators of the rows actually fitted), so
  ``rank(z_bar) <= rank(L)`` (:func:`residual_rank`); at most ``min(pca_max_dim, d, rank(L))``
  components are computed. ``rank(L)`` is ``n`` minus the independent constraints: ``n -
  (R + T - 1)`` for a balanced design, *more* for an unbalanced one (SmolLM2-135M, 20 facts:
  290 rows, 20 relations, 5 families: 266 by counting groups, 270 exactly, as the float64
  spectrum confirms; components 267-270 hold 6e-7 to 4e-6 of the top variance, 20-150 times
  the float32 noise). Beyond ``rank(L)`` the float32 covariance holds only its own rounding
  (eigenvalues up to 0.72 ``u_32 lambda_1``, mostly from the float32 transport products),
  which the former rule (``EIG_RTOL`` alone, far below float32's resolution) kept: 149 pure-
  noise components of k = 419 at SmolLM2's layer 12.
* *storage-rounding floor*: component ``i`` (variance ``lambda_i``, direction ``u_i``) is
  kept only if ``lambda_i > kappa nu_i + EIG_RTOL lambda_1``. ``nu_i = u_i^T J S J^T u_i`` is
  the variance that rounding the stored states alone puts along ``u_i``: round-to-nearest in
  the store's dtype (float16, unit roundoff ``u_s = 2**-11``) errs by at most half an ulp, so
  component ``j`` gets variance at most ``S_jj = u_s**2 mean_q(h_qj**2) / 3`` (uniform error;
  raw, not centred, states: rounding scales with the stored value, mean included),
  independently per entry. ``kappa = 2 (1 + sqrt(d / rank(L)))**2``: pure noise of variance
  ``nu`` estimated from ``rank(L)`` degrees of freedom in ``d`` dimensions spreads up to the
  Marchenko-Pastur edge ``(1 + sqrt(d / r))**2 nu``, and the factor 2
  (:data:`ROUNDING_SAFETY`) keeps only components at most half rounding even there. On the
  real runs every component inside the rank bound is at least 150 times ``nu_i``, so the
  floor drops nothing there; it removes directions the states do not use (planted low-rank
  states, a constant component).

A floor at the compute dtype's resolution (``c u_c lambda_1``, Weyl's bound for a covariance
rounded in float32) was tried and rejected: it dropped 80, 51 and 25 components of Gemma 3
270M's layers 7-9 (60 facts, n = 861 > d) whose float32 eigenvalues (0.12-2 ``u_32
lambda_1``) agree with the float64 ones within a few percent -- resolved variance, not noise.
Float32 noise of the size of ``u_32 lambda_1`` appears only in an exact null space, which the
rank bound removes. ``EIG_RTOL`` stays as the last guard (float64 arithmetic, zero variance).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import scipy.linalg
import scipy.sparse
from numpy.typing import DTypeLike

from fks.configs import WhiteningConfig
from fks.hidden.store import STORE_DTYPE

__all__ = [
    "EIG_RTOL",
    "ROUNDING_SAFETY",
    "WHITENING_RULE",
    "Design",
    "Residualizer",
    "Whitening",
    "fit_residualizer",
    "residual_rank",
    "rounding_variance",
    "fit_whitening",
    "project_normalize",
    "centroid_matrix",
    "family_centroids",
    "embed",
]

#: eigenvalues at most this fraction of the largest are treated as zero (float64 arithmetic)
EIG_RTOL = 1e-10
#: kept components hold at most 1/ROUNDING_SAFETY rounding variance at the Marchenko-Pastur
#: edge (see the module docstring)
ROUNDING_SAFETY = 2.0
#: the numerical-rank rule of the PCA whitening, as the summaries write it
WHITENING_RULE = (
    "k = min(pca_max_dim, d, rank_bound) components (rank_bound: the exact rank of the "
    "relation/family residualisation of the fitted rows), less each component whose variance "
    "is at most rounding_factor x the variance that rounding the stored states "
    f"({np.dtype(STORE_DTYPE).name}, u = 2**-{-int(np.log2(np.finfo(STORE_DTYPE).eps / 2))}) "
    f"puts along it + {EIG_RTOL:g} x top_eigenvalue; "
    f"rounding_factor = {ROUNDING_SAFETY:g} (1 + sqrt(d / rank_bound))**2 (Marchenko-Pastur "
    "edge)")
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


def residual_rank(relation: np.ndarray, family: np.ndarray, n_relations: int,
                  n_families: int) -> int:
    """Return the exact rank of §7.4's residualisation operator on ``n`` rows.

    ``x_bar = L x`` with ``L = I - P_r - P_t + P_1`` (``P_r``, ``P_t``, ``P_1`` the orthogonal
    projections on the relation indicators, the family indicators and the constant of the
    rows). ``L`` is the identity on the complement of ``S = span(indicators)`` and maps ``S``
    into itself, so ``rank(L) = n - dim S + rank(L G)`` with ``G (n, R + T)`` the indicator
    matrix (``L G`` is the residualisation applied to ``G``'s columns). For a balanced design
    ``L G = 0`` and the rank is ``n - (R + T - c)`` (``c`` connected relation-family
    components); an unbalanced one removes fewer dimensions. Empty groups count for nothing.
    """
    n = len(relation)
    if n == 0:
        return 0
    rows = np.arange(n)
    G = np.zeros((n, n_relations + n_families))
    G[rows, relation] = 1.0
    G[rows, n_relations + family] = 1.0
    LG = fit_residualizer(G, relation, family, n_relations, n_families).apply_(
        G.copy(), relation, family)
    return int(n - np.linalg.matrix_rank(G) + np.linalg.matrix_rank(LG))


def rounding_variance(x: np.ndarray, storage_dtype: DTypeLike) -> np.ndarray:
    """``(d,)`` float64: the variance rounding to ``storage_dtype`` adds to each component.

    Round-to-nearest errs by at most half an ulp, i.e. a relative ``u = eps / 2`` (``2**-11``
    for float16); an error uniform on ``[-u |h|, u |h|]`` has variance ``u**2 h**2 / 3``, so the
    bound is ``u**2 mean_q(h_qj**2) / 3`` over the rows ``x (n, d)`` of *stored* (raw) values.
    """
    u = float(np.finfo(storage_dtype).eps) / 2.0
    ms = np.einsum("ij,ij->j", x, x, dtype=np.float64) / max(len(x), 1)
    return (u * u / 3.0) * ms


# --------------------------------------------------------------------------- whitening
@dataclass(frozen=True)
class Whitening:
    """A fitted transport-and-whitening map: ``z_tilde = h_bar @ matrix``.

    Attributes:
        matrix: ``(d, k)`` in the data dtype (``J^T W``; ``W`` alone for Raw).
        method: ``pca`` or ``shrinkage``.
        eigenvalues: ``(k,)`` variances of the kept components (PCA) or of the shrunk
            covariance (shrinkage), descending.
        n_dropped: components dropped, of the ``k_requested``: ``n_dropped_rank`` beyond the
            rank bound plus ``n_dropped_precision`` below the precision floor.
        k_requested: ``min(pca_max_dim, d)`` (PCA) or ``d`` (shrinkage).
        rank_bound: ``rank(L)`` of the residualisation (None: not given).
        rounding_factor: ``kappa`` of the storage-rounding floor (None: no floor applied).
    """

    matrix: np.ndarray
    method: str
    eigenvalues: np.ndarray
    n_dropped: int
    k_requested: int = 0
    rank_bound: int | None = None
    n_dropped_rank: int = 0
    n_dropped_precision: int = 0
    rounding_factor: float | None = None

    @property
    def k(self) -> int:
        """Output dimension."""
        return int(self.matrix.shape[1])

    @property
    def design_determined(self) -> bool:
        """True when PCA whitens every dimension the residualised rows can span.

        With ``k = rank(z_bar)`` the whitened rows are ``sqrt(n) U`` (``z_bar = U S V^T``), so
        their Gram is ``n`` times the projector on ``col(z_bar) = col(L)``: a function of the
        design alone (which rows share a relation or a family), whatever the states. Cosines,
        centroids, ISS and KTS of the fitted rows then say nothing about the model. It happens
        when ``rank(L) <= pca_max_dim``, i.e. when there are too few main queries for the
        spec's ``min(512, d)`` components (SmolLM2-135M on 20 facts: 290 queries, rank 270).

        The test is on the components actually *kept*, not on the design's rank alone
        (issue 27): states of lower rank than the design span a subspace of ``col(L)`` that
        depends on the states, and the floor then drops the components they leave empty, so
        ``k < rank_bound`` and the cosines do say something about the model.
        """
        return (self.method == "pca" and self.rank_bound is not None
                and self.k >= self.rank_bound)


def _covariance(xbar: np.ndarray, J: np.ndarray | None) -> np.ndarray:
    """``Cov(J h_bar) = J (h_bar^T h_bar / n) J^T`` as float64 ``(d, d)`` (``h_bar`` has mean 0)."""
    cov = (xbar.T @ xbar) / len(xbar)
    if J is not None:
        Jx = np.asarray(J, dtype=xbar.dtype)
        cov = Jx @ cov @ Jx.T
    cov = cov.astype(np.float64)
    return 0.5 * (cov + cov.T)


def fit_whitening(xbar: np.ndarray, J: np.ndarray | None, cfg: WhiteningConfig, *,
                  rank_bound: int | None = None,
                  rounding_var: np.ndarray | None = None) -> Whitening:
    """Fit §7.5 on residualised states ``xbar (n, d)`` (mean 0), transported by ``J (d, d)``.

    PCA: top ``k`` eigenpairs ``(lambda_i, u_i)`` of ``Cov(z_bar)``, ``W = U diag(lambda^-1/2)``
    (``d x k``), ``k = min(cfg.pca_max_dim, d, rank_bound)`` less the components below the
    floor ``kappa nu_i + EIG_RTOL lambda_1`` (module docstring), ``nu_i`` the variance that
    ``rounding_var (d,)`` (:func:`rounding_variance`, per raw component) puts along ``J^T u_i``;
    without ``rounding_var`` only the second term applies.
    Shrinkage (``a = cfg.shrinkage_lambda``): ``W = S^-1/2``, ``S = (1 - a) Cov + a tr(Cov)/d
    I`` (``d x d``, symmetric; full rank by construction, ``EIG_RTOL`` only).
    """
    n, d = xbar.shape
    cov = _covariance(xbar, J)
    if cfg.method == "pca":
        k_req = min(cfg.pca_max_dim, d)
        k = k_req if rank_bound is None else max(min(k_req, rank_bound), 0)
        if k:
            w, U = scipy.linalg.eigh(cov, subset_by_index=[d - k, d - 1], driver="evr")
        else:
            w, U = np.zeros(0), np.zeros((d, 0))
    else:
        k_req = k = d
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
    kappa = None
    if cfg.method == "pca" and rounding_var is not None:
        # nu_i = sum_j S_jj (J^T u_i)_j^2, and column i of W is J^T u_i / sqrt(lambda_i)
        nu = w * (np.asarray(rounding_var, np.float64) @ (W * W))
        dof = n - 1 if rank_bound is None else rank_bound
        kappa = ROUNDING_SAFETY * (1.0 + np.sqrt(d / max(dof, 1))) ** 2
        above = w > kappa * nu + EIG_RTOL * max(float(w[0]), 0.0)
        if not above.all():
            w, W = w[above], W[:, above]
    return Whitening(matrix=W.astype(xbar.dtype), method=cfg.method, eigenvalues=w,
                     n_dropped=k_req - len(w), k_requested=k_req, rank_bound=rank_bound,
                     n_dropped_rank=k_req - k, n_dropped_precision=k - len(w),
                     rounding_factor=None if kappa is None else float(kappa))


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
          eps: float, *, storage_dtype: DTypeLike | None = STORE_DTYPE
          ) -> tuple[np.ndarray, Residualizer, Whitening]:
    """Run steps 1-4 for one layer: raw states ``x (n, d)`` -> unit rows ``(n, k)``.

    ``x`` is residualised **in place** (pass a copy to keep it). The whitening's rank bound is
    the residualisation's (:func:`residual_rank` of ``design``) and its rounding floor that of
    ``storage_dtype`` (the hidden store's float16; None: no storage floor).
    """
    R, T = len(design.relations), len(design.all_families)
    rvar = None if storage_dtype is None else rounding_variance(x, storage_dtype)
    res = fit_residualizer(x, design.relation, design.family, R, T)
    res.apply_(x, design.relation, design.family)
    wh = fit_whitening(x, J, cfg, rank_bound=residual_rank(design.relation, design.family, R, T),
                       rounding_var=rvar)
    return project_normalize(x, wh, eps), res, wh


def pairs_of(families: Sequence[str]) -> list[tuple[int, int]]:
    """Index pairs ``(i, j)``, ``i < j``, of ``families`` (canonical order)."""
    return [(i, j) for i in range(len(families)) for j in range(i + 1, len(families))]
