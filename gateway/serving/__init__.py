"""Serving: how a request becomes an ASGI call and an answer goes back: the HTTP protocol,
connection guards, worker processes, raw-ASGI bodies and replies, the owned routes' index,
in-process calls."""
