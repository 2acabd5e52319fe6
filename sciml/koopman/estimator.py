"""``KoopmanEstimator``: singular values, eigenvalues, timescales, eigenfunctions, forecasts and scores
from trained encoders and float64 moments over a dataset.

    estimator = KoopmanEstimator.from_checkpoint("last.ckpt", data)      # or .from_module(module).fit(data)
    estimator.singular_values, estimator.eigenvalues(), estimator.timescales(time_step=5.0)  # e.g. ps
    estimator.predict(x0, steps=10)                                      # E[x_{t + n lag} | x_t], n = 1..10
    estimator.score(data.split_dataloader("test"))                       # {"vamp2", "vampe"}

``data`` is a data module (its ``split_dataloader(split)`` is used), an iterable of ``(x, x')``
batches, or a pair of state tensors ``(X, X')`` of shape (n, d).
"""

from __future__ import annotations

from collections.abc import Callable
from functools import cached_property
from pathlib import Path

import torch
from torch import nn

from sciml.data.files import AtomicOutput
from sciml.koopman import linalg
from sciml.koopman.functional import with_constant
from sciml.koopman.moments import Moments, accumulate
from sciml.nn.checkpoint import (
    FORMAT_VERSION,
    VERSION_KEY,
    CheckpointError,
    build_module,
    format_version,
    module_spec,
    read_checkpoint,
    sub_state_dict,
)

FORMAT = "sciml.koopman_estimator/1"
Observable = Callable[[object], torch.Tensor]


