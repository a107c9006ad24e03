"""Which image a chat turn means (SPEC §12): reference parsing and its lexicon, the scene,
canvas geometry, the fixed-priority resolver and model disambiguation for ties."""
