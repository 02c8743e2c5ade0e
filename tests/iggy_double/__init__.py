"""A conformance double of an Apache Iggy 0.9 server (binary protocol 0.11.0), for tests.

Not part of the streamwire package. See :mod:`tests.iggy_double.server`.
"""

from __future__ import annotations

from tests.iggy_double.server import HABITS, Habits, IggyDouble
from tests.iggy_double.state import IggyError, State
from tests.iggy_double.threaded import ThreadedIggyDouble

__all__ = ("HABITS", "Habits", "IggyDouble", "IggyError", "State", "ThreadedIggyDouble")
