"""Bundled benchmark runners (python -m benchmarks_db.run): matmul, membw, h2d, collectives, storage."""
