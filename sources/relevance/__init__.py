"""The relevance model: one calibrated scale, `qpp x band`.

A task's profile against the namespace's term statistics (`_relevance`), the namespace's
reference for the task (its best evidence, `_reference`), the gate (`qpp`, `_gate`) and the
evidence band (`_gate`, `_batch`), the per-request scorer every source shares (`_scorer`), their
fitted constants (`_calibration_constants`, written by `benchmarks/fit_calibration.py`), how
close a task comes to small talk (`_offtopic`) and a conversation turn read in its context
(`_turn_context`).

It reads through storage (`sources.storage`) and imports no source.
"""
