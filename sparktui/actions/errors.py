"""How an action ends early: the operator said no (or read-only forbids it), or a step failed.

Below base.py and lock.py, which both raise them.
"""


class ActionRefused(Exception):
    """The operator said no, or read-only mode forbids it."""


class ActionFailed(Exception):
    pass
