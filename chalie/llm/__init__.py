"""LLM providers behind one internal shape: ChatRequest in, ChatResponse out."""
