"""Engines: shared, per-run machinery that several metrics read, one module per engine.

An engine runs the expensive part once for every metric of a run that needs it: the
likelihood engine (``likelihood``) plans each distinct LM pass once, the NLI engine (``nli``)
classifies each (premise, hypothesis) pair once, the QA engine (``qa``) generates and answers
each summary's questions once. ``spans`` holds the span helpers the QA engine and the
structure metrics share. Engines sit below ``faithgate.metrics`` and above
``faithgate.backends``: they call the task interfaces, never a metric, and reach the run's
models through the small ``EngineContext`` protocol that ``ScoringContext`` satisfies.
"""
