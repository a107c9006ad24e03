"""Who is calling and what they may name: API keys and the body identity checks (SPEC §3)."""
