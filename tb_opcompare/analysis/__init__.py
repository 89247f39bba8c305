"""The maths on per-op tables, free of files and HTTP: comparing two runs, batch
sweeps, automatic pairs, and which rows a user sees (the row view)."""