class KoopmanEstimator:
    """Post-training analysis of a Koopman model with encoders f (on x) and g (on x').

    Args:
        encoder_f, encoder_g: trained feature maps (B, ...) -> (B, k - 1); the constant is prepended.
            ``encoder_g`` defaults to ``encoder_f`` (shared encoders).
        lagtime: frames between x and x'; timescales are in units of ``lagtime * time_step``. ``None``
            (default): taken from the data at :meth:`fit` (a data module's ``lagtime``; pairs given as arrays
            count as one lag). Data whose lag differs from a given ``lagtime`` is refused: timescales and
            forecasts would silently be off by the ratio.
        rank_cutoff: relative eigenvalue cutoff of the pseudo-inverses.
        rank: singular triplets kept in the Koopman matrix (eigenvalues, eigenfunctions, timescales, CCA
            forecasts); default all k. The small singular values of a non-normal operator are the noisiest
            and can move its eigenvalues: ``rank`` truncates them (``singular_values`` keeps all k).
        device: where the encoders run; the moments are float64 on the CPU.
    """

    def __init__(
        self,
        encoder_f: nn.Module,
        encoder_g: nn.Module | None = None,
        lagtime: int | None = None,
        rank_cutoff: float = 1e-7,
        device: str | torch.device = "cpu",
        rank: int | None = None,
    ) -> None:
        self.encoder_f = encoder_f.to(device).eval()
        self.encoder_g = (encoder_g if encoder_g is not None else encoder_f).to(device).eval()
        self.lagtime = None if lagtime is None else int(lagtime)
        self.rank_cutoff, self.device = rank_cutoff, torch.device(device)
        self.rank = rank
        self.moments: Moments | None = None

    # --- construction ---
    @classmethod
    def from_module(cls, module: nn.Module, **kwargs) -> KoopmanEstimator:
        """From a trained ``KoopmanModule`` (its ``encoder_f``, ``encoder_g`` and ``lagtime``, if it has one)."""
        hparams = getattr(module, "hparams", {})
        kwargs.setdefault("lagtime", hparams.get("lagtime"))
        return cls(module.encoder_f, module.encoder_g, **kwargs)

    @classmethod
    def from_checkpoint(
        cls, path: str | Path, data, observables: dict[str, Observable] | None = None, split: str = "train", **kwargs
    ) -> KoopmanEstimator:
        """Encoders from a ``KoopmanModule`` checkpoint (read with ``weights_only=True``), fitted on ``data``."""
        checkpoint = read_checkpoint(path)
        spec = checkpoint.get("sciml_koopman")
        if not spec:
            raise CheckpointError(f"checkpoint '{path}' holds no 'sciml_koopman' entry (not a Koopman model?)")
        encoders, version = {}, format_version(checkpoint, path)
        for side in ("encoder_f", "encoder_g"):
            encoders[side] = build_module(spec[side], path, version)
            encoders[side].load_state_dict(sub_state_dict(checkpoint["state_dict"], f"{side}."))
        estimator = cls(encoders["encoder_f"], encoders["encoder_g"], lagtime=spec["lagtime"], **kwargs)
        return estimator.fit(data, observables, split)

    # --- fitting ---
    @torch.no_grad()
    def features(self, x) -> tuple[torch.Tensor, torch.Tensor]:
        """(f(x), g(x)), each (B, k) float64 on the CPU, constant first."""
        x = x.to(self.device)
        f = with_constant(self.encoder_f(x)).to("cpu", torch.float64)
        g = f if self.encoder_g is self.encoder_f else with_constant(self.encoder_g(x)).to("cpu", torch.float64)
        return f, g

    def batches(self, data, split: str = "train"):
        """Batches ``(x, x')`` of ``data``: a data module's ``split`` loader, a pair of (n, d) state tensors in
        chunks, or ``data`` itself (an iterable of batches)."""
        if hasattr(data, "split_dataloader"):
            return data.split_dataloader(split)
        if isinstance(data, tuple | list) and len(data) == 2 and isinstance(data[0], torch.Tensor):
            return zip(torch.split(data[0], 4096), torch.split(data[1], 4096), strict=True)
        return data

    def _accumulate(self, data, observables: dict[str, Observable] | None, split: str) -> Moments:
        pairs = self.batches(data, split)
        if iter(pairs) is pairs:  # a one-shot iterator: keep its batches to look at the first
            pairs = list(pairs)
        observables = dict(observables or {})
        first = next(iter(pairs), None)
        if isinstance(first, tuple | list) and isinstance(first[0], torch.Tensor):
            observables.setdefault("state", lambda x: x.flatten(1))
        with torch.no_grad():
            return accumulate(pairs, self.features, _cpu(observables))

    def fit(self, data, observables: dict[str, Observable] | None = None, split: str = "train") -> KoopmanEstimator:
        """Accumulate float64 moments over ``data`` (for a data module: its ``split`` split).

        ``observables`` maps names to functions of a batch of states -> (B,) or (B, d); for array states
        the state itself is added as ``"state"``. The lag is checked against the data's (see ``lagtime``).
        """
        self.lagtime = self.lag_of(data)
        self.moments = self._accumulate(data, observables, split)
        for name in ("analysis", "truncated", "koopman_matrix", "_eig", "backward_matrix"):
            self.__dict__.pop(name, None)
        return self

    def lag_of(self, data) -> int:
        """The lag (frames) for ``data``: its ``lagtime`` attribute if it has one (refused if it differs from
        this estimator's), else this estimator's, else 1."""
        data_lag = getattr(data, "lagtime", None)
        if data_lag is None:
            return self.lagtime if self.lagtime is not None else 1
        if self.lagtime is not None and int(data_lag) != self.lagtime:
            raise ValueError(
                f"the model's lagtime is {self.lagtime} frames but the data pairs frames {data_lag} apart: timescales "
                f"and forecasts would be off by {data_lag}/{self.lagtime}; fit on data at lagtime {self.lagtime} (or "
                "build the estimator with lagtime=None to take the data's)"
            )
        return int(data_lag)

    def moment(self, key: str) -> torch.Tensor:
        """The fitted mean of one moment (``"ff_00"``, ``"gf_11"``, ``"gh_11:<observable>"``, ...)."""
        if self.moments is None:
            raise RuntimeError("the estimator is not fitted: call fit(data) first")
        return self.moments.mean(key)

    # --- spectral analysis ---
    @cached_property
    def analysis(self) -> linalg.CCA:
        return linalg.cca(self.moment("ff_00"), self.moment("gg_11"), self.moment("fg_01"), self.rank_cutoff)

    @cached_property
    def truncated(self) -> linalg.CCA:
        """The canonical analysis kept to ``rank`` singular pairs (all of them without a rank)."""
        a, r = self.analysis, self.rank
        return a if r is None else linalg.CCA(a.singular_values[:r], a.left[:r], a.right[:r])

    @property
    def singular_values(self) -> torch.Tensor:
        """(k,) Koopman singular values, descending (the first, the constant pair, is 1)."""
        return self.analysis.singular_values

    @cached_property
    def koopman_matrix(self) -> torch.Tensor:
        """(r, r) aligned Koopman matrix A_g E[g(x') f(x')^T] A_f^T (r = ``rank`` or k)."""
        return linalg.aligned_koopman_matrix(self.truncated, self.moment("gf_11"))

    @cached_property
    def _eig(self) -> tuple[torch.Tensor, torch.Tensor]:
        return linalg.sorted_eig(self.koopman_matrix)

    def eigenvalues(self) -> torch.Tensor:
        """(r,) complex eigenvalues (r = ``rank`` or k) of the aligned Koopman matrix, sorted by |lambda| descending."""
        return self._eig[0]

    def timescales(self, time_step: float = 1.0) -> torch.Tensor:
        """(r,) implied timescales -lagtime * time_step / ln|lambda| (inf for |lambda| >= 1), same order."""
        modulus = self.eigenvalues().abs()
        decaying = modulus < 1.0
        lag = self.lagtime if self.lagtime is not None else 1
        timescales = -lag * time_step / torch.log(torch.where(decaying, modulus, 0.5))
        return torch.where(decaying, timescales, torch.inf)

    def singular_functions(self, x) -> tuple[torch.Tensor, torch.Tensor]:
        """Orthonormal left and right singular functions at states ``x``: two (B, k) tensors."""
        f, g = self.features(x)
        return f @ self.analysis.left.T, g @ self.analysis.right.T

    def eigenfunctions(self, x) -> torch.Tensor:
        """(B, r) complex right eigenfunctions xi_i(x) = phi(x)^T w_i, in the order of ``eigenvalues()``."""
        phi = self.features(x)[0] @ self.truncated.aligned_left.T
        return phi.to(torch.complex128) @ self._eig[1]

    def left_eigenfunctions(self, x) -> torch.Tensor:
        """(B, r) complex left eigenfunctions eta_i(x) = psi(x)^T u_i (u_i^T K = lambda_i u_i^T), in the order of
        ``eigenvalues()``: eigenfunctions of the backward (adjoint) operator for stationary data, scaled so that
        u_i^T w_j = delta_ij with the right eigenvectors w_j."""
        psi = self.features(x)[1] @ self.truncated.aligned_right.T
        return psi.to(torch.complex128) @ torch.linalg.inv(self._eig[1]).T

    def koopman_modes(self, observable: str = "state") -> torch.Tensor:
        """(r, d) complex Koopman modes m_i of a named observable h (given to :meth:`fit`):
        E[h(x_{n lag}) | x_0] = sum_i lambda_i^(n - 1) xi_i(x_0) m_i, n >= 1, with xi = :meth:`eigenfunctions`
        (the same numbers as ``predict(x_0, n, observable)``)."""
        decoder = self.truncated.aligned_right @ self.moment(f"gh_11:{observable}")
        return torch.linalg.solve(self._eig[1], decoder.to(torch.complex128))

    @cached_property
    def backward_matrix(self) -> torch.Tensor:
        """(r, r) aligned matrix of the backward operator, K_b[i, j] = <phi_i, psi_j> = A_f E[f(x) g(x)^T] A_g^T:
        K* ~ sum_i psi_i ⊗ phi_i maps h to E[h(x_t) | x_{t + lag}]. For stationary data it is ~ K^T."""
        a = self.truncated
        return a.aligned_left @ self.moment("gf_00").T @ a.aligned_right.T

    def predict_backward(self, x_later, steps: int = 1, observable: str = "state") -> torch.Tensor:
        """Backward forecasts E[h(x_{-n lag}) | x_0 = x_later] for n = 1..steps: (B, steps, d) float64
        (psi(x)^T K_b^(n-1) A_f E[f h^T])."""
        state = self.features(x_later)[1] @ self.truncated.aligned_right.T
        decoder = self.truncated.aligned_left @ self.moment(f"fh_00:{observable}")
        forecasts = []
        for _ in range(steps):
            forecasts.append(state @ decoder)
            state = state @ self.backward_matrix
        return torch.stack(forecasts, dim=1)

    def edmd(self, basis: str = "f") -> torch.Tensor:
        """(k, k) EDMD matrix on the learned basis ``"f"`` or ``"g"``: M_b^+ E[b(x) b(x')^T]."""
        if basis not in ("f", "g"):
            raise ValueError(f"basis must be 'f' or 'g', got '{basis}'")
        key = "ff" if basis == "f" else "gg"
        return linalg.edmd_matrix(self.moment(f"{key}_00"), self.moment(f"{key}_01"), self.rank_cutoff)

    # --- forecasting ---
    def predict(self, x0, steps: int = 1, observable: str = "state", method: str = "cca") -> torch.Tensor:
        """Forecasts E[h(x_{n lag}) | x_0] for n = 1..steps: (B, steps, d) float64.

        ``method="cca"``: phi(x_0)^T K^{n-1} A_g E[g h^T]; ``"edmd_f"``/``"edmd_g"``: b(x_0)^T K_b^n P_b with
        the least-squares decoder P_b = M_b^+ E[b h^T]. ``observable`` names one given to :meth:`fit`.
        """
        f, g = self.features(x0)
        if method == "cca":  # phi(x_0)^T K^{n-1} C_h
            state, step = f @ self.truncated.aligned_left.T, self.koopman_matrix
            decoder = self.truncated.aligned_right @ self.moment(f"gh_11:{observable}")
        elif method in ("edmd_f", "edmd_g"):  # b(x_0)^T K_b^n P_b
            basis = method[-1]
            step = self.edmd(basis)
            state = (f if basis == "f" else g) @ step
            m_b = self.moment("ff_00" if basis == "f" else "gg_00")
            decoder = linalg.sym_inverse(m_b, self.rank_cutoff) @ self.moment(f"{basis}h_00:{observable}")
        else:
            raise ValueError(f"unknown method '{method}'; choose 'cca', 'edmd_f' or 'edmd_g'")
        forecasts = []
        for _ in range(steps):
            forecasts.append(state @ decoder)
            state = state @ step
        return torch.stack(forecasts, dim=1)

    # --- scores ---
    def score(self, data, split: str = "test") -> dict[str, float]:
        """VAMP-2 and VAMP-E of held-out pairs projected on this (training) CCA."""
        held_out = self._accumulate(data, {}, split)
        return linalg.projected_vamp_scores(
            self.analysis, held_out.mean("ff_00"), held_out.mean("fg_01"), held_out.mean("gg_11"), self.rank_cutoff
        )

    def function_correlations(self) -> torch.Tensor:
        """(k,) corr(f_i(x), g_i(x')) of the learned functions as they are, without the CCA rotation:
        E[f_i g_i] / sqrt(E[f_i^2] E[g_i^2]) on the fitted pairs. Under sequential nesting each pair is the
        i-th singular pair by itself, so these follow ``singular_values`` in order."""
        cross, left, right = (self.moment(key).diagonal() for key in ("fg_01", "ff_00", "gg_11"))
        return cross / (left * right).sqrt()

    def held_out_singular_values(self, data, split: str = "test") -> torch.Tensor:
        """(k,) correlations of the training singular-function pairs on held-out pairs,
        diag(C01) / sqrt(diag(C00) diag(C11)): free of the upward bias of an in-sample CCA with many
        functions (the order is that of ``singular_values``)."""
        held_out = self._accumulate(data, {}, split)
        return linalg.held_out_correlations(
            self.analysis, held_out.mean("ff_00"), held_out.mean("fg_01"), held_out.mean("gg_11")
        )

    # --- persistence ---
    def save(self, path: str | Path, overwrite: bool = False) -> None:
        """Encoders (spec + weights), lag and moments in one file that loads with ``weights_only=True``;
        written atomically, and an existing ``path`` is refused unless ``overwrite``."""
        if self.moments is None:
            raise RuntimeError("the estimator is not fitted: nothing to save")
        with AtomicOutput(path, overwrite) as temporary:
            self._save_to(temporary)

    def _save_to(self, path: Path) -> None:
        torch.save(
            {
                "format": FORMAT,
                VERSION_KEY: FORMAT_VERSION,
                "lagtime": self.lagtime,
                "rank_cutoff": self.rank_cutoff,
                "rank": self.rank,
                "encoders": {
                    side: {"spec": module_spec(encoder), "state_dict": encoder.state_dict()}
                    for side, encoder in (("f", self.encoder_f), ("g", self.encoder_g))
                },
                "moments": self.moments.state_dict(),
            },
            path,
        )

    @classmethod
    def load(cls, path: str | Path, device: str | torch.device = "cpu") -> KoopmanEstimator:
        state = read_checkpoint(path)
        if state.get("format") != FORMAT:
            raise CheckpointError(f"file '{path}' is not a saved KoopmanEstimator (format {state.get('format')!r})")
        encoders, version = {}, format_version(state, path)
        for side, entry in state["encoders"].items():
            encoders[side] = build_module(entry["spec"], path, version)
            encoders[side].load_state_dict(entry["state_dict"])
        estimator = cls(encoders["f"], encoders["g"], state["lagtime"], state["rank_cutoff"], device, state.get("rank"))
        estimator.moments = Moments.from_state_dict(state["moments"])
        return estimator


def _cpu(observables: dict[str, Observable]) -> dict[str, Observable]:
    return {name: (lambda x, h=h: torch.as_tensor(h(x)).to("cpu", torch.float64)) for name, h in observables.items()}
