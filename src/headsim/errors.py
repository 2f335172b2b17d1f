"""One error type for every problem a user can fix.

Every check on user input raises :class:`HeadsimError` with the problem and the fix; the CLI prints
it as one line and exits with code 2, the server turns it into a JSON error. Nothing deeper (a
torch or transformers traceback) should ever reach a user for bad input.
"""

from __future__ import annotations


class HeadsimError(ValueError):
    """A problem in the user's input, with the fix.

    Args:
        problem: what is wrong, naming the offending value.
        fix: what to do instead.
        status: HTTP status the explorer answers with (422 for bad values, 404 for unknown names,
            413 for oversize input).
    """

    def __init__(self, problem: str, fix: str = "", *, status: int = 422) -> None:
        self.problem = problem
        self.fix = fix
        self.status = status
        super().__init__(f"{problem}" + (f" — {fix}" if fix else ""))


def require(condition: bool, problem: str, fix: str = "", *, status: int = 422) -> None:
    """Raise :class:`HeadsimError` unless ``condition`` holds."""
    if not condition:
        raise HeadsimError(problem, fix, status=status)
