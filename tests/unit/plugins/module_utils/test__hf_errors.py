"""_hf_errors: huggingface_hub's exceptions as one line for the operator, and which of them end
a fetch early. The exceptions are the client's own classes, raised as the client raises them."""

import errno

from huggingface_hub import errors

from ansible_collections.dgx_spark.glm53.plugins.module_utils import _hf_errors as he

REPO = "org/model"
SHA = "5ab363a8dcf6405955fd5f99671e01a1c9fb124b"
ENDPOINT = "https://hub.example"


class Response(object):
    """What the client's HTTP errors carry: the status, and a request for their message."""

    def __init__(self, status_code):
        self.status_code = status_code
        self.headers = {}
        self.request = None
        self.url = ENDPOINT


def message(exc, token_given=False, filename=None, timeout=None):
    return he.hub_error_message(exc, REPO, SHA, ENDPOINT, token_given, filename, timeout)


def test_the_token_is_masked_in_text():
    assert he.scrub("Bearer hf_secret in a header", "hf_secret") == "Bearer ******** in a header"
    assert he.scrub("nothing", None) == "nothing"


def test_a_gated_repo_names_the_token_setting():
    exc = errors.GatedRepoError("gated", response=Response(401))
    assert message(exc) == "'org/model' is gated: accept its terms on the hub and pass a token (hf_weights_token)"
    assert message(exc, token_given=True).startswith("'org/model' is gated and the token given has no access to it")
    assert he.is_definite(exc)


def test_a_missing_repo_or_revision_names_the_input_to_fix():
    assert message(errors.RepositoryNotFoundError("nope", response=Response(404))) == (
        "the hub answered RepoNotFound for 'org/model' at revision '%s' (endpoint %s): check hf_weights repo_id "
        "(a private repo also needs a token: hf_weights_token)" % (SHA, ENDPOINT))
    assert "check hf_weights revision" in message(errors.RevisionNotFoundError("nope", response=Response(404)))


def test_a_timeout_names_the_cause_and_the_setting_and_is_worth_a_retry():
    try:
        try:
            raise TimeoutError("read timed out")
        except TimeoutError as inner:
            raise OSError("while fetching") from inner
    except OSError as exc:
        text = message(exc, filename="model.safetensors", timeout=60)
        assert text.startswith("fetching 'model.safetensors' of org/model@%s from %s was interrupted "
                               "(TimeoutError: read timed out; no answer within the timeout of 60 s)" % (SHA, ENDPOINT))
        assert not he.is_definite(exc)


def test_a_full_or_read_only_cache_stops_the_fetch():
    assert he.is_definite(OSError(errno.ENOSPC, "No space left on device"))
    assert he.is_definite(OSError(errno.EROFS, "Read-only file system"))
    assert not he.is_definite(OSError(errno.ECONNRESET, "Connection reset"))
    assert errno.ENOSPC in he.SPACE_ERRNOS and set(he.SPACE_ERRNOS) <= set(he.CACHE_ERRNOS)
