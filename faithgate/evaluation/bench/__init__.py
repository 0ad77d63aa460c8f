"""``faithgate bench``: run metrics over labelled benchmark files and meta-evaluate them.

Input files are JSON Lines in the benchmark format of ``../shared/data/README.md`` (``label``,
``score``, ``pair_id``, ``role``, ``error_type``, ``origin`` per row; any JSONL or CSV file
that ``faithgate.io.load_examples`` reads works, with whatever of these fields it has).
``run.run_bench`` is the run: ``files`` finds the data files and samples their rows,
``scoring.Bench`` scores them (kept in a ``ScoreCache`` keyed by settings hash, source and
summary, so a rerun with one more metric computes only that metric; seconds per item in
``timings``), ``combination`` fits ``--combine``, ``comparisons`` tests the metrics against
each other, and ``report`` and ``plots`` show the result.
"""
