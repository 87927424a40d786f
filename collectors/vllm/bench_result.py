"""vLLM's view of the shared result import (kept for callers of the old module path)."""

from collectors.serving.results import (  # noqa: F401
    METRICS,
    layout_from_metadata,
    load_results,
    result_files,
    to_row,
)
