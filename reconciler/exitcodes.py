"""Exit codes of the ``tpu-reconciler`` commands, in one place (values from sysexits.h).
Shared by the CLI that returns them and the systemd unit that reacts to them.

    0   success                          1   refused / failed (a plan error, a failed action)
    2   usage error, or a confirmation   75  temporary: try again (another controller runs,
        that nobody gave                     a concurrent edit kept conflicting)
    3   `service status`: not running    78  configuration that retrying cannot fix (an
                                             unusable state directory)
    69  unavailable: no machine answers   130 interrupted (Ctrl-C)
        (an emulated node, an unreachable worker, a failing gcloud look-up)
    77  not permitted: an intent edit of a slot another lab member owns (EX_NOPERM)

``plan --detailed-exitcode`` uses 2 for "there are changes", as Terraform does; ``service
status`` uses 3 for "installed but not active", as LSB init scripts and ``systemctl`` do. The
systemd unit never restarts on 2 or 78 (``RestartPreventExitStatus``). Surfaces return these
names, never bare numbers; an error carries its own (``ReconcilerError.exit_code``).
"""

from typing import Final

EX_OK: Final = 0
EX_REFUSED: Final = 1
EX_USAGE: Final = 2
EX_CONFIRM: Final = 2
EX_CHANGES: Final = 2  # plan --detailed-exitcode: the plan is not empty
EX_NOT_RUNNING: Final = 3  # service status: not installed, or not active
EX_UNAVAILABLE: Final = 69  # no machine answers: an emulated node, an unreachable worker
EX_TEMPFAIL: Final = 75
EX_NOPERM: Final = 77  # an edit of another lab member's slot, refused by the lab's policy
EX_CONFIG: Final = 78
EX_INTERRUPTED: Final = 130  # 128 + SIGINT, as a shell reports it
