"""Where memories are kept: the storage engine protocol (`_engine`) and its SQLite and
PostgreSQL engines, the corpora's rows (`_entries`, `_engine_corpora`), the in-memory indexes a
turn reads (postings, vectors, the 8-bit matrix and the HNSW graph), text analysis, field
validation and the read lane's worker threads.

It imports no source and no relevance model; the sources and the relevance model read through it.
"""
