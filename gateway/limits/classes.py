"""Which route class a request counts against, from the route tables themselves. Pure: no I/O.

engine_read: engine routes that only read (safe methods, searches, the POSTs a table marks
`reads`); engine_write: every other engine route (add, flush, delete, edit...); upload: a
`/resources` upload, and the SDKs' sign requests, each opening up to 50 single-use upload forms
(`/uploads/{token}`, whose token is its credential); owned: the gateway's own application routes.
"""

from __future__ import annotations

from gateway.upstream.flavors.base import ADD, Flavor
from gateway.upstream.routes import EngineRoute

ENGINE_READ = "engine_read"
ENGINE_WRITE = "engine_write"
UPLOAD = "upload"
OWNED = "owned"
ROUTE_CLASSES = (ENGINE_READ, ENGINE_WRITE, UPLOAD, OWNED)
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})

# The owned routes that are engine calls or uploads (gateway/routes/memories.py, resources.py).
OWN_ADD_PATH = "/memories/add"
OWN_SEARCH_PATH = "/memories/search"
UPLOAD_PATH = "/resources"
# The SDKs' upload step (gateway/routes/uploads.py): its forms are posted without a key.
SIGN_PATHS = ("/api/v2/object/sign", "/api/v1/object/sign")


def engine_class(route: EngineRoute) -> str:
    """An engine route's class: a read when the engine only reads by it, else a write."""
    if route.read_only:
        return ENGINE_READ
    return ENGINE_WRITE


def owned_classes(flavor: Flavor) -> dict[tuple[str, str], str]:
    """(method, route path template) -> class for the owned routes that are not `owned`:
    `/memories/add|search`, the flavour's intercepted engine paths, and uploads."""
    classes = {
        ("POST", OWN_ADD_PATH): ENGINE_WRITE,
        ("POST", OWN_SEARCH_PATH): ENGINE_READ,
        ("POST", UPLOAD_PATH): UPLOAD,
    }
    if flavor.signs_files:
        classes.update({("POST", path): UPLOAD for path in SIGN_PATHS})
    for native in flavor.native:
        # Matched as gateway/routes/memories.py registers them: without a trailing slash.
        classes[("POST", native.path.rstrip("/"))] = (
            ENGINE_WRITE if native.kind == ADD else ENGINE_READ)
    return classes
