from reconciler.adapters.gcloud_stderr import message

CRASH = """\
ERROR: gcloud crashed (ConnectionError): HTTPSConnectionPool(host='oslogin.googleapis.com', \
port=443): Max retries exceeded (Caused by NameResolutionError("Failed to resolve"))

If you would like to report this issue, please run the following command:
  gcloud feedback

To check gcloud for common problems, please run the following command:
  gcloud info --run-diagnostics
"""


def test_keeps_the_cause_and_drops_the_boilerplate() -> None:
    text = message(CRASH)
    assert text.startswith("ERROR: gcloud crashed (ConnectionError)")
    assert "NameResolutionError" in text
    assert "feedback" not in text and "diagnostics" not in text
    assert "\n" not in text


def test_a_multi_line_error_paragraph_is_kept_whole() -> None:
    stderr = "WARNING: something\nERROR: (gcloud.x) PERMISSION_DENIED: no\n- '@type': detail\n"
    assert message(stderr) == "ERROR: (gcloud.x) PERMISSION_DENIED: no - '@type': detail"


def test_without_an_error_line_the_text_that_is_not_boilerplate_stays() -> None:
    assert message("Traceback: boom\n\nIf you would like to report this issue, x\n") == (
        "Traceback: boom"
    )
    assert message("") == ""


def test_long_text_is_cut_with_an_ellipsis() -> None:
    text = message("ERROR: " + "x" * 1000, limit=50)
    assert len(text) == 50 and text.endswith("...")


def test_an_objects_address_is_dropped_so_the_same_failure_reads_the_same() -> None:
    stderr = (
        'ERROR: gcloud crashed (ConnectionError): (Caused by NameResolutionError("<urllib3.'
        "connection.HTTPSConnection object at 0x7f01ab845af0>: Failed to resolve 'x'\"))\n"
    )
    assert message(stderr) == (
        'ERROR: gcloud crashed (ConnectionError): (Caused by NameResolutionError("Failed to '
        "resolve 'x'\"))"
    )


NOT_LOGGED_IN = """\
ERROR: (gcloud.config.config-helper) You do not currently have an active account selected.
Please run:

  $ gcloud auth login

to obtain new credentials.

If you have already logged in with a different account, run:

  $ gcloud config set account ACCOUNT

to select an already authenticated account to use.
"""


def test_advice_that_introduces_a_command_is_kept_whole() -> None:
    assert message(NOT_LOGGED_IN) == (
        "ERROR: (gcloud.config.config-helper) You do not currently have an active account "
        "selected. Please run: `gcloud auth login` to obtain new credentials."
    )
