"""Audit: run queries and summaries, stored-run projections (cached once a run
is closed), and thread transcripts assembled from runs' inputs and projections.

Reads only: everything here is answered from the `runs` row's maintained
columns, the projection cache, or one run's events — never by scanning the
events of many runs.
"""
