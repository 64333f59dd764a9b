"""Comparison of PER-SAC against uniform SAC: reporting (tables and plots) over several seeds.

See :mod:`comparison.runner` (the runs) and :mod:`comparison.report` (the report).
"""
