"""Parameter constraints for new auditors: what ``_parameter_constraints`` is declared with.

A subclass of :class:`idaudit.audits.BaseAuditor` declares one constraint per constructor
parameter; ``fit``, :func:`idaudit.audit_pairs` and :func:`idaudit.audits.check_auditor` check
them before any work, and each constraint knows values it refuses, so the contract suite tries
them all:

>>> from typing import ClassVar
>>> from idaudit.audits.constraints import NAME, Constraint, Device, Interval, RandomState
>>> constraints: ClassVar[dict[str, Constraint]] = {
...     "n_folds": Interval(2, integer=True),  # an int >= 2
...     "rng": RandomState(), "device": Device(), "name": NAME,
... }

* ``Interval``: a real (or, with ``integer=True``, an int) in a range;
* ``Positive``: a finite real > 0;
* ``Options``: one of a fixed set of strings;
* ``OptionOrPositive``: one of a set of strings, or a finite real > 0;
* ``IntegerOrOption``: an int of at least a minimum, or one of a set of strings;
* ``Boolean``: ``True`` or ``False``;
* ``RandomState``: what ``rng`` accepts (int, ``SeedSequence``, ``Generator`` or None);
* ``Device``: ``"cpu"``, ``"cuda"`` or ``"cuda:<i>"`` that can run here;
* ``NoneOr``: ``None`` or what another constraint accepts;
* ``Anything``: no check here (the rule is checked where its meaning is known);
* ``NAME``: an auditor's ``name=``, a variable prefix or None;
* ``Constraint``: the protocol they all follow (for type hints).
"""

from __future__ import annotations

from idaudit._validation import (
    Anything,
    Boolean,
    Constraint,
    Device,
    IntegerOrOption,
    Interval,
    NoneOr,
    OptionOrPositive,
    Options,
    Positive,
    RandomState,
)
from idaudit.audits._base import NAME

__all__ = [
    "NAME",
    "Anything",
    "Boolean",
    "Constraint",
    "Device",
    "IntegerOrOption",
    "Interval",
    "NoneOr",
    "OptionOrPositive",
    "Options",
    "Positive",
    "RandomState",
]
