"""The schema of ``workload.before_end``: a command run on every worker a ``lead`` before a
known end (``model/ends.py`` says which ends are known). Its own module beside
``model/desired_schema.py``, which uses it; the resolved value is ``model/ends.BeforeEndSpec``.

Nothing here does I/O.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, model_validator
from pydantic_core import PydanticCustomError

from reconciler.model import ends
from reconciler.model.desired_types import Command, Seconds
from reconciler.model.durations import duration_text


class BeforeEndModel(BaseModel):
    """``before_end: {command: ..., lead: 10m}`` in a workload block."""

    model_config = ConfigDict(extra="forbid", frozen=True, strict=False)

    command: Command = Field(
        description="Run on every worker (bash -lc string or argv) before a known end: a "
        "maintenance window, a flex-start run's end, hold_until / hold_for; once per attempt "
        "and end. Its output goes into the attempt's log."
    )
    lead: Seconds = Field(
        ends.DEFAULT_LEAD, description="How long before the end it runs (default 10m)."
    )
    timeout: Seconds | None = Field(
        None, description="Longest it may run on a worker (default: the lead)."
    )

    @model_validator(mode="after")
    def _bounds(self) -> BeforeEndModel:
        for key, value in (("lead", self.lead), ("timeout", self.timeout)):
            if value is not None and not ends.MIN_LEAD <= value <= ends.MAX_LEAD:
                raise PydanticCustomError(
                    "before_end",
                    f"{key} must be between {duration_text(ends.MIN_LEAD)} and "
                    f"{duration_text(ends.MAX_LEAD)}, got {duration_text(value)}",
                )
        return self

    def resolved(self) -> ends.BeforeEndSpec:
        command = self.command if isinstance(self.command, str) else tuple(self.command)
        timeout = self.timeout if self.timeout is not None else self.lead
        return ends.BeforeEndSpec(command=command, lead=self.lead, timeout=timeout)
