"""Ready configs. The ones that run on the bundled mini data install as ``memtrace_opt.example_configs``.

This file makes the folder a regular package, so that ``importlib.resources`` finds it both in the wheel
and in an editable install (whose finder cannot map a data-only namespace folder under a regular package);
``memtrace-opt init`` reads the configs from it (memtrace_opt/examples.py).
"""
