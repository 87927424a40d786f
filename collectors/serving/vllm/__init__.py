"""vLLM integration: live profiling (`vllm-profile`), serving benchmarks (`vllm-bench`) and
Prometheus scrapes (`vllm-metrics`).

vLLM itself is never imported: everything talks to a running server over HTTP with the
standard library, or runs the `vllm bench serve` command when it is installed.
"""
