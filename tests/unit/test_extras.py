"""Optional extras: a missing one is a ConfigurationError (and an ImportError) naming the install.

The real thing, a wheel installed without extras, is tested in tests/integration/test_wheel.py.
"""

from __future__ import annotations

import pytest

from streamwire._extras import require
from streamwire.errors import ConfigurationError, MissingDependency, StreamwireError


def test_present_modules_pass() -> None:
    require("Liftbridge", "liftbridge", "json", "asyncio")


def test_a_missing_module_names_the_extra_to_install() -> None:
    with pytest.raises(MissingDependency) as caught:
        require("Liftbridge", "liftbridge", "json", "streamwire_no_such_module")
    error = caught.value
    assert str(error) == (
        "Liftbridge needs the 'liftbridge' extra (streamwire_no_such_module is not installed): "
        "pip install 'streamwire[liftbridge]'"
    )
    assert (error.extra, error.missing) == ("liftbridge", "streamwire_no_such_module")
    assert isinstance(error, ConfigurationError)
    assert isinstance(error, StreamwireError)
    assert isinstance(error, ImportError)


def test_a_missing_parent_package_is_missing_too() -> None:
    with pytest.raises(MissingDependency, match=r"streamwire_no_such_pkg\.sub"):
        require("Spark", "spark", "streamwire_no_such_pkg.sub")
