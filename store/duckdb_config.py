"""How every DuckDB connection of the store is configured, file or lake.

Extensions come from pinned wheels only; never download or load one at run time.
"""

NO_EXTENSION_LOADING = {
    "autoinstall_known_extensions": "false",
    "autoload_known_extensions": "false",
}
