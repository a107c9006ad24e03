"""The built-in dev engine: a small EverOS v2-speaking memory engine for development and
end-to-end tests. A development aid, not part of the product's request path."""
