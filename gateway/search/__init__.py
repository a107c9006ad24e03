"""Search answers: the result items of any engine's page, the caller's attachment index, filename
matching, and the optional C page scanner that answers plain pages in one pass."""
