"""everos-cloud 1.2.0's quickstart against a gateway by base URL, then the routes it added that
the gateway keeps closed (each a 404 saying why); own venv (the SDK needs Python >= 3.12).

Environment: GATEWAY_URL, USER_KEY (a key of `user-1`). Exit 0 when every expectation holds.
"""

import os

from everos_cloud import EverOS

MEMORY_ID = "0123456789abcdef01234567"  # the Cloud's ids are 24 characters

# The quickstart, as its README has it, with the gateway's URL and key.
with EverOS(api_key=os.environ["USER_KEY"], host=os.environ["GATEWAY_URL"]) as client:
    client.add(session_id="session-1", messages=[
        {"sender_id": "user-1", "role": "user", "content": "I love hiking in the mountains"},
    ])
    client.flush(session_id="session-1")
    results = client.search("hiking", user_id="user-1")
    print(results)
    assert any("hiking" in (e.episode or "") for e in results.episodes), results

    closed = {
        "kb_create": lambda: client.kb_create("Employee Handbook"),
        "update": lambda: client.update(MEMORY_ID, episode="x"),
        "delete_by_ids": lambda: client.delete_by_ids([MEMORY_ID]),
        "feedback": lambda: client.feedback(MEMORY_ID, "positive"),
        "tag_bind": lambda: client.tag_bind("episode", [MEMORY_ID], ["t"]),
    }
    for name, call in closed.items():
        try:
            call()
        except Exception as exc:  # the SDK's API error carries the status and the body
            text = str(exc) + repr(getattr(exc, "body", ""))
            status = getattr(exc, "status", None)
            assert status == 404, (name, status, text)
            assert "does not open" in text and "route_not_found" in text, (name, text)
            print(name, "404:", text[:200])
        else:
            raise AssertionError(f"{name} was answered")
print("ok")
