"""What the lint detectors share: a finding and the per-file detection state.

planner/policy/lint_rules.py (vLLM and common flags) and planner/policy/lint_sglang.py (SGLang-only flags)
both record findings through :class:`Detect`; it lives here so neither imports the other's
types.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from planner.policy.check import Policy, check_precision
from planner.specs.precision import UNCHANGED, Precision

# When no native precision is given: the model dtype is taken as BF16 and the checkpoint as
# shipping no KV quantization (true of most checkpoints); weights stay unknown.
ASSUMED_NATIVE = Precision("", "bf16", "bf16", "bf16", "bf16")
ASSUMED_NOTE = " (assuming BF16 model dtype and no shipped KV quantization; give --model-config or --native to check)"


@dataclass(frozen=True)
class Finding:
    level: str  # "violation" | "review" | "note"
    rule_id: str  # policy rule id ("" for notes not tied to a rule)
    line: int
    where: str  # the flag or assignment as written
    sentence: str
    detail: str
    file: str = ""


@dataclass
class Detect:
    policy: Policy
    native: Precision | None
    file: str
    findings: list[Finding] = field(default_factory=list)
    cur_file: str = ""  # set while checking settings read from another file (--env-file)

    @property
    def nat(self) -> Precision:
        return self.native or ASSUMED_NATIVE

    def add(self, level: str, rule_id: str, line: int, where: str, sentence: str, detail: str,
            file: str = "") -> None:  # fmt: skip
        self.findings.append(Finding(level, rule_id, line, where, sentence, detail,
                                     file or self.cur_file or self.file))  # fmt: skip

    def check(self, component: str, dtype: str, line: int, where: str, why: str = "") -> None:
        """Run the policy checker on one changed component; record each violation."""
        changes = {component: dtype}
        if component == "communication":
            changes["dispatch"] = self.nat.get("dispatch")  # combine/AllReduce only
        for v in check_precision(self.nat, UNCHANGED.with_(**changes), self.policy):
            assumed = "" if self.native else ASSUMED_NOTE
            detail = f"{why}{'; ' if why else ''}{v.detail}{assumed}"
            self.add("violation", v.rule_id, line, where, v.sentence, detail)

    def always(self, component: str, line: int, where: str, why: str) -> None:
        """A setting the policy checklist names as a downcast whatever the checkpoint."""
        for rule in self.policy.rules_for(component):
            self.add("violation", rule.id, line, where, rule.sentence, why)

    def review(self, component: str, line: int, where: str, why: str) -> None:
        rules = self.policy.rules_for(component)
        if rules:
            self.add("review", rules[0].id, line, where, "Needs review: " + rules[0].sentence, why)
