"""Fast acceptors: optimised equivalents of the models, used by the judges to check long traces quickly.

Each module here gives the same verdicts as its model in kipcheck.model (the
same Violation clauses, the same Ruled answers) with data structures tuned for
speed. They are trusted only because they are diffed against the models: a
differential test per module drives both over generated traces and demands
identical verdicts, and `kipcheck check --reference` judges with the model
itself. They may import kipcheck.model (Violation, Ruled, constants), never
kipcheck.oracle.
"""
