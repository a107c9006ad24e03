"""Engine adapters (`upstream.flavor`): the engine-native paths intercepted, and how each
engine's bodies and answers map to the gateway's (docs/engines.md)."""

from __future__ import annotations

from gateway.config import Settings
from gateway.upstream.flavors import everos, everos_cloud, mem0, memos
from gateway.upstream.flavors.base import ADD, SEARCH, AddScope, Dialect, Flavor, NativeRoute

FLAVORS: dict[str, Flavor] = {
    flavor.name: flavor
    for flavor in (everos.FLAVOR, everos_cloud.FLAVOR, everos_cloud.FLAVOR_V1, mem0.FLAVOR,
                   memos.FLAVOR)
}


def flavor_for(settings: Settings) -> Flavor:
    return FLAVORS[settings.upstream.flavor]


__all__ = ["ADD", "FLAVORS", "SEARCH", "AddScope", "Dialect", "Flavor", "NativeRoute",
           "flavor_for"]
