"""The errors tree: every project exception lives in errors.py, in its drawing, with the exit
code and retry intent the commands and the controller rely on."""

from __future__ import annotations

import importlib
import pkgutil
import re

import reconciler
from reconciler import errors
from reconciler.exitcodes import EX_CONFIRM, EX_REFUSED, EX_TEMPFAIL


def _subclasses(cls: type) -> set[type]:
    found = set(cls.__subclasses__())
    for sub in list(found):
        found |= _subclasses(sub)
    return found


def test_every_project_error_is_defined_in_errors_and_drawn() -> None:
    for info in pkgutil.walk_packages(reconciler.__path__, "reconciler."):
        if info.name.endswith("__main__"):
            continue
        importlib.import_module(info.name)
    doc = errors.__doc__ or ""
    for cls in _subclasses(errors.ReconcilerError):
        if cls.__module__.startswith("tests"):
            continue
        assert cls.__module__ == "reconciler.errors", f"{cls.__module__}.{cls.__name__}"
        drawn = re.search(rf"\b{cls.__name__}\b", doc)
        assert drawn, f"{cls.__name__} is not in errors.py's drawing"


def test_errors_carry_the_exit_code_a_command_returns() -> None:
    assert errors.ReconcilerError("x").exit_code == EX_REFUSED
    assert errors.UnsafeName("x").exit_code == EX_REFUSED
    assert errors.EditConflict("x").exit_code == EX_TEMPFAIL
    assert errors.ControllerAlreadyRunning("x", pid=1).exit_code == EX_TEMPFAIL
    assert errors.NeedsConfirmation("x").exit_code == EX_CONFIRM


def test_secret_errors_keep_their_standard_library_base() -> None:
    assert isinstance(errors.SecretUnsafe("x"), PermissionError)
    assert isinstance(errors.SecretNotFound("x"), LookupError)
    assert str(errors.SecretUnsafe("secret 'a' is readable by others")) == (
        "secret 'a' is readable by others"
    )
