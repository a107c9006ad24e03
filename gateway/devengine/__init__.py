"""The built-in dev engine: EverOS 1.5.1's HTTP API for development and end-to-end tests, without
a model. A development aid, not part of the product's request path.

It validates with the engine's own request models (`gateway.upstream.flavors.everos_models`) and
answers with the engine's statuses, error envelope and answer shapes (`app`). It ingests as the
engine does: engine-made message ids, file items parsed where no model is needed (`parse`),
items recorded with `parsed_content` / `parse_status` (`ingest`). It extracts by deterministic
rules (`extract`): cells at the engine's hard limit and at gaps over 4 hours, an episode per user
sender restating the cell's messages, agent cases for assistant senders of trajectories that pass
the case extractor's structural gates, one merged episode (`session_id` null) per user with
episodes in two or more sessions. It writes no text its input does not hold: where the engine
would ask its model (narratives, titles, captions, profiles, skills) the dev engine restates or
leaves empty. Search is keyword overlap (`keywords`); filters are compiled as the engine compiles
them (`filters`). Storage: `store`. docs/engines.md lists where it differs from the engine.
"""
