"""Store upkeep verbs: flush, doctor, check, compact, migrate, export and import."""
