"""SGLang adapter: launch flags, server info, bench_serving results, metrics, profiler."""
