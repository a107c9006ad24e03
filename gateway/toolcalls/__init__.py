"""Tool calls that wait for the user's confirmation (SPEC §16, docs/tool-calls.md): the registry,
canonical args, display, the state machine, the job-service client, and the flow that ties them.
"""
