"""The everos-cloud 0.4.x SDK (the Cloud's v1 API) against a gateway; run in its own venv.

Environment: GATEWAY_URL, ALICE_KEY, BOB_KEY. Exit 0 when every expectation holds.
"""

import os
import time

import everos_cloud
from everos_cloud import EverOS

assert everos_cloud.__version__.startswith("0.4."), everos_cloud.__version__
url = os.environ["GATEWAY_URL"]
alice = EverOS(api_key=os.environ["ALICE_KEY"], base_url=url, max_retries=0)
bob = EverOS(api_key=os.environ["BOB_KEY"], base_url=url, max_retries=0)
now = int(time.time() * 1000)

added = alice.v1.memories.add(user_id="alice", session_id="harbour-trip", messages=[
    {"role": "user", "sender_id": "alice", "timestamp": now,
     "content": "we watched the harbour at dawn"}])
assert added.status == "ok", added

found = alice.v1.memories.search(query="harbour", filters={"user_id": "alice"})
episodes = found.data.episodes
assert [e.session_id for e in episodes] == ["harbour-trip"], found
assert episodes[0].to_dict().get("attachments") == [], found  # the gateway's addition

# bob cannot read or write as alice, nor search without naming himself.
for call in (
    lambda: bob.v1.memories.search(query="harbour", filters={"user_id": "alice"}),
    lambda: bob.v1.memories.add(user_id="alice", messages=[
        {"role": "user", "sender_id": "bob", "timestamp": now, "content": "x"}]),
    lambda: bob.v1.memories.add(user_id="bob", session_id="harbour-trip", messages=[
        {"role": "user", "sender_id": "bob", "timestamp": now, "content": "x"}]),
):
    try:
        call()
    except everos_cloud.PermissionDeniedError:
        pass
    else:
        raise AssertionError("bob was let through")
try:
    bob.v1.memories.search(query="harbour", filters={})
except everos_cloud.UnprocessableEntityError:
    pass
else:
    raise AssertionError("a search naming no user was let through")
theirs = bob.v1.memories.search(query="harbour", filters={"user_id": "bob"})
assert theirs.data.episodes == [], theirs
print("ok")
