"""The engine side: the upstream HTTP clients, the pass-through proxy and each flavour's
routes and body shapes."""
