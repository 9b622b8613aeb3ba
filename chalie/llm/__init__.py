"""LLM providers behind one internal shape: ChatRequest in, ChatResponse out.

The bottom of the core floor: it imports only the ground floor (no store)."""
