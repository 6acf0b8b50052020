"""The schema of ``ssh_proxy`` (``settings``, ``slots[]``, ``generate[]``): one of ``iap``,
``jump`` or ``command``, or the strings ``iap`` and ``none``. Its own module beside
``model/desired_schema.py``, which uses it; the resolved value is ``model/ssh_proxy.SshProxy``.

Nothing here does I/O.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, model_validator
from pydantic_core import PydanticCustomError

from reconciler.model import desired_docs as doc
from reconciler.model.desired_types import JumpHostText, ProxyArgument
from reconciler.model.messages import did_you_mean
from reconciler.model.ssh_proxy import check_command


class SshProxyModel(BaseModel):
    """How SSH reaches the workers (``model/ssh_proxy.py``): at most one key; the strings
    ``iap`` and ``none`` stand for ``{iap: true}`` and ``{}`` (direct)."""

    model_config = ConfigDict(extra="forbid", frozen=True, strict=False)

    iap: bool = Field(False, description=doc.PROXY["iap"])
    jump: JumpHostText | None = Field(None, description=doc.PROXY["jump"])
    command: list[ProxyArgument] | None = Field(None, description=doc.PROXY["command"])

    @model_validator(mode="before")
    @classmethod
    def _shorthand(cls, value: object) -> object:
        if value in ("iap", "none"):
            return {"iap": True} if value == "iap" else {}
        if isinstance(value, str):
            near = did_you_mean(value, ["iap", "none"])
            hint = f" (did you mean {near!r}?)" if near else ""
            raise PydanticCustomError("ssh_proxy", f"{doc.PROXY['forms']}; got {value!r}{hint}")
        return value

    @model_validator(mode="after")
    def _one_way(self) -> SshProxyModel:
        if sum((self.iap, self.jump is not None, self.command is not None)) > 1:
            raise PydanticCustomError("ssh_proxy", "give one of iap, jump or command")
        if self.command is not None:
            try:
                check_command(self.command)
            except ValueError as e:
                raise PydanticCustomError("ssh_proxy", f"command: {e}") from None
        return self
