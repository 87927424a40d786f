"""The DuckLake backend: a catalog on PostgreSQL, data files on shared or S3 storage."""
