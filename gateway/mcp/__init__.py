"""`/mcp`: the caller's memory as Model Context Protocol tools and resources (SPEC §19).

A front door, not a second implementation: every tool and resource turns its arguments into a
call of the REST route it mirrors (`Gateway.call_as`, gateway/serving/inprocess.py), so route
models, ownership checks, interception, limits, metrics and logs run once, in one place.

- metadata.py: the endpoint's URLs, JWT audience, RFC 9728 metadata and WWW-Authenticate values
- schemas.py: each tool's arguments and answer, as models (their JSON Schemas are the contract)
- errors.py: JSON-RPC errors and `isError` results in the shapes of §19
- tools.py: the tools, each a call of its REST twin
- resources.py: `resources/list` and `resources/read` (`resource://`, `attachment://`)
- server.py: the SDK's low-level server with those handlers
- mount.py: the ASGI door in the app: credentials, scopes, transport security, the SDK's
  stateless streamable HTTP transport
"""
