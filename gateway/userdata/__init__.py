"""A user's data as one thing (SPEC §17): erase it everywhere, export it whole, and refuse (or let
back) a credential naming an erased user."""
