"""mem0's `MemoryClient` (the hosted platform's API) against a gateway; run in its own venv.

Environment: GATEWAY_URL, ALICE_KEY, BOB_KEY, MEM0_TELEMETRY=False. Exit 0 when every
expectation holds. The client sends `Authorization: Token <key>` and checks it on `/v1/ping/`.
"""

import os

assert os.environ.get("MEM0_TELEMETRY") == "False"

from mem0 import MemoryClient  # noqa: E402 (telemetry must be off before the import)

url = os.environ["GATEWAY_URL"]
alice = MemoryClient(api_key=os.environ["ALICE_KEY"], host=url)
bob = MemoryClient(api_key=os.environ["BOB_KEY"], host=url)

added = alice.add("I sail from the harbour at dawn", user_id="alice", run_id="sailing")
[memory] = added["results"]
memory_id = memory["id"]

found = alice.search("harbour", filters={"user_id": "alice"})
assert [r["id"] for r in found["results"]] == [memory_id], found
assert found["results"][0]["attachments"] == [], found  # the gateway's addition
assert alice.get(memory_id)["user_id"] == "alice"
assert [m["id"] for m in alice.get_all(filters={"user_id": "alice"})["results"]] == [memory_id]


def refused(call, status: int) -> None:
    """The SDK turns an HTTP error into its own exception, with error_code HTTP_<status>."""
    try:
        call()
    except Exception as exc:
        assert getattr(exc, "error_code", None) == f"HTTP_{status}", (status, repr(exc))
        return
    raise AssertionError(f"bob was let through (expected {status})")


refused(lambda: bob.search("harbour", filters={"user_id": "alice"}), 403)
refused(lambda: bob.get(memory_id), 404)
refused(lambda: bob.delete(memory_id), 404)
refused(lambda: bob.add("hi", user_id="alice"), 403)
refused(lambda: bob.add("hi", user_id="bob", run_id="sailing"), 403)
# A run a read names must be the caller's (OR or not): alice's and no one's both read as missing.
refused(lambda: bob.get_all(filters={"OR": [{"user_id": "bob"}, {"run_id": "sailing"}]}), 404)
refused(lambda: bob.get_all(filters={"OR": [{"user_id": "bob"}, {"run_id": "other"}]}), 404)
assert bob.search("harbour", filters={"user_id": "bob"})["results"] == []
assert alice.get(memory_id)["memory"] == "I sail from the harbour at dawn"  # still there
alice.delete(memory_id)
print("ok")
