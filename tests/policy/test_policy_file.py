"""The policy file, its loader, dtype ordering and the one checker."""

from __future__ import annotations

from pathlib import Path

import pytest

from planner.policy.check import (
    DEFAULT_POLICY,
    RULE_KINDS,
    PolicyError,
    check_precision,
    load_policy,
    parse_policy,
)
from planner.specs.precision import (
    UNCHANGED,
    Precision,
    UnknownDtype,
    compare_dtypes,
    normalize_dtype,
)

W4A16 = Precision("int4", "bf16", "bf16", "bf16")
FP8_BLOCK = Precision("fp8_e4m3", "bf16", "bf16", "bf16", dispatch="fp8_e4m3")


def test_default_policy_is_versioned_and_every_rule_is_complete() -> None:
    policy = load_policy()
    assert policy.name == "full-precision"
    assert policy.version.count(".") == 2
    assert Path(policy.path) == DEFAULT_POLICY
    ids = [r.id for r in policy.rules]
    assert ids == ["weights-native", "activations-native", "kv-cache-native",
                   "communication-native", "dispatch-native"]  # fmt: skip
    for rule in policy.rules:
        assert rule.kind in RULE_KINDS
        assert rule.sentence.endswith(".") and rule.sentence.count(". ") == 0
        assert len(rule.rationale) > 40


@pytest.mark.parametrize(
    "name,canonical",
    [("bfloat16", "bf16"), ("torch.bfloat16", "bf16"), ("half", "fp16"), ("float", "fp32"),
     ("fp8", "fp8_e4m3"), ("e4m3", "fp8_e4m3"), ("float8_e4m3fn", "fp8_e4m3"),
     ("f8e5m2", "fp8_e5m2"), ("fp8_ds_mla", "fp8_e4m3"), ("NVFP4", "nvfp4"), ("int4", "int4"),
     ("int8_per_token_head", "int8"), ("mxfp4", "mxfp4")],
)  # fmt: skip
def test_normalize_dtype(name: str, canonical: str) -> None:
    assert normalize_dtype(name) == canonical


def test_dtype_order() -> None:
    assert compare_dtypes("fp32", "bf16") == 1
    assert compare_dtypes("bf16", "fp16") == 0
    assert compare_dtypes("fp8", "int8") == 0
    assert compare_dtypes("e5m2", "bf16") == -1
    assert compare_dtypes("int4", "fp8") == -1
    assert compare_dtypes("nvfp4", "mxfp4") == 0
    for bad in ("auto", "uint8", "banana"):
        with pytest.raises(UnknownDtype):
            normalize_dtype(bad)


def test_checker_flags_each_downcast_component() -> None:
    policy = load_policy()
    used = UNCHANGED.with_(activations="fp8", kv_cache="fp8_e5m2", dispatch="fp8")
    got = {v.rule_id: v.detail for v in check_precision(W4A16, used, policy)}
    assert got == {
        "activations-native": "activations: fp8_e4m3 used, checkpoint ships bf16",
        "kv-cache-native": "kv_cache: fp8_e5m2 used, checkpoint ships bf16",
        "dispatch-native": "dispatch: fp8_e4m3 used, checkpoint ships bf16",
    }
    assert check_precision(W4A16, W4A16, policy) == []
    # Upcasting is never a violation.
    assert check_precision(W4A16, UNCHANGED.with_(communication="fp32"), policy) == []


def test_fp8_dispatch_is_native_for_fp8_block_checkpoints() -> None:
    policy = load_policy()
    assert check_precision(FP8_BLOCK, UNCHANGED.with_(dispatch="fp8_e4m3"), policy) == []
    bad = check_precision(FP8_BLOCK, UNCHANGED.with_(communication="fp8", dispatch="fp8"), policy)
    assert [v.rule_id for v in bad] == ["communication-native"]
    # A full used Precision without a dispatch field: dispatch follows communication (bf16).
    assert check_precision(FP8_BLOCK, Precision("fp8", "bf16", "bf16", "bf16"), policy) == []


def test_no_cast_vs_keep_native(tmp_path: Path) -> None:
    strict = load_policy()
    bf16_to_fp16 = UNCHANGED.with_(communication="fp16", dispatch="bf16")
    native = Precision("bf16", "bf16", "bf16", "bf16")
    assert [v.rule_id for v in check_precision(native, bf16_to_fp16, strict)] == [
        "communication-native"
    ]
    relaxed = tmp_path / "relaxed.toml"
    relaxed.write_text(
        'name = "relaxed"\nversion = "0.1.0"\n[[rule]]\nid = "comm"\nkind = "keep_native"\n'
        'component = "communication"\nsentence = "No quantized collectives."\n'
        'rationale = "FP16 and BF16 sums are both 16-bit; only 8-bit and below is lossy here."\n'
    )
    policy = load_policy(relaxed)
    assert (policy.name, policy.version, len(policy.rules)) == ("relaxed", "0.1.0", 1)
    assert check_precision(native, bf16_to_fp16, policy) == []
    assert [v.rule_id for v in check_precision(native, UNCHANGED.with_(
        communication="int8"), policy)] == ["comm"]  # fmt: skip
    # This policy has no KV rule: an FP8 KV cache passes it.
    assert check_precision(native, UNCHANGED.with_(kv_cache="fp8"), policy) == []


BASE = 'name = "p"\nversion = "1"\n'
RULE = ('[[rule]]\nid = "r1"\nkind = "{kind}"\ncomponent = "{component}"\n'
        'sentence = "S."\nrationale = "R."\n')  # fmt: skip


@pytest.mark.parametrize(
    "text,expected",
    [
        (BASE + RULE.format(kind="forbid_everything", component="weights"),
         "rule 'r1': unknown rule kind 'forbid_everything' (known: keep_native, no_cast)"),
        (BASE + RULE.format(kind="no_cast", component="gpu"), "rule 'r1': unknown component 'gpu'"),
        (BASE, "no [[rule]] tables"),
        ('version = "1"\n' + RULE.format(kind="no_cast", component="weights"),
         "missing or empty top-level 'name'"),
        (BASE + "[[rule]\n", "not valid TOML"),
        (BASE + RULE.format(kind="no_cast", component="weights") * 2, "rule 'r1': duplicate id"),
        (BASE + RULE.format(kind="no_cast", component="weights") + 'colour = "red"\n',
         "rule 'r1': unknown key(s) colour"),
    ],
)  # fmt: skip
def test_bad_policy_files_give_one_line_naming_file_and_rule(
    tmp_path: Path, text: str, expected: str
) -> None:
    path = tmp_path / "mine.toml"
    path.write_text(text)
    with pytest.raises(PolicyError) as err:
        load_policy(path)
    message = str(err.value)
    assert message.startswith(f"{path}: ") and expected in message
    assert "\n" not in message


def test_unreadable_policy_file(tmp_path: Path) -> None:
    with pytest.raises(PolicyError, match="cannot read policy file"):
        load_policy(tmp_path / "absent.toml")
    with pytest.raises(PolicyError, match="<x>: not valid TOML"):
        parse_policy("= =", "<x>")
