"""The named queries pages and CLIs read the store with; every value is a bound parameter."""
