"""The everos 0.4 SDK's multimodal add with a local path, against a gateway; own venv.

Environment: GATEWAY_URL, ALICE_KEY, BOB_KEY, PHOTO. Exit 0 when every expectation holds.
"""

import os
import time

import everos_cloud
from everos_cloud import EverOS

url = os.environ["GATEWAY_URL"]
alice = EverOS(api_key=os.environ["ALICE_KEY"], base_url=url, max_retries=0)
bob = EverOS(api_key=os.environ["BOB_KEY"], base_url=url, max_retries=0)
now = int(time.time() * 1000)

# The SDK signs the file at /api/v1/object/sign, posts it to the signed form, then adds.
added = alice.v1.memories.add(user_id="alice", session_id="harbour-trip", messages=[
    {"role": "user", "sender_id": "alice", "timestamp": now, "content": [
        {"type": "text", "text": "we watched the harbour at dawn"},
        {"type": "image", "uri": os.environ["PHOTO"], "name": "harbour.png"}]}])
assert added.status == "ok", added

found = alice.v1.memories.search(query="harbour", filters={"user_id": "alice"})
[episode] = found.data.episodes
names = [a["name"] for a in episode.to_dict().get("attachments") or []]
assert names == ["harbour.png"], found

# bob signs his own object, but cannot name alice's: sign one as alice to learn a key of hers.
signed = alice.v1.object.sign(object_list=[
    {"file_id": "x", "file_name": "harbour.png", "file_type": "image"}])
alices_key = signed.result.data.object_list[0].object_key
try:
    bob.v1.memories.add(user_id="bob", session_id="bobs", messages=[
        {"role": "user", "sender_id": "bob", "timestamp": now, "content": [
            {"type": "image", "uri": alices_key}]}])
except everos_cloud.UnprocessableEntityError:
    pass
else:
    raise AssertionError("bob named alice's object key")
theirs = bob.v1.object.sign(object_list=[
    {"file_id": "y", "file_name": "mine.png", "file_type": "image"}])
assert theirs.status == 0 and theirs.result.data.object_list[0].object_key != alices_key
print("ok")
