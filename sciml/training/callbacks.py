"""Callbacks used by the configs."""

from __future__ import annotations

import lightning as L


class FinalMetrics(L.Callback):
    """At the end of ``fit``, print the last validation metrics, one per line (e.g. ``val/force_mae``)."""

    def on_fit_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        if not trainer.is_global_zero:
            return
        metrics = {k: float(v) for k, v in trainer.callback_metrics.items() if k.startswith("val/")}
        print("final validation metrics:")
        for name, value in sorted(metrics.items()):
            print(f"  {name} = {value:.6g}")
