"""Fast acceptors: optimised equivalents of the models, beside the judges that use them to check long traces quickly.

Each module here gives the same verdicts as its model in kipcheck.model (the
same Violation clauses, the same Ruled answers) with data structures tuned for
speed. They are trusted only because they are diffed against the models: a
differential test per module drives both over generated traces and demands
identical verdicts, and `kipcheck check --reference` judges with the model
itself. They import kipcheck.model only (Violation, Ruled, constants), so a
judge that uses one loads nothing more.
"""
