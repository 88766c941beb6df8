"""The control layer: the stage graph, builds, runs and serving moves, shared by the CLI, the
sensors and the tests. Public names only cross its modules; the CLI and the service stay thin.

``graph`` derives stage order and ``--through/--from`` selections from any asset graph;
``stages`` applies it to the assembled Definitions; ``runs`` runs a job of the code location;
``builds`` registers versions and runs build and serving jobs.
"""
