"""The results store: schema, migrations, spool, commit and the named queries pages use.

Nothing here imports Streamlit, torch or knows about kernels or models.
"""

__version__ = "0.1.0"

# The host an imported run is filed under when its files name none (issue 57): never the
# machine that imported them (that one is the run's `imported_on`), so that a laptop
# importing an H100 trace and a V100 log does not become one host holding both. `python -m
# collectors relabel RUN_ID --host NAME` names it afterwards.
UNKNOWN_HOST = "unknown"
RELABEL_COMMAND = "python -m collectors relabel {run_id} --host NAME"
