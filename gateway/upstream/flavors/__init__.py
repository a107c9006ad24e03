"""Engine adapters (`upstream.flavor`): the engine-native paths intercepted, and how each
engine's bodies and answers map to the gateway's (docs/engines.md)."""

from __future__ import annotations

from gateway.config import ConfigError, Settings
from gateway.upstream.flavors import everos, everos_cloud, mem0, memos
from gateway.upstream.flavors.base import ADD, SEARCH, AddScope, Dialect, Flavor, NativeRoute

FLAVORS: dict[str, Flavor] = {
    flavor.name: flavor
    for flavor in (everos.FLAVOR, everos_cloud.FLAVOR, everos_cloud.FLAVOR_V1, mem0.FLAVOR,
                   memos.FLAVOR)
}


def flavor_for(settings: Settings) -> Flavor:
    return FLAVORS[settings.upstream.flavor]


def check_erased_users(settings: Settings) -> None:
    """`auth.erased_users = "fresh"` only where the engine deletes a user's memories (SPEC §17):
    elsewhere a returning id would be handed its predecessor's memories."""
    flavor = FLAVORS.get(settings.upstream.flavor)
    if settings.auth.erased_users == "fresh" and flavor is not None and not flavor.erase_calls:
        raise ConfigError(f"auth.erased_users: fresh needs an engine that deletes a user's "
                          f"memories, and upstream.flavor {flavor.name} serves no delete (a "
                          f"returning id would see the erased user's memories): use refuse")


__all__ = ["ADD", "FLAVORS", "SEARCH", "AddScope", "Dialect", "Flavor", "NativeRoute",
           "check_erased_users", "flavor_for"]
