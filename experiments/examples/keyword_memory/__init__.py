"""A user-written memory system traced by memtrace-opt: see system.py and the README's guide."""
