"""``python -m memtrace_opt.configdoc [--out FILE | --check FILE]``: print, write or check the reference."""

from memtrace_opt.configdoc.render import main

raise SystemExit(main())
