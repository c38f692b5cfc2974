"""Dynamic embedding tables: hash-table-backed, int64 keys, GPU / host / cached storage."""
