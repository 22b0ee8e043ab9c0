"""Domain errors.

Every error the user can cause (a bad config, a malformed dataset, a corrupt graph file) is a
:class:`MemtraceError`: the CLI prints its one-line message and exits with ``exit_code``
instead of a traceback. The message always names *where* (file, field, item or record) and
*what* was expected.
"""

from __future__ import annotations


class MemtraceError(Exception):
    """Base class of errors caused by user input; printed as one line by the CLI."""

    exit_code: int = 1

    def one_line(self) -> str:
        """The message as a single line (newlines folded), for the CLI."""
        return " ".join(str(self).split())


class ConfigError(MemtraceError):
    """A config file is missing, unparsable, or fails validation."""

    exit_code = 2

    def __init__(self, path: str, field: str | None, message: str) -> None:
        where = f"{path}: {field}" if field else path
        super().__init__(f"config error in {where}: {message}")
        self.path, self.field, self.message = path, field, message

    def __reduce__(self) -> tuple[type, tuple[str, str | None, str]]:
        # pickled with its own arguments, so one raised in a Ray worker reaches the driver as itself
        return type(self), (self.path, self.field, self.message)


class DatasetError(MemtraceError):
    """A dataset file is missing or one of its items is malformed."""

    exit_code = 2

    def __init__(self, path: str, item: str | None, message: str) -> None:
        where = f"{path}: {item}" if item else path
        super().__init__(f"dataset error in {where}: {message}")
        self.path, self.item, self.message = path, item, message

    def __reduce__(self) -> tuple[type, tuple[str, str | None, str]]:
        return type(self), (self.path, self.item, self.message)


class GraphError(MemtraceError):
    """A graph violates the bipartite/acyclic/versioning invariants, or a file holding one is corrupt."""

    exit_code = 2


class UnknownOperationError(GraphError):
    """A graph names an operation no imported module registered: a set-up defect, never a verdict."""


class MissingOutcomeError(GraphError):
    """A graph holds no judged outcome for a question: no answer, no judgement, or no readable score in it.

    One error for every reader (see :mod:`memtrace_opt.graph.outcome`), so a missing outcome reads the
    same wherever it is met; ``missing`` says what was absent, for callers that record it as a reason.
    """

    def __init__(self, graph: str, qa_id: str, missing: str) -> None:
        super().__init__(f"{graph} has no judged outcome for question {qa_id!r}: {missing}")
        self.graph, self.qa_id, self.missing = graph, qa_id, missing

    def __reduce__(self) -> tuple[type, tuple[str, str, str]]:
        return type(self), (self.graph, self.qa_id, self.missing)


class LMError(MemtraceError):
    """A language model could not be built or called (missing key, bad model name, corrupt weights)."""

    exit_code = 3
