"""One measured serving result of the fixture, as the fit and its checks use it."""

from __future__ import annotations

from dataclasses import dataclass

from planner.cost.types import ServeLayout


@dataclass(frozen=True)
class Row:
    id: str
    engine: str
    model_path: str
    quant: str  # moe_quant_mode: fp8 | fp8_block | nvfp4 | int4_wo
    system: str
    layout: ServeLayout
    isl: int
    osl: int
    concurrency: int
    tpot_ms: float
    ttft_ms: float
    measured: str = ""  # the run's date, YYYY-MM-DD ("" when the source does not say)

    @property
    def key(self) -> tuple:
        return (self.engine, self.model_path, self.quant, self.system, self.layout, self.isl,
                self.osl, self.concurrency)  # fmt: skip
