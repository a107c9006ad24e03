"""Optional model calls: the chat-completions client and the rolling conversation summary."""
